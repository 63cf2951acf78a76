//! Settings every pooled connection gets before its first statement, so
//! that no session of mcq holds locks without a bound.
//!
//! A worker can stop answering at any moment (SIGSTOP, a GC pause, a
//! suspended VM, a partition that leaves the TCP connection open). If it
//! stops between two statements of a transaction, its row locks stay taken
//! and every worker that needs those rows waits; the reaper skips locked
//! rows, so the frozen worker's expired leases are not rescued either. The
//! lease is the damage a lost worker may do, so every bound is shorter
//! than the lease (a 10 s lease gives 5 s, 2.5 s and 5 s):
//!
//! - `idle_in_transaction_session_timeout`, half the lease: a session idle
//!   inside a transaction that long is ended by the server, which releases
//!   its locks.
//! - `lock_timeout`, a quarter of the lease: no statement waits longer for
//!   a lock (shorter than the statement bound, so a wait for a lock fails
//!   as one, 55P03).
//! - `statement_timeout`, half the lease: no statement runs longer.
//!
//! Each failure is one of the errors callers retry later
//! (`StoreError::is_unavailable`).
//!
//! Migrations run on a connection of their own without these bounds (a
//! schema change may rightly take minutes).
//!
//! Through a pool in transaction mode a `SET` would land on whichever
//! server connection ran it, so the store sets nothing there; the bounds
//! must come from the pooler (PgBouncer: `connect_query` on the database),
//! and [`warn_unbounded`] says at start, with the line to add, when they
//! do not.

use std::time::Duration;

use sqlx::Executor as _;
use sqlx::postgres::PgConnection;

/// `lease / divisor` in whole milliseconds, at least 1 (PostgreSQL reads 0
/// as "no bound").
pub(super) fn bound_ms(lease: Duration, divisor: u128) -> u64 {
    u64::try_from(lease.as_millis() / divisor)
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Applies the bounds to a new connection, in one round trip.
pub(super) async fn apply(conn: &mut PgConnection, lease: Duration) -> Result<(), sqlx::Error> {
    // `SET` takes no bind parameters, set_config does; `false`: for the
    // session, not only the current transaction.
    conn.execute(
        sqlx::query(
            "SELECT set_config('idle_in_transaction_session_timeout', $1, false),
                    set_config('lock_timeout', $2, false),
                    set_config('statement_timeout', $1, false)",
        )
        .bind(bound_ms(lease, 2).to_string())
        .bind(bound_ms(lease, 4).to_string()),
    )
    .await?;
    Ok(())
}

/// The three settings, in the order `connect_query` sets them.
const BOUNDS: [&str; 3] = [
    "idle_in_transaction_session_timeout",
    "lock_timeout",
    "statement_timeout",
];

/// The pooler's `connect_query` that gives every server connection the
/// bounds of `lease`.
pub(super) fn connect_query(lease: Duration) -> String {
    let values = [bound_ms(lease, 2), bound_ms(lease, 4), bound_ms(lease, 2)];
    BOUNDS
        .iter()
        .zip(values)
        .map(|(name, ms)| format!("SET {name} = {ms}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Through a transaction-mode pool: warns when a server connection has no
/// bound (a setting of 0), naming the `connect_query` that adds them. The
/// check asks one server connection; the pooler sets them all alike.
pub(super) async fn warn_unbounded(conn: &mut PgConnection, lease: Duration) {
    let sql = "SELECT current_setting('idle_in_transaction_session_timeout'), \
                      current_setting('lock_timeout'), current_setting('statement_timeout')";
    let shown = match sqlx::raw_sql(sql).fetch_one(&mut *conn).await {
        Ok(row) => (0..3)
            .map(|i| sqlx::Row::try_get::<String, _>(&row, i))
            .collect::<Result<Vec<_>, _>>(),
        Err(err) => Err(err),
    };
    match shown {
        Ok(values) => {
            let unbounded: Vec<&str> = BOUNDS
                .iter()
                .zip(&values)
                .filter(|(_, value)| value.as_str() == "0")
                .map(|(name, _)| *name)
                .collect();
            if !unbounded.is_empty() {
                tracing::warn!(
                    unbounded = %unbounded.join(", "),
                    "through a pool in transaction mode the server connections carry no bound on \
                     {}: a frozen process may hold its locks until the pooler ends its \
                     connection; give the database in pgbouncer.ini connect_query='{}'",
                    unbounded.join(", "),
                    connect_query(lease)
                );
            }
        }
        Err(err) => tracing::debug!(error = %err, "could not read the session bounds"),
    }
}

#[cfg(test)]
mod tests {
    use super::bound_ms;
    use std::time::Duration;

    #[test]
    fn bounds_are_fractions_of_the_lease_and_never_zero() {
        assert_eq!(bound_ms(Duration::from_secs(10), 2), 5_000);
        assert_eq!(bound_ms(Duration::from_secs(10), 4), 2_500);
        assert_eq!(bound_ms(Duration::from_millis(201), 2), 100);
        assert_eq!(bound_ms(Duration::from_millis(1), 2), 1);
        assert_eq!(bound_ms(Duration::ZERO, 4), 1);
    }

    #[test]
    fn the_poolers_connect_query_sets_the_bounds_of_the_lease() {
        assert_eq!(
            super::connect_query(Duration::from_secs(10)),
            "SET idle_in_transaction_session_timeout = 5000; SET lock_timeout = 2500; \
             SET statement_timeout = 5000"
        );
    }
}

/// The bounds on a real server, through the pool the queue uses. Each
/// wait is capped at 30 s by the test so that a missing bound fails it
/// rather than hanging it.
#[cfg(test)]
mod on_postgres {
    use std::sync::Arc;
    use std::time::Duration;

    use sqlx::Connection as _;

    use crate::postgres::PgQueue;
    use crate::store::QueueConfig;

    const PATIENCE: Duration = Duration::from_secs(30);

    async fn queue(url: &str) -> PgQueue {
        let config = QueueConfig {
            lease: Duration::from_secs(1),
            ..QueueConfig::default()
        };
        PgQueue::connect(url, Arc::new(config))
            .await
            .expect("connect")
    }

    #[tokio::test]
    async fn every_pooled_connection_carries_its_bounds() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = queue(&db.url).await;
        for (setting, show) in [
            (
                "idle_in_transaction_session_timeout",
                "SHOW idle_in_transaction_session_timeout",
            ),
            ("statement_timeout", "SHOW statement_timeout"),
        ] {
            let shown: String = sqlx::query_scalar(show)
                .fetch_one(&q.pool)
                .await
                .expect("show");
            assert_eq!(shown, "500ms", "{setting}");
        }
        let lock: String = sqlx::query_scalar("SHOW lock_timeout")
            .fetch_one(&q.pool)
            .await
            .expect("show");
        assert_eq!(lock, "250ms");
        let slow = tokio::time::timeout(
            PATIENCE,
            sqlx::query("SELECT pg_sleep(20)").execute(&q.pool),
        )
        .await
        .expect("the statement bound ends a long statement");
        let err = slow.expect_err("cancelled");
        assert!(crate::outage::is_outage(&err), "retried later: {err:?}");
        let code = err.into_database_error();
        assert_eq!(
            code.and_then(|e| e.code().map(|c| c.into_owned()))
                .as_deref(),
            Some("57014")
        );
        // Migrations are not bound: they run on a connection of their own.
        q.migrate().await.expect("migrate");
    }

    #[tokio::test]
    async fn a_wait_for_a_lock_ends_within_the_bound() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = queue(&db.url).await;
        // A holder outside the pool, so without bounds of its own.
        let mut holder = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        let mut tx = holder.begin().await.expect("begin");
        sqlx::query("SELECT pg_advisory_xact_lock(4242)")
            .execute(&mut *tx)
            .await
            .expect("lock");
        let waited = tokio::time::timeout(
            PATIENCE,
            sqlx::query("SELECT pg_advisory_lock(4242)").execute(&q.pool),
        )
        .await
        .expect("the lock bound ends the wait");
        let err = waited.expect_err("lock not granted");
        assert!(crate::outage::is_outage(&err), "retried later: {err:?}");
        let code = err.into_database_error();
        assert_eq!(
            code.and_then(|e| e.code().map(|c| c.into_owned()))
                .as_deref(),
            Some("55P03")
        );
        tx.rollback().await.expect("rollback");
    }

    #[tokio::test]
    async fn a_frozen_transaction_loses_its_locks_within_the_bound() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = queue(&db.url).await;
        // A worker that stops answering inside a transaction holding a lock.
        let mut frozen = q.pool.begin().await.expect("begin");
        sqlx::query("SELECT pg_advisory_xact_lock(4343)")
            .execute(&mut *frozen)
            .await
            .expect("lock");
        // The server ends the idle transaction, and its lock goes with it.
        let mut other = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        let start = std::time::Instant::now();
        loop {
            let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(4343)")
                .fetch_one(&mut other)
                .await
                .expect("try lock");
            if free {
                break;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "the frozen transaction still holds its lock"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            sqlx::query("SELECT 1").execute(&mut *frozen).await.is_err(),
            "the server ended the frozen session"
        );
    }
}
