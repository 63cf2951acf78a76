//! Refusing a pooler that does not give each connection a session of its
//! own. mcq needs one: `LISTEN` for wake-ups, the per-session bounds of
//! `session.rs`, and the driver's prepared statements all live in the
//! session. Behind PgBouncer's `pool_mode = transaction` (or `statement`)
//! the driver's statements fail at random with "prepared statement
//! \"sqlx_s_1\" already exists" or "does not exist", and the bounds land
//! on whichever server connection ran the `SET`.
//!
//! The test: two connections open at once, each asks for its backend's
//! process id. A direct connection or a session-mode pool gives two
//! backends; a transaction-mode pool hands the one server connection the
//! first just released to the second. Only a certain answer refuses: an
//! error, or no answer in time (a session pool with one server waits for
//! the first connection to close), lets the caller go on.
//!
//! A process started for a transaction-mode pool ([`PoolMode::Transaction`])
//! skips that test and makes the one its mode needs instead: that the pooler
//! keeps each client's prepared statements apart (PgBouncer 1.21 and later
//! with `max_prepared_statements`). Two connections prepare different
//! statements under the driver's first name, one after the other; a pooler
//! that does not track them hands the second the server connection holding
//! the first's, and the server says the name exists.
//!
//! [`PoolMode::Transaction`]: crate::PoolMode::Transaction

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection as _, Row as _};

use crate::store::StoreError;

/// Longest the check waits for its second connection's answer.
const PATIENCE: Duration = Duration::from_secs(3);

/// `Err(StoreError::TransactionPooler)` when two open connections reach
/// the same backend; `Ok` otherwise, including when it cannot tell.
pub(crate) async fn refuse_shared_sessions(options: &PgConnectOptions) -> Result<(), StoreError> {
    let check = async {
        let mut first = PgConnection::connect_with(options).await?;
        let a = backend_pid(&mut first).await?;
        let mut second = PgConnection::connect_with(options).await?;
        let b = backend_pid(&mut second).await?;
        let _ = second.close().await;
        let _ = first.close().await;
        Ok::<_, sqlx::Error>((a, b))
    };
    match tokio::time::timeout(PATIENCE, check).await {
        Ok(Ok((a, b))) if a == b => Err(StoreError::TransactionPooler { backend: a }),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "could not check that connections keep their sessions");
            Ok(())
        }
        Err(_) => {
            tracing::debug!("no answer in time checking that connections keep their sessions");
            Ok(())
        }
    }
}

/// `Err(StoreError::PreparedStatementsShared)` when statements prepared by
/// two connections meet on one server connection; `Ok` otherwise,
/// including when it cannot tell.
pub(crate) async fn refuse_shared_statements(options: &PgConnectOptions) -> Result<(), StoreError> {
    let check = async {
        let mut first = PgConnection::connect_with(options).await?;
        let mut second = PgConnection::connect_with(options).await?;
        // Each connection names its first statement alike (`sqlx_s_1`);
        // asked again, each must answer its own.
        let mut answers = Vec::new();
        for _ in 0..2 {
            answers.push(prepared(&mut first, "SELECT 1::int4").await?);
            answers.push(prepared(&mut second, "SELECT 2::int4").await?);
        }
        let _ = second.close().await;
        let _ = first.close().await;
        Ok::<_, sqlx::Error>(answers)
    };
    match tokio::time::timeout(PATIENCE, check).await {
        Ok(Ok(answers)) if answers == [1, 2, 1, 2] => Ok(()),
        Ok(Ok(answers)) => Err(StoreError::PreparedStatementsShared {
            message: format!("two connections' statements answered {answers:?}, not [1, 2, 1, 2]"),
        }),
        Ok(Err(sqlx::Error::Database(db)))
            // duplicate_prepared_statement, invalid_sql_statement_name
            if matches!(db.code().as_deref(), Some("42P05" | "26000")) =>
        {
            Err(StoreError::PreparedStatementsShared {
                message: db.message().to_owned(),
            })
        }
        Ok(Err(err)) => {
            tracing::debug!(error = %err, "could not check that the pooler keeps prepared statements apart");
            Ok(())
        }
        Err(_) => {
            tracing::debug!("no answer in time checking that the pooler keeps prepared statements apart");
            Ok(())
        }
    }
}

/// One prepared statement's single `int4`.
async fn prepared(conn: &mut PgConnection, sql: &'static str) -> Result<i32, sqlx::Error> {
    sqlx::query_scalar(sql).fetch_one(&mut *conn).await
}

/// The backend's process id, asked by a simple query: no prepared
/// statement, which a transaction-mode pool may not keep.
pub(super) async fn backend_pid(conn: &mut PgConnection) -> Result<i32, sqlx::Error> {
    let row = sqlx::raw_sql("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await?;
    row.try_get(0)
}

/// A store in transaction pool mode on a real server (reached directly,
/// which the mode allows): it refuses to migrate, opens no `LISTEN`, says
/// its announcements do not cover other processes, and still wakes its
/// own workers when it queues work. A store in session mode beside it is
/// the control: it does listen.
#[cfg(test)]
mod on_postgres {
    use std::sync::Arc;
    use std::time::Duration;

    use crate::postgres::{PgQueue, listening_backends, single_jobs};
    use crate::store::{PoolMode, QueueConfig, StoreError};

    const PATIENCE: Duration = Duration::from_secs(30);

    #[tokio::test]
    async fn in_transaction_mode_nothing_listens_and_own_submissions_still_wake() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let session = super::super::migrated(&db.url, QueueConfig::default()).await;
        let config = QueueConfig {
            pool_mode: PoolMode::Transaction,
            ..QueueConfig::default()
        };
        let pooled = PgQueue::connect(&db.url, Arc::new(config))
            .await
            .expect("connect in transaction mode");
        assert!(matches!(
            pooled.migrate().await,
            Err(StoreError::MigrateThroughTransactionPool)
        ));
        let mut work = pooled.work_events();
        let finished = pooled.finished_events();
        let _idle = pooled.idle_workers();
        assert!(!finished.covers_every_process());
        pooled.submit(single_jobs(1), None).await.expect("submit");
        tokio::time::timeout(PATIENCE, work.wait(Duration::from_secs(3600)))
            .await
            .expect("its own submission wakes its workers");
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(listening_backends(&session).await, 0, "nothing listens");

        // The control: a store in session mode listens while a worker of
        // it waits for work.
        let mut events = session.work_events();
        let waiting = tokio::spawn(async move {
            loop {
                events.wait(Duration::from_secs(3600)).await;
            }
        });
        let started = tokio::time::Instant::now();
        while listening_backends(&session).await == 0 {
            assert!(
                started.elapsed() < PATIENCE,
                "the session store never listened"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        waiting.abort();
        assert!(session.finished_events().covers_every_process());
    }
}
