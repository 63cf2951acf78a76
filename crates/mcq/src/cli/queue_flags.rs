//! The queue settings `mcq serve` and `mcq worker` both take: how often a
//! task is tried, how long finished jobs are kept, how many PostgreSQL
//! connections the process may open and when it calls the database
//! unreachable. Set the first two alike on every
//! process of one deployment: each process applies its own.

use std::time::Duration;

use mcq_queue::{PoolMode, QueueConfig};

use super::count::count;

/// Longest retention accepted: ten years.
const MAX_RETENTION: Duration = Duration::from_secs(3650 * 86_400);

/// Shortest retention accepted: results must outlive the poll that reads them.
const MIN_RETENTION: Duration = Duration::from_secs(60);

/// `--max-attempts`, `--retention`, `--db-pool-size`,
/// `--db-unreachable-after` and `--db-pool-mode`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct QueueFlags {
    /// Times a task is claimed before its job fails: a task whose worker
    /// crashed, lost its lease or hit an error is tried again, up to this
    /// many claims in all (1 to 100).
    #[arg(long, env = "MCQ_MAX_ATTEMPTS", default_value = "3", value_parser = count::<u32>(1..=100))]
    max_attempts: u32,
    /// How long finished jobs, their results and idempotency keys are kept
    /// before workers prune them: a number with s, m, h or d (`90m`, `7d`),
    /// from 1m to 3650d.
    #[arg(long, env = "MCQ_RETENTION", default_value = "7d", value_parser = retention)]
    retention: Duration,
    /// PostgreSQL: most connections this process opens, 2 to 1000 (one of
    /// them is held by `LISTEN`, so one would leave none for the queue).
    /// A worker uses up to 6 at once, a server one per request in flight;
    /// see deploy/README.md to size `max_connections`.
    #[arg(long, env = "MCQ_DB_POOL_SIZE", default_value = "16", value_parser = count::<u32>(2..=1000))]
    db_pool_size: u32,
    /// PostgreSQL: seconds, 0.1 to 5, after which a call waiting for a
    /// connection gives up as "database unavailable" (the API's 503) when
    /// the pool handed out none and took none back although it could open
    /// more. A pool whose every connection is at work is waited for up to
    /// 5 s. Raise it where opening a connection takes longer (a server far
    /// away).
    #[arg(long, env = "MCQ_DB_UNREACHABLE_AFTER", default_value = "0.9", value_parser = unreachable_after)]
    db_unreachable_after: Duration,
    /// PostgreSQL: `session` when each connection is a session of its own
    /// (directly, or through a pool in session mode); `transaction` through
    /// PgBouncer 1.21 or later in transaction mode (with
    /// `max_prepared_statements`). Then the process opens no `LISTEN`:
    /// workers find new work at their `--poll`, long polls re-read every
    /// 25 ms at most, and the pooler must set the session bounds
    /// (`connect_query`, see deploy/README.md). Migrations need a session:
    /// run `mcq migrate` directly.
    #[arg(long, env = "MCQ_DB_POOL_MODE", default_value = "session", value_parser = pool_mode)]
    db_pool_mode: PoolMode,
}

impl QueueFlags {
    /// `base` with these settings.
    pub(crate) fn apply(&self, base: QueueConfig) -> QueueConfig {
        QueueConfig {
            max_attempts: self.max_attempts,
            retention: self.retention,
            pool_size: self.db_pool_size,
            unreachable_after: self.db_unreachable_after,
            pool_mode: self.db_pool_mode,
            ..base
        }
    }
}

/// Parses `--db-pool-mode`: `session` or `transaction`, PgBouncer's names.
pub(crate) fn pool_mode(text: &str) -> Result<PoolMode, String> {
    match text {
        "session" => Ok(PoolMode::Session),
        "transaction" => Ok(PoolMode::Transaction),
        _ => Err(format!(
            "{text:?} is not a pool mode: session (direct, or a pool in session mode) or \
             transaction (PgBouncer 1.21 or later in transaction mode)"
        )),
    }
}

/// Parses `--db-unreachable-after`: seconds from 0.1 to 5.
fn unreachable_after(text: &str) -> Result<Duration, String> {
    let value: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(0.1..=5.0).contains(&value) {
        return Err(format!("{text:?} is not from 0.1 to 5 seconds"));
    }
    Ok(Duration::from_secs_f64(value))
}

/// Parses a retention such as `90s`, `30m`, `12h` or `7d` (a bare number
/// is seconds) within the accepted range.
fn retention(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| c.is_ascii_alphabetic()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let scale = match unit {
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return Err(format!("{text:?}: the unit must be s, m, h or d (e.g. 7d)")),
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 90m, 12h, 7d)"))?;
    let secs = value * scale;
    if !(secs.is_finite()
        && (MIN_RETENTION.as_secs_f64()..=MAX_RETENTION.as_secs_f64()).contains(&secs))
    {
        return Err(format!("{text:?} is not in 1m..=3650d"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_after_takes_seconds_within_the_range() {
        assert_eq!(unreachable_after("0.9"), Ok(Duration::from_millis(900)));
        assert_eq!(unreachable_after("5"), Ok(Duration::from_secs(5)));
        for bad in ["", "0", "0.05", "5.1", "NaN", "inf", "1s"] {
            assert!(unreachable_after(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn pool_mode_takes_the_poolers_names() {
        assert_eq!(pool_mode("session"), Ok(PoolMode::Session));
        assert_eq!(pool_mode("transaction"), Ok(PoolMode::Transaction));
        for bad in ["", "statement", "Transaction", "tx"] {
            assert!(pool_mode(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn retention_takes_units_and_checks_the_range() {
        assert_eq!(retention("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(retention("90m"), Ok(Duration::from_secs(5400)));
        assert_eq!(retention("1.5h"), Ok(Duration::from_secs(5400)));
        assert_eq!(retention("3600"), Ok(Duration::from_secs(3600)));
        for bad in ["", "0", "59s", "3651d", "7w", "d", "-1d", "NaNd", "infh"] {
            assert!(retention(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
