//! Command-line parsing and dispatch. Each subcommand lives in its own module
//! with its own `Args`.

mod bench_compare;
mod bench_kernel;
mod bench_queue;
mod bench_scale;
mod color;
mod completions;
mod count;
mod demo;
mod dry_run;
pub(crate) mod exit;
mod files;
mod keys;
mod logs;
mod man;
mod metrics_listen;
mod migrate;
mod price;
mod probes;
mod queue_flags;
mod redact;
mod results;
mod serve;
mod status;
mod submit;
mod worker;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

pub(crate) use color::Color;
use exit::Outcome;
pub(crate) use logs::json as json_log;

/// mcq — a distributed Monte Carlo job queue for Asian-option pricing.
#[derive(Debug, Parser)]
#[command(
    name = "mcq",
    version,
    about,
    propagate_version = true,
    after_help = EXIT_CODES
)]
pub(crate) struct Cli {
    /// Colours on the terminal: auto (unless NO_COLOR is set), always or never.
    #[arg(long, global = true, value_enum, default_value_t = Color::Auto)]
    color: Color,
    #[command(subcommand)]
    command: Command,
}

/// The exit codes, at the end of `mcq --help` and in the man page.
const EXIT_CODES: &str = "Exit codes: 0 done; 1 the work failed or was cancelled; \
2 bad usage or input; 3 the server or the database could not be reached.";

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
    /// A batch's results as CSV, JSON lines or a table.
    Results(results::Args),
    /// The original experiment in one command: service vs local on 100 calls.
    Demo(demo::Args),
    /// API keys: create (printed once), list, revoke.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    /// Tenants and their quotas.
    #[command(subcommand)]
    Tenants(keys::TenantsCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::Args),
    /// Print mcq's man page (roff), or write one page per command.
    Man(man::Args),
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Nanoseconds per path-step of the kernel against the original loop.
    Kernel(bench_kernel::Args),
    /// The same batch locally and through the service; tables and charts.
    Compare(bench_compare::Args),
    /// Queue throughput: enqueue rate, burn-down, pickup latency, recovery.
    Queue(bench_queue::Args),
    /// Throughput against fleet size, with simulated workers whose tasks
    /// hold a slot without using the CPU.
    Scale(bench_scale::Args),
}

/// Parses the command line, honouring `--color` in clap's own messages.
/// Usage errors, `--help` and `--version` end here with their exit code.
pub(crate) fn parse(args: Vec<OsString>) -> Result<Cli, ExitCode> {
    let color = Color::scan(&args);
    color::set(color);
    let matches = Cli::command()
        .color(color.for_clap())
        .try_get_matches_from(args)
        .and_then(|matches| Cli::from_arg_matches(&matches));
    matches.map_err(|err| {
        let _ = err.print();
        ExitCode::from(if err.use_stderr() {
            exit::USAGE
        } else {
            exit::OK
        })
    })
}

/// Runs the parsed command.
/// Whether a command is one whose output people pipe into `head`, `jq`
/// or `grep`. Such a command ends quietly when the reader goes away, as
/// Unix tools do (killed by `SIGPIPE`), rather than panicking on the
/// failed write. The commands that run a server or workers in this
/// process keep Rust's default, so that a closed pipe can never take
/// down the work they are doing.
fn writes_for_pipes(command: &Command) -> bool {
    !matches!(
        command,
        Command::Serve(_) | Command::Worker(_) | Command::Demo(_) | Command::Bench(_)
    )
}

pub(crate) fn run(cli: Cli) -> anyhow::Result<Outcome> {
    color::set(cli.color);
    if writes_for_pipes(&cli.command) {
        sigpipe::reset();
    }
    match cli.command {
        Command::Price(args) => price::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Worker(args) => worker::run(args),
        Command::Migrate(args) => migrate::run(args),
        Command::Submit(args) => submit::run(args),
        Command::Status(args) => status::run(args),
        Command::Results(args) => results::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Keys(command) => keys::run_keys(command),
        Command::Tenants(command) => keys::run_tenants(command),
        Command::Bench(BenchCommand::Kernel(args)) => bench_kernel::run(args),
        Command::Bench(BenchCommand::Compare(args)) => bench_compare::run(args),
        Command::Bench(BenchCommand::Queue(args)) => bench_queue::run(args),
        Command::Bench(BenchCommand::Scale(args)) => bench_scale::run(args),
        Command::Completions(args) => completions::run(&args, Cli::command()),
        Command::Man(args) => man::run(&args, Cli::command()),
    }
}
