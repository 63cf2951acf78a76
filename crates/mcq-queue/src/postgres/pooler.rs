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

/// The backend's process id, asked by a simple query: no prepared
/// statement, which a transaction-mode pool may not keep.
async fn backend_pid(conn: &mut PgConnection) -> Result<i32, sqlx::Error> {
    let row = sqlx::raw_sql("SELECT pg_backend_pid()")
        .fetch_one(&mut *conn)
        .await?;
    row.try_get(0)
}
