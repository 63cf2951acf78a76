//! Taking a connection from the pool without waiting out a database that
//! is gone, while still waiting for one when the pool is merely busy.
//!
//! The pool alone cannot tell the two apart: asked for a connection, it
//! hands out an idle one, or opens a new one and retries a refused or
//! unanswered connection until its acquire timeout (5 s). A server that is
//! down therefore costs every call 5 s before it fails, and an API client
//! its 503. So every statement takes its connection through
//! [`PgQueue::conn`], which watches the wait: when a whole
//! [`QueueConfig::unreachable_after`](crate::QueueConfig) passes in which
//! the pool handed out no connection to anyone, although not every
//! connection was at work, the pool has been trying to reach the server
//! and failing, and the call gives up as unavailable. A pool whose every
//! connection is checked out (load, or long statements) is busy rather
//! than cut off: the call goes on waiting, up to the acquire timeout.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, Postgres};

use super::PgQueue;

/// What the pool's connections are doing, counted by the queue itself
/// (the pool counts connections being opened as in use, which is what a
/// dead server looks like too).
#[derive(Debug, Default)]
pub(super) struct Checkouts {
    /// Connections handed out and not yet given back, `LISTEN` ones included.
    out: AtomicU32,
    /// Connections handed out since the pool opened.
    handed: AtomicU64,
}

impl Checkouts {
    /// Counts a connection as checked out until the returned guard drops.
    pub(super) fn hold(self: &Arc<Self>) -> Held {
        self.out.fetch_add(1, Ordering::AcqRel);
        self.handed.fetch_add(1, Ordering::AcqRel);
        Held(self.clone())
    }

    fn out(&self) -> u32 {
        self.out.load(Ordering::Acquire)
    }

    fn handed(&self) -> u64 {
        self.handed.load(Ordering::Acquire)
    }
}

/// One checked-out connection in the count of [`Checkouts`].
#[derive(Debug)]
pub(super) struct Held(Arc<Checkouts>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.out.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A pooled connection, counted while it is out.
#[derive(Debug)]
pub(super) struct Conn {
    conn: PoolConnection<Postgres>,
    _held: Held,
}

impl std::ops::Deref for Conn {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        &self.conn
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut PgConnection {
        &mut self.conn
    }
}

/// Whether a wait for a connection should go on after a stretch of
/// `unreachable_after` without one: only while the pool handed out a
/// connection during the stretch, or every connection it may open is
/// checked out.
fn keep_waiting(handed_during: bool, out: u32, max: u32) -> bool {
    handed_during || out >= max
}

impl PgQueue {
    /// A connection from the pool, or `PoolTimedOut` once the pool has
    /// failed to reach the server for `unreachable_after` (see the module
    /// documentation).
    pub(super) async fn conn(&self) -> Result<Conn, sqlx::Error> {
        let acquire = self.pool.acquire();
        tokio::pin!(acquire);
        loop {
            let handed = self.checkouts.handed();
            tokio::select! {
                acquired = &mut acquire => {
                    let conn = acquired?;
                    return Ok(Conn { conn, _held: self.checkouts.hold() });
                }
                () = tokio::time::sleep(self.config.unreachable_after) => {
                    let during = self.checkouts.handed() != handed;
                    if !keep_waiting(during, self.checkouts.out(), self.config.pool_size) {
                        return Err(sqlx::Error::PoolTimedOut);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keep_waiting;

    #[test]
    fn a_wait_goes_on_only_while_the_pool_is_at_work() {
        // (handed out during the stretch, checked out, most) → keep waiting
        for (handed, out, max, wait) in [
            (true, 0, 16, true),
            (true, 16, 16, true),
            (false, 16, 16, true),
            (false, 15, 16, false),
            (false, 0, 16, false),
            (false, 1, 1, true),
        ] {
            assert_eq!(keep_waiting(handed, out, max), wait, "{handed} {out}/{max}");
        }
    }
}

/// A busy pool is waited for, past `unreachable_after`.
#[cfg(test)]
mod on_postgres {
    use std::sync::Arc;
    use std::time::Duration;

    use sqlx::Connection as _;

    use crate::postgres::PgQueue;
    use crate::store::QueueConfig;

    /// A pool of one connection, held by a statement waiting for a lock
    /// for longer than `unreachable_after`: a second call waits for that
    /// connection instead of calling the database unreachable.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pool_busy_past_the_bound_is_waited_for() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let config = QueueConfig {
            pool_size: 1,
            unreachable_after: Duration::from_millis(300),
            // The lock bound (a quarter of the lease) outlasts the hold.
            lease: Duration::from_secs(40),
            ..QueueConfig::default()
        };
        let q = PgQueue::connect(&db.url, Arc::new(config))
            .await
            .expect("connect");
        let mut holder = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        let mut tx = holder.begin().await.expect("begin");
        sqlx::query("SELECT pg_advisory_xact_lock(4444)")
            .execute(&mut *tx)
            .await
            .expect("lock");
        let blocked = tokio::spawn({
            let q = q.clone();
            async move {
                sqlx::query("SELECT pg_advisory_xact_lock(4444)")
                    .execute(&mut *q.conn().await?)
                    .await
                    .map(|_| ())
            }
        });
        // The pool's one connection waits for the lock.
        let waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted";
        let start = std::time::Instant::now();
        while mcq_testdb::query_i64(&db.url, waiting)
            .await
            .expect("locks")
            == 0
        {
            assert!(start.elapsed() < Duration::from_secs(30), "never blocked");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let second = tokio::spawn({
            let q = q.clone();
            async move { q.ping().await }
        });
        // Several stretches of `unreachable_after` with no connection free.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        tx.rollback().await.expect("release the lock");
        blocked.await.expect("join").expect("the lock was granted");
        second
            .await
            .expect("join")
            .expect("a busy pool is waited for, not called unreachable");
    }
}
