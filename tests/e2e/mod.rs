//! End-to-end tests: real `mcq serve` (and `mcq worker`) processes over real
//! SQLite files and PostgreSQL databases, driven over HTTP by the client.
//! Every result is checked bit for bit against the kernel in this process.

mod batch;
mod commands;
mod keys;
mod readme;
mod results_stream;
mod server;
