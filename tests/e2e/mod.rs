//! End-to-end tests: real `mcq serve` (and `mcq worker`) processes over real
//! SQLite files and PostgreSQL databases, driven over HTTP by the client.
//! Every result is checked bit for bit against the kernel in this process;
//! the metrics scraped from those processes are checked against the batch
//! and against what the Grafana dashboard queries.

mod batch;
mod commands;
mod dry_run;
mod keys;
mod metrics;
mod readme;
mod results_stream;
mod server;
