//! Where the long-running commands log and in which shape: `--log-format
//! text|json` (or `MCQ_LOG_FORMAT`), to standard error, filtered by
//! `RUST_LOG`.
//!
//! Text is for people: colours only on a terminal (`--color`, `NO_COLOR`).
//! JSON is for log shippers: one object per line with the timestamp, the
//! level, the target, the event's fields (its message among them) and the
//! spans it happened in, so that every line of a request carries its
//! request id and every line of a task its job and batch.

use std::sync::atomic::{AtomicBool, Ordering};

use super::color;

/// Whether the log is JSON; set once by [`init`].
static JSON: AtomicBool = AtomicBool::new(false);

/// The `--log-format` flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// One line per event, `key=value` fields, spans as a prefix.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `--log-format`, flattened into every command that logs while it runs.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LogFlags {
    /// Shape of the log on standard error: text (plain unless stderr is a
    /// terminal) or json (one object per line, with the spans of each event).
    #[arg(long, env = "MCQ_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

impl LogFlags {
    /// Installs the log; `RUST_LOG` overrides `default_filter`.
    pub(crate) fn init(&self, default_filter: &str) {
        init(self.log_format, default_filter);
    }
}

/// Installs the process's log subscriber, once: a second initialisation
/// (tests, `mcq demo` after a server) keeps the first.
pub(crate) fn init(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    JSON.store(format == LogFormat::Json, Ordering::Relaxed);
    let _ = match format {
        LogFormat::Text => builder.with_ansi(color::stderr()).try_init(),
        LogFormat::Json => builder
            .json()
            .with_ansi(false)
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
}

/// Whether standard error carries JSON lines, so that even the error a
/// command ends with is written as one.
pub(crate) fn json() -> bool {
    JSON.load(Ordering::Relaxed)
}
