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
//! the pool handed out no connection to anyone and none was given back,
//! although not every connection was at work, the pool has been trying to
//! reach the server and failing, and the call gives up as unavailable. A pool whose every
//! connection is checked out (load, or long statements) is busy rather
//! than cut off: the call goes on waiting, up to the acquire timeout.
//!
//! The pool hands out its idle connections oldest first, so a worker
//! whose pool holds two (its claim connection and the one it listens on
//! while idle) ran every other call on each, and its announcements of
//! finished jobs (`herald.rs`) took whichever was idle: a fleet of N busy
//! workers kept 2N backends at work on the database's cores, each colder
//! in the caches than one backend doing all of its worker's calls. A
//! connection given back is therefore kept for the next call of the store
//! (one per store), unless a call of the store or its listener waits for
//! the pool: only the store's calls and its listeners take connections
//! from its pool. A call that gives its connection back has just had it
//! answer, which is as good a check as a ping, so only a connection kept
//! idle for [`KEEP_FOR`] is pinged before its next call (a busy worker
//! pings none), and one that fails the ping is closed and the call goes
//! to the pool. A connection is not kept when a store of the process saw
//! a connection break while it was out (`crate::outage::dropped`): the
//! pool takes it back and checks it, and one kept before the break is
//! pinged before its next call.
//!
//! The pool's own check follows the same rule
//! ([`check_idle`]): sqlx pings every connection given back
//! before it counts it as idle, and by default pings it again before it
//! hands it out, a second round trip before every call that takes its
//! connection from the pool (each concurrent request of a server, a long
//! poll's read after its wait). An idle connection is pinged before it
//! is handed out only once it has been idle for [`KEEP_FOR`], or when a
//! connection broke in the process since it went idle.
//!
//! Nor is a connection kept while a call of the store waits for the pool:
//! it goes back to the pool, which hands it to that call. A call waiting
//! for the pool never gives up its wait for a kept connection either, as
//! that would drop the pool's acquire midway: the pool may ping an idle
//! connection before handing it out, and an acquire dropped during that
//! ping closes the connection, which a server whose connection slots are
//! all taken does not let the pool open again. For the same reason the
//! pool's acquire runs as a task of its own, which a call given up midway
//! (a client that hung up, a timeout) leaves to finish: the connection it
//! acquires then goes back to the pool.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::Connection as _;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnection, PgPool, Postgres};

use super::PgQueue;
use crate::store::QueueConfig;

/// How long after its last check (the pool's, or a ping of its own) a
/// kept connection serves the store's calls without another.
const KEEP_FOR: Duration = Duration::from_secs(1);

/// What the pool's connections are doing, counted by the queue itself
/// (the pool counts connections being opened as in use, which is what a
/// dead server looks like too).
#[derive(Debug, Default)]
pub(super) struct Checkouts {
    /// Connections handed out and not yet given back, `LISTEN` ones included.
    out: AtomicU32,
    /// Connections handed out or given back since the pool opened: one
    /// given back is not idle yet (the pool pings it first, in a task of
    /// its own), but the pool was at work.
    moved: AtomicU64,
    /// The connection given back last, kept for the next call, and the
    /// calls waiting for the pool.
    kept: Mutex<Kept>,
    /// Pings of kept connections, and of idle ones the pool hands out
    /// ([`check_idle`]), so far.
    pings: Arc<AtomicU64>,
}

/// A kept connection, with when it was last checked (pinged, or given
/// back by a call).
#[derive(Debug)]
struct Keeping {
    conn: PoolConnection<Postgres>,
    checked: Instant,
}

/// The connection a store keeps for its next call; none once it closes,
/// nor while a call waits for the pool (so a call that finds none waits
/// for the pool, and is handed what the others give back).
#[derive(Debug, Default)]
struct Kept {
    conn: Option<Keeping>,
    closed: bool,
    /// Calls waiting for the pool.
    waiting: u32,
}

impl Checkouts {
    /// Counts a connection as checked out until the returned guard drops.
    pub(super) fn hold(self: &Arc<Self>) -> Held {
        self.out.fetch_add(1, Ordering::AcqRel);
        self.moved.fetch_add(1, Ordering::AcqRel);
        Held(self.clone())
    }

    /// The kept connection, or else a place among the calls waiting for
    /// the pool until the returned guard drops.
    fn kept_or_wait(self: &Arc<Self>) -> Result<Keeping, Waiting> {
        let mut kept = self.kept.lock().expect("the kept connection");
        match kept.conn.take() {
            Some(conn) => Ok(conn),
            None => {
                kept.waiting += 1;
                Err(Waiting(self.clone()))
            }
        }
    }

    /// A place among the calls waiting for the pool until the returned
    /// guard drops, for a wait that does not go through [`checkout`] (a
    /// listener's): the kept connection goes back to the pool, so that
    /// the wait does not depend on a later call of the store to free it.
    pub(super) fn wait_for_pool(self: &Arc<Self>) -> Waiting {
        let mut kept = self.kept.lock().expect("the kept connection");
        let freed = kept.conn.take();
        kept.waiting += 1;
        drop(kept);
        drop(freed);
        Waiting(self.clone())
    }

    /// Keeps `conn`, just given back by a call, for the next call, unless
    /// one is kept already, the store has closed, a call or a listener of
    /// the store waits for the pool, or a connection broke since `conn`
    /// was handed out (`dropped`, the count then); otherwise the pool
    /// takes it back. Whether the pool has another idle connection does
    /// not matter: nothing else waits for it, and a busy worker whose
    /// other connection listens would otherwise send every call through
    /// the pool's check, a round trip each.
    fn keep(&self, conn: PoolConnection<Postgres>, dropped: u64) {
        // A connection broke somewhere while this one was out: perhaps
        // this one, so the pool takes it back and checks it.
        if crate::outage::dropped() == dropped {
            let mut kept = self.kept.lock().expect("the kept connection");
            if kept.conn.is_none() && !kept.closed && kept.waiting == 0 {
                kept.conn = Some(Keeping {
                    conn,
                    // The call that gave it back has just had it answer:
                    // as good as a ping, so a store whose calls come less
                    // than `KEEP_FOR` apart pings none of them, and only
                    // a connection idle that long is pinged.
                    checked: Instant::now(),
                });
                return;
            }
        }
        drop(conn);
    }

    /// Gives the kept connection back to the pool and keeps none from
    /// now on: the pool closes only once every connection is back.
    pub(super) fn close(&self) {
        let mut kept = self.kept.lock().expect("the kept connection");
        kept.closed = true;
        drop(kept.conn.take());
    }

    /// The count of pings, for the pool's check ([`check_idle`]), which
    /// the pool keeps as long as it lives: the count alone, since a kept
    /// connection in the pool's own options would keep the pool alive.
    pub(super) fn pings(&self) -> Arc<AtomicU64> {
        self.pings.clone()
    }

    fn out(&self) -> u32 {
        self.out.load(Ordering::Acquire)
    }

    fn moved(&self) -> u64 {
        self.moved.load(Ordering::Acquire)
    }
}

/// A call waiting for the pool, in the count of [`Checkouts`].
pub(super) struct Waiting(Arc<Checkouts>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.kept.lock().expect("the kept connection").waiting -= 1;
    }
}

/// One checked-out connection in the count of [`Checkouts`].
#[derive(Debug)]
pub(super) struct Held(Arc<Checkouts>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.out.fetch_sub(1, Ordering::AcqRel);
        self.0.moved.fetch_add(1, Ordering::AcqRel);
    }
}

/// A pooled connection, counted while it is out, and kept for the
/// store's next call when it is given back.
#[derive(Debug)]
pub(super) struct Conn {
    /// Always `Some` until the drop.
    conn: Option<PoolConnection<Postgres>>,
    /// Broken connections seen in this process when it was handed out.
    dropped: u64,
    held: Held,
}

impl Conn {
    fn new(conn: PoolConnection<Postgres>, held: Held) -> Conn {
        Conn {
            conn: Some(conn),
            dropped: crate::outage::dropped(),
            held,
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.held.0.keep(conn, self.dropped);
        }
    }
}

impl std::ops::Deref for Conn {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("a connection until the drop")
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("a connection until the drop")
    }
}

/// The check of an idle connection before a call takes it, kept by the
/// store or handed out by the pool (in place of the pool's ping of every
/// one): a ping, counted in `pings`, only when the connection has been
/// idle for [`KEEP_FOR`] or a connection of the process broke meanwhile.
/// One idle for less answered recently: the call that gave it back, or
/// the pool's ping of every connection given back. False when the ping
/// failed.
pub(super) async fn check_idle(
    pings: &AtomicU64,
    conn: &mut PgConnection,
    idle_for: Duration,
) -> bool {
    if idle_for < KEEP_FOR && !crate::outage::dropped_within(idle_for) {
        return true;
    }
    pings.fetch_add(1, Ordering::Relaxed);
    conn.ping().await.is_ok()
}

/// A kept connection, checked ([`check_idle`]) since it was last checked;
/// none if the ping failed (the connection is closed).
async fn checked(kept: Keeping, checkouts: &Checkouts) -> Option<PoolConnection<Postgres>> {
    let Keeping { mut conn, checked } = kept;
    if check_idle(&checkouts.pings, &mut conn, checked.elapsed()).await {
        return Some(conn);
    }
    conn.close_on_drop();
    None
}

/// Whether a wait for a connection should go on after a stretch of
/// `unreachable_after` without one: only while the pool handed out a
/// connection or took one back during the stretch, or every connection it
/// may open is checked out.
fn keep_waiting(moved_during: bool, out: u32, max: u32) -> bool {
    moved_during || out >= max
}

/// Where a store's calls take their connections: the pool, the queue's
/// count of what it handed out, and the connection kept for the next call.
/// Cloned into the store's tasks (the herald), so that their calls reach
/// the same backend as the store's own.
#[derive(Debug, Clone)]
pub(super) struct Connections {
    pool: PgPool,
    checkouts: Arc<Checkouts>,
    config: Arc<QueueConfig>,
}

impl Connections {
    /// A connection, as [`checkout`] hands it out.
    pub(super) async fn get(&self) -> Result<Conn, sqlx::Error> {
        checkout(&self.pool, &self.checkouts, &self.config).await
    }
}

impl PgQueue {
    /// Where this store's calls take their connections.
    pub(super) fn connections(&self) -> Connections {
        Connections {
            pool: self.pool.clone(),
            checkouts: self.checkouts.clone(),
            config: self.config.clone(),
        }
    }

    /// A connection for one of the store's calls ([`checkout`]).
    pub(super) async fn conn(&self) -> Result<Conn, sqlx::Error> {
        checkout(&self.pool, &self.checkouts, &self.config).await
    }
}

/// A connection: the kept one, or one from the pool; `PoolTimedOut` once
/// the pool has failed to reach the server for `unreachable_after` (see
/// the module documentation).
async fn checkout(
    pool: &PgPool,
    checkouts: &Arc<Checkouts>,
    config: &QueueConfig,
) -> Result<Conn, sqlx::Error> {
    // A kept connection whose ping fails is closed, and the next one kept
    // meanwhile tried, until there is none: then the pool.
    let _waiting = loop {
        match checkouts.kept_or_wait() {
            Ok(kept) => {
                if let Some(conn) = checked(kept, checkouts).await {
                    return Ok(Conn::new(conn, checkouts.hold()));
                }
            }
            Err(waiting) => break waiting,
        }
    };
    // A task of its own: a call given up midway leaves it running, so the
    // pool never has its ping of the idle connection it hands out cut
    // short, which would close that connection; the connection then goes
    // back to the pool.
    let mut acquire = tokio::spawn(pool.acquire());
    loop {
        let moved = checkouts.moved();
        tokio::select! {
            acquired = &mut acquire => {
                let conn = match acquired {
                    Ok(acquired) => acquired?,
                    Err(failed) if failed.is_panic() => std::panic::resume_unwind(failed.into_panic()),
                    // The runtime is shutting down.
                    Err(_) => return Err(sqlx::Error::PoolClosed),
                };
                return Ok(Conn::new(conn, checkouts.hold()));
            }
            () = tokio::time::sleep(config.unreachable_after) => {
                let during = checkouts.moved() != moved;
                if !keep_waiting(during, checkouts.out(), config.pool_size) {
                    return Err(sqlx::Error::PoolTimedOut);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Checkouts, keep_waiting};

    /// A connection given back is the pool at work, as one handed out is:
    /// the pool takes it back in a task of its own (a ping first), and a
    /// wait whose stretch ended in between called a live pool unreachable.
    #[test]
    fn a_connection_given_back_counts_as_the_pool_at_work() {
        let checkouts = Arc::new(Checkouts::default());
        let held = checkouts.hold();
        let before = checkouts.moved();
        drop(held);
        assert_ne!(checkouts.moved(), before);
        assert_eq!(checkouts.out(), 0);
    }

    #[test]
    fn a_wait_goes_on_only_while_the_pool_is_at_work() {
        // (handed out or given back during the stretch, checked out, most) → keep waiting
        for (moved, out, max, wait) in [
            (true, 0, 16, true),
            (true, 16, 16, true),
            (false, 16, 16, true),
            (false, 15, 16, false),
            (false, 0, 16, false),
            (false, 1, 1, true),
        ] {
            assert_eq!(keep_waiting(moved, out, max), wait, "{moved} {out}/{max}");
        }
    }
}

/// Opens both connections of `q`'s pool of two and waits until both are
/// back, idle or kept: the pool takes a connection back in a task of its
/// own (a ping first), so a test's first call could otherwise come before
/// the second was idle, and the connection it gave back would not be kept.
#[cfg(test)]
pub(super) async fn open_both(q: &PgQueue) {
    let (a, b) = (q.conn().await.expect("one"), q.conn().await.expect("two"));
    drop((a, b));
    assert_eq!(q.pool.size(), 2, "the default pool holds two connections");
    let start = Instant::now();
    loop {
        let kept = q.checkouts.kept.lock().expect("kept").conn.is_some();
        if q.pool.num_idle() + usize::from(kept) == 2 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the connections never came back"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A busy pool is waited for, past `unreachable_after`.
#[cfg(test)]
mod on_postgres {
    use std::sync::Arc;
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use sqlx::Connection as _;

    use crate::postgres::PgQueue;
    use crate::postgres::pooler::backend_pid;
    use crate::store::QueueConfig;

    const PATIENCE: Duration = Duration::from_secs(30);

    /// Runs `body` until no connection broke anywhere in this process
    /// while it ran, up to ten times, and returns what that run returned.
    /// Other tests break connections, and a break sends a store's kept
    /// connection back through the pool's check, so only such a run
    /// shows which backend a store's calls reach.
    async fn undisturbed<T, F: std::future::Future<Output = T>>(mut body: impl FnMut() -> F) -> T {
        for _ in 0..10 {
            let before = crate::outage::dropped();
            let seen = body().await;
            if crate::outage::dropped() == before {
                return seen;
            }
        }
        panic!("connections broke in this process during ten tries");
    }

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

    /// The backend of the connection `q` hands out next.
    async fn backend(q: &PgQueue) -> i32 {
        backend_pid(&mut q.conn().await.expect("a connection"))
            .await
            .expect("pg_backend_pid")
    }

    /// A store of two connections with both open and idle.
    async fn two_open(url: &str) -> PgQueue {
        let q = PgQueue::connect(url, Arc::new(QueueConfig::default()))
            .await
            .expect("connect");
        super::open_both(&q).await;
        q
    }

    /// One call after the other, a store's calls reach one backend, where
    /// the pool alone (oldest idle connection first) alternated between
    /// its two.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_one_after_the_other_reach_one_backend() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        let seen = undisturbed(|| async {
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..10 {
                seen.insert(backend(&q).await);
            }
            seen
        })
        .await;
        assert_eq!(seen.len(), 1, "backends {seen:?}");
        // Two calls at once still get two connections.
        let (a, b) = (q.conn().await.expect("one"), q.conn().await.expect("two"));
        drop((a, b));
        tokio::time::timeout(PATIENCE, q.close())
            .await
            .expect("the pool closes with a kept connection");
    }

    /// A kept connection past its check is pinged and kept, not handed
    /// back to the pool, which would hand out the other one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_kept_connection_is_checked_and_kept() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        let pids = undisturbed(|| async {
            let pid = backend(&q).await;
            tokio::time::sleep(super::KEEP_FOR + Duration::from_millis(200)).await;
            [pid, backend(&q).await, backend(&q).await]
        })
        .await;
        assert_eq!(pids[1], pids[0], "the call after the check");
        assert_eq!(pids[2], pids[0], "the call after that");
        q.close().await;
    }

    /// A store whose calls come less than [`KEEP_FOR`](super::KEEP_FOR)
    /// apart pings none of them, however long they go on: each call that
    /// gives its connection back has just had it answer. One idle for
    /// longer is pinged before its next call.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_a_connection_idle_past_its_check_is_pinged() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        let pings = |q: &PgQueue| q.checkouts.pings.load(Ordering::Relaxed);
        let (busy, idle) = undisturbed(|| async {
            let before = pings(&q);
            backend(&q).await;
            for _ in 0..5 {
                tokio::time::sleep(super::KEEP_FOR * 6 / 10).await;
                backend(&q).await;
            }
            let busy = pings(&q) - before;
            tokio::time::sleep(super::KEEP_FOR + Duration::from_millis(200)).await;
            backend(&q).await;
            (busy, pings(&q) - before - busy)
        })
        .await;
        assert_eq!(busy, 0, "calls 0.6 s apart for 3 s");
        assert_eq!(idle, 1, "the call after 1.2 s of rest");
        q.close().await;
    }

    /// Whether `q` keeps a connection now.
    fn keeps(q: &PgQueue) -> bool {
        q.checkouts
            .kept
            .lock()
            .expect("the kept connection")
            .conn
            .is_some()
    }

    /// Waits until `q` listens to the work channel.
    async fn hears_work(q: &PgQueue) {
        let start = std::time::Instant::now();
        while !q.hears_work() {
            assert!(start.elapsed() < PATIENCE, "the store never listened");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A store waiting for work until aborted; it listens meanwhile.
    fn wait_for_work(q: &PgQueue) -> tokio::task::JoinHandle<()> {
        let mut work = q.work_events();
        tokio::spawn(async move {
            loop {
                work.wait(Duration::from_secs(3600)).await;
            }
        })
    }

    /// A worker whose other connection listens keeps the connection its
    /// call gave back for its next call, rather than handing it to the
    /// pool, whose check of it costs that call a round trip.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_is_kept_while_the_other_one_listens() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        let waiting = wait_for_work(&q);
        hears_work(&q).await;
        let kept = undisturbed(|| async {
            drop(q.conn().await.expect("a call"));
            keeps(&q)
        })
        .await;
        assert!(kept, "the connection went back to the pool");
        waiting.abort();
        q.close().await;
    }

    /// A listener waiting for the pool gets the connection the store
    /// kept: here the store's only one, which no later call gives back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_listener_gets_the_kept_connection() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let config = QueueConfig {
            pool_size: 1,
            ..QueueConfig::default()
        };
        let q = PgQueue::connect(&db.url, Arc::new(config))
            .await
            .expect("connect");
        drop(q.conn().await.expect("a call"));
        assert!(keeps(&q), "the call's connection is kept");
        let waiting = wait_for_work(&q);
        hears_work(&q).await;
        waiting.abort();
        q.close().await;
    }

    /// A store whose pool opens its 4 connections at start and keeps them.
    async fn four_kept_open(url: &str) -> PgQueue {
        let config = QueueConfig {
            pool_size: 4,
            pool_min: 4,
            ..QueueConfig::default()
        };
        PgQueue::connect(url, Arc::new(config))
            .await
            .expect("connect")
    }

    /// The backends that 100 rounds of 12 calls at once reached, call `k`
    /// of them given `patience(k)` if any (a call given up reached none).
    async fn crowd(
        q: &PgQueue,
        patience: impl Fn(u64) -> Option<Duration>,
    ) -> std::collections::BTreeSet<i32> {
        let mut seen = std::collections::BTreeSet::new();
        for round in 0..100_u64 {
            let mut calls = tokio::task::JoinSet::new();
            for call in 0..12 {
                let (q, patience) = (q.clone(), patience(round * 12 + call));
                calls.spawn(async move {
                    match patience {
                        Some(patience) => tokio::time::timeout(patience, backend(&q)).await.ok(),
                        None => Some(backend(&q).await),
                    }
                });
            }
            while let Some(pid) = calls.join_next().await {
                seen.extend(pid.expect("a call"));
            }
        }
        seen
    }

    /// More calls at once than the pool has connections, round after
    /// round, reach only the connections the pool opened at start: none
    /// is closed on the way. A wait for the pool that gave up its acquire
    /// for a kept connection while the pool pinged an idle one closed that
    /// one, and the pool opened another.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_beyond_the_pool_close_none_of_its_connections() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = four_kept_open(&db.url).await;
        let seen = undisturbed(|| crowd(&q, |_| None)).await;
        assert!(seen.len() <= 4, "{} backends: {seen:?}", seen.len());
        q.close().await;
    }

    /// Calls given up at any point of their wait (a client that hung up,
    /// a timeout) close none of the pool's connections either: the pool's
    /// ping of an idle connection it is about to hand out finishes, and
    /// the connection goes back to the pool.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_given_up_close_none_of_its_connections() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = four_kept_open(&db.url).await;
        let seen = undisturbed(|| async {
            // Patience from nothing to 3 ms, spread over the calls.
            let mut seen = crowd(&q, |k| Some(Duration::from_micros(k * 997 % 3_000))).await;
            // The pool's connections afterwards, each one's backend.
            let open = tokio::join!(q.conn(), q.conn(), q.conn(), q.conn());
            for conn in [open.0, open.1, open.2, open.3] {
                let pid = backend_pid(&mut conn.expect("a connection"))
                    .await
                    .expect("pg_backend_pid");
                seen.insert(pid);
            }
            seen
        })
        .await;
        assert!(seen.len() <= 4, "{} backends: {seen:?}", seen.len());
        q.close().await;
    }

    /// A kept connection whose backend ended fails one call, not the
    /// next: that call's error counts a broken connection (as the error of
    /// every store call does), so the connection is not kept, and the
    /// next call reaches a live backend at once.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_kept_connection_that_broke_fails_one_call() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        let pid = backend(&q).await;
        let ended = mcq_testdb::query_i64(
            &db.url,
            &format!("SELECT pg_terminate_backend({pid})::int::int8"),
        )
        .await
        .expect("terminate");
        assert_eq!(ended, 1);
        let failed = backend_pid(&mut q.conn().await.expect("a connection"))
            .await
            .map_err(crate::StoreError::from)
            .expect_err("the call on the ended backend");
        assert!(failed.is_unavailable(), "{failed:?}");
        let next = backend(&q).await;
        assert_ne!(next, pid, "a call reached the ended backend");
        q.close().await;
    }

    /// The pool pings an idle connection before it hands it out only once
    /// it has rested [`KEEP_FOR`](super::KEEP_FOR): the pool pinged it as
    /// it came back, so a call that takes a connection given back a moment
    /// ago (each concurrent request of a server) pays no round trip more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_pool_pings_only_a_connection_idle_past_its_check() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        let pings = |q: &PgQueue| q.checkouts.pings.load(Ordering::Relaxed);
        // Given back, a connection is idle once the pool has pinged it.
        let rest = || tokio::time::sleep(Duration::from_millis(100));
        let (fresh, rested) = undisturbed(|| async {
            drop(q.pool.acquire().await.expect("a connection"));
            rest().await;
            let before = pings(&q);
            for _ in 0..5 {
                let mut conn = q.pool.acquire().await.expect("a connection");
                backend_pid(&mut conn).await.expect("pg_backend_pid");
                drop(conn);
                rest().await;
            }
            let fresh = pings(&q) - before;
            tokio::time::sleep(super::KEEP_FOR + Duration::from_millis(200)).await;
            drop(q.pool.acquire().await.expect("a connection"));
            (fresh, pings(&q) - before - fresh)
        })
        .await;
        assert_eq!(fresh, 0, "connections idle for 0.1 s");
        assert_eq!(rested, 1, "a connection idle for 1.2 s");
        q.close().await;
    }

    /// Idle connections whose backends ended while they rested are found
    /// out by that ping: the pool closes them and opens a new one, and
    /// the call that asked succeeds.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_connections_that_broke_are_replaced_after_their_rest() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        q.checkouts.close();
        let mut both = Vec::new();
        for _ in 0..2 {
            both.push(q.pool.acquire().await.expect("a connection"));
        }
        let mut pids = Vec::new();
        for conn in &mut both {
            pids.push(backend_pid(conn).await.expect("pg_backend_pid"));
        }
        drop(both);
        let ended = mcq_testdb::query_i64(
            &db.url,
            &format!(
                "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) \
                 FROM unnest(ARRAY[{}]) AS p(pid)",
                pids.iter()
                    .map(i32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        )
        .await
        .expect("terminate");
        assert_eq!(ended, 2);
        tokio::time::sleep(super::KEEP_FOR + Duration::from_millis(200)).await;
        let mut conn = q.pool.acquire().await.expect("a connection");
        let pid = backend_pid(&mut conn)
            .await
            .expect("a live backend after the check");
        assert!(!pids.contains(&pid), "{pid} had ended");
        drop(conn);
        q.close().await;
    }

    /// A store dropped without `close` lets its connections go: the pool's
    /// check holds only the count of pings, where a hold on the store's
    /// kept connection would keep the pool, and its connections, alive.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_dropped_without_closing_lets_its_connections_go() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = two_open(&db.url).await;
        let kept = backend(&q).await;
        assert!(keeps(&q), "a connection kept after a call");
        drop(q);
        let alive = format!("SELECT count(*) FROM pg_stat_activity WHERE pid = {kept}");
        let deadline = std::time::Instant::now() + PATIENCE;
        while mcq_testdb::query_i64(&db.url, &alive).await.expect("count") > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "backend {kept} still connected"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
