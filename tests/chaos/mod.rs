//! The chaos suite: real `mcq` processes, real PostgreSQL servers and
//! SQLite files, real signals. Each scenario runs jobs through a fault and
//! then asserts the same outcome ([`outcome::assert_exactly_once`]): every
//! job in one final state with exactly one result, equal to the local
//! kernel's (and to `mcq price`) bit for bit, no partial batch, and the
//! system back at work within a stated, generous bound.
//!
//! Scenarios that stop or restart PostgreSQL use a private cluster each,
//! never the shared test cluster. Figures the scenarios print (recovery
//! times, throughput) are collected in docs/results.md; no test asserts a
//! wall-clock time tighter than its bound of tens of seconds.
//!
//! Covered elsewhere and not repeated here: one worker SIGKILLed
//! (`process::kill`), the late completions of a frozen worker one round
//! at a time (`process::freeze`; `frozen` here measures what a freeze
//! costs the others), an immediate restart under workers alone
//! (`process::restart`), and `max_connections` pressure
//! (`process::connections`).

mod api;
mod backlog;
mod database;
mod embedded;
mod frozen;
mod horizon;
mod kills;
mod outcome;
mod pooler;
mod submissions;
