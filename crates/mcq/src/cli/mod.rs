//! Command-line parsing and dispatch. Each subcommand lives in its own module
//! with its own `Args`.

mod bench_compare;
mod bench_kernel;
mod bench_queue;
mod demo;
mod migrate;
mod price;
mod probes;
mod serve;
mod status;
mod submit;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mcq — a distributed Monte Carlo job queue for Asian-option pricing.
#[derive(Debug, Parser)]
#[command(name = "mcq", version, about, propagate_version = true)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Price one option locally and print the result.
    // Negative numbers are values to validate (`--initial -3`), not flags.
    #[command(allow_negative_numbers = true)]
    Price(price::Args),
    /// Run the HTTP API (with embedded workers on the SQLite default).
    Serve(serve::Args),
    /// Run a worker process that claims and computes tasks.
    Worker(worker::Args),
    /// Apply the database migrations and exit.
    Migrate(migrate::Args),
    /// Submit a job or a batch to a running server.
    #[command(allow_negative_numbers = true)]
    Submit(submit::Args),
    /// Show a job or a batch by id.
    Status(status::Args),
    /// The original experiment in one command: service vs local on 100 calls.
    Demo(demo::Args),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Nanoseconds per path-step of the kernel against the original loop.
    Kernel(bench_kernel::Args),
    /// The same batch locally and through the service; tables and charts.
    Compare(bench_compare::Args),
    /// Queue throughput: enqueue rate, burn-down, pickup latency, recovery.
    Queue(bench_queue::Args),
}

/// Runs the parsed command and returns the process exit code.
pub(crate) fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Price(args) => price::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Migrate(args) => migrate::run(args),
        Command::Submit(args) => submit::run(args),
        Command::Status(args) => status::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Bench(BenchCommand::Kernel(args)) => bench_kernel::run(args),
        Command::Bench(BenchCommand::Compare(args)) => bench_compare::run(args),
        Command::Bench(BenchCommand::Queue(args)) => bench_queue::run(args),
    }
}
