//! Waking idle workers and waiting long polls: a `LISTEN` connection per
//! store and channel turns notifications into an in-process signal. NOTIFY
//! can be lost (reconnects, poolers), so waits always have a timeout, and
//! every (re)subscription wakes the waiters in case something was missed
//! meanwhile.
//!
//! A store listens only while something of its process waits
//! ([`crate::demand`]): a worker waiting for work, a long poll waiting for
//! its jobs. PostgreSQL 15 wakes every listening backend of the database at
//! each `NOTIFY`, whatever the channel, so a fleet whose every worker
//! listened all the time paid a wake-up per worker for every finished job.
//! A busy worker listens to nothing; its heartbeat asks the database for
//! an idle peer instead of hearing the peers' announcements.
//!
//! Through a pool in transaction mode the store listens to nothing (a
//! server connection there serves whichever client runs a transaction):
//! its waiters then wake on this process's own signals and their timeouts.
//!
//! The work channel also carries idle announcements (`idle:<worker id>`,
//! [`crate::Store::announce_idle`]): they go to the idle subscribers and
//! wake nobody, since they announce no work. An announcement of a little
//! work names the idle workers it needs (`wake:<id>,<id>…`, from the
//! `mcq_wake` function, which takes their idle marks): it wakes this
//! store's waiting workers only if it names one of them. Every other
//! payload (the empty one of a lot of work, or of a fleet with too few
//! idle workers that listen) wakes the waiting workers.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;
use uuid::Uuid;

use super::checkout::Checkouts;
use super::{CHANNEL, FINISHED_CHANNEL, PgQueue};
use crate::StoreError;
use crate::finished::FinishedEvents;
use crate::idle::{IdleAnnouncer, IdleWorkers};
use crate::work::{WorkEvents, WorkSignal};

/// Prefix of an idle announcement's payload on the work channel.
const IDLE_PREFIX: &str = "idle:";

/// Prefix of a work announcement that names the workers to wake.
const WAKE_PREFIX: &str = "wake:";

/// How long a listener keeps its `LISTEN` after the last wait ended: long
/// enough to span the claim between two waits of an idle worker, short
/// next to a busy fleet's stream of finished jobs.
const LINGER: Duration = Duration::from_millis(500);

/// The signal waiters sleep on, the idle announcements, and the listener
/// task feeding both.
#[derive(Debug, Default)]
pub(super) struct Wakeup {
    work: WorkSignal,
    idle: IdleAnnouncer,
    /// Dropping the store drops this sender, which stops the listener task.
    listener: OnceLock<oneshot::Sender<()>>,
    /// Whether the work channel's `LISTEN` is up now.
    listening: Arc<AtomicBool>,
    /// The workers of this store that marked themselves idle while it
    /// listened: an announcement naming one of them wakes the store's
    /// waiting workers.
    named: Arc<RwLock<HashSet<Uuid>>>,
}

impl PgQueue {
    /// Subscribes to work notifications from every process.
    pub(crate) fn work_events(&self) -> WorkEvents {
        let events = self.wakeup.work.subscribe();
        self.listen_for_work();
        events
    }

    /// Wakes this process's waiting workers after it queued work (a
    /// submission, a retry, a hand-back, a reaped lease), when no listener
    /// brings the store's own `NOTIFY` back to it.
    pub(super) fn wake_own_workers(&self) {
        if !self.hears_work() {
            self.wakeup.work.wake();
        }
    }

    /// Whether this store's work listener is subscribed now, so that the
    /// work channel's announcements (its own and its peers') reach it.
    pub(super) fn hears_work(&self) -> bool {
        self.listens() && self.wakeup.listening.load(Ordering::Acquire)
    }

    /// Announces on the work channel that `worker` is idle, and marks its
    /// row so, for the peers that hear no announcement (through a
    /// transaction-mode pool their heartbeats ask; `tasks.rs`), and for
    /// announcements of new work to name it if the store hears them now.
    /// The mark also adds what the store recorded for it to its counters
    /// (`tally.rs`), so an idle worker's counters are exact.
    ///
    /// The announcement is for a peer holding tasks it has not started, to
    /// hand some over; it goes out only while other workers hold at least
    /// two running tasks between them, since none can otherwise. Every
    /// `NOTIFY` wakes each listening backend of the database (all of a
    /// resting fleet's), so the mark alone is what a worker going idle in a
    /// quiet fleet costs.
    ///
    /// The mark waits until the announcements of the jobs this store
    /// finished have gone out: a worker goes idle right after recording
    /// its last results, and the mark would otherwise take the connection
    /// the herald was about to announce them on, so that a long poll
    /// waiting for them heard of them a round trip or two later.
    pub(crate) async fn announce_idle(&self, worker: Uuid) -> Result<(), StoreError> {
        self.announced().await;
        let counts = self.tally.take(worker);
        let hears = self.hears_work();
        if hears {
            self.wakeup
                .named
                .write()
                .expect("the named workers")
                .insert(worker);
        }
        let mut conn = self.conn().await?;
        let announce: bool = sqlx::query_scalar(
            "WITH mark AS (
                 UPDATE workers SET idle_since = now(), idle_listening = $2,
                                    tasks_done = tasks_done + $3, jobs_done = jobs_done + $4
                 WHERE id = $1)
             SELECT count(*) = 2 FROM (
                 SELECT 1 FROM tasks t
                 WHERE t.state = 'running' AND t.worker_id IS DISTINCT FROM $1
                 LIMIT 2) r",
        )
        .bind(worker)
        .bind(hears)
        .bind(counts.tasks)
        .bind(counts.jobs)
        .fetch_one(&mut *conn)
        .await
        .inspect_err(|_| self.tally.add(worker, counts))?;
        if announce {
            // After the mark's commit, in a transaction that does not wait
            // for the disk (`herald.rs`). A lost announcement costs a peer
            // a hand-off, never a task: the mark stands.
            let sent = sqlx::query(
                "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)",
            )
            .bind(CHANNEL)
            .bind(format!("{IDLE_PREFIX}{worker}"))
            .execute(&mut *conn)
            .await;
            if let Err(err) = sent {
                tracing::debug!(error = %err, "could not announce an idle worker");
            }
        }
        Ok(())
    }

    /// Tells this process's idle subscribers that `worker` is idle, as its
    /// announcement would have, when the store hears none itself.
    pub(super) fn tell_idle(&self, worker: Uuid) {
        self.wakeup.idle.announce(worker);
    }

    /// Subscribes to idle announcements from every process.
    pub(crate) fn idle_workers(&self) -> IdleWorkers {
        let events = self.wakeup.idle.subscribe();
        self.listen_for_work();
        events
    }

    /// Starts the work channel's listener unless it runs (or the store
    /// does not listen: then only this process's own signals wake). It
    /// subscribes while a worker waits for work.
    fn listen_for_work(&self) {
        if !self.listens() {
            return;
        }
        self.wakeup.listener.get_or_init(|| {
            let (stop_tx, stop_rx) = oneshot::channel();
            let work = self.wakeup.work.clone();
            let idle = self.wakeup.idle.clone();
            let named = self.wakeup.named.clone();
            tokio::spawn(listen(
                self.pool.clone(),
                self.checkouts.clone(),
                CHANNEL,
                Serving {
                    demand: work.demand().watch(),
                    listening: self.wakeup.listening.clone(),
                },
                move |payload| match payload.map(work_payload) {
                    // An unreadable announcement is dropped: it is a hint.
                    Some(Payload::Idle(worker)) => {
                        if let Ok(worker) = Uuid::parse_str(worker) {
                            idle.announce(worker);
                        }
                    }
                    Some(Payload::Wake(names)) => {
                        if names_ours(names, &named.read().expect("the named workers")) {
                            work.wake();
                        }
                    }
                    Some(Payload::Work) | None => work.wake(),
                },
                stop_rx,
            ));
            stop_tx
        });
    }

    /// Subscribes to finished-work announcements (`NOTIFY` on
    /// [`FINISHED_CHANNEL`] with the batch or job id as payload); the
    /// listener subscribes while a wait is in progress.
    pub(crate) fn finished_events(&self) -> FinishedEvents {
        let events = self.announcer.subscribe();
        if !self.listens() {
            return events;
        }
        self.finished_listener.get_or_init(|| {
            let (stop_tx, stop_rx) = oneshot::channel();
            let announcer = self.announcer.clone();
            tokio::spawn(listen(
                self.pool.clone(),
                self.checkouts.clone(),
                FINISHED_CHANNEL,
                Serving {
                    demand: announcer.demand().watch(),
                    listening: Arc::default(),
                },
                move |payload| {
                    // `key:count`; a payload we cannot read, or a reconnect,
                    // wakes every waiter.
                    let parsed = payload.and_then(|p| {
                        let (key, count) = p.split_once(':')?;
                        Some((Uuid::parse_str(key).ok()?, count.parse().ok()?))
                    });
                    let (key, count) = parsed.unwrap_or((Uuid::nil(), u64::MAX));
                    announcer.announce(key, count);
                },
                stop_rx,
            ));
            stop_tx
        });
        events
    }
}

/// A work-channel payload, by its prefix.
#[derive(Debug, PartialEq, Eq)]
enum Payload<'a> {
    /// `idle:<worker id>`: that worker is idle.
    Idle(&'a str),
    /// `wake:<id>,<id>…`: work for the named workers.
    Wake(&'a str),
    /// Anything else: work for every waiting worker.
    Work,
}

fn work_payload(payload: &str) -> Payload<'_> {
    if let Some(worker) = payload.strip_prefix(IDLE_PREFIX) {
        Payload::Idle(worker)
    } else if let Some(names) = payload.strip_prefix(WAKE_PREFIX) {
        Payload::Wake(names)
    } else {
        Payload::Work
    }
}

/// Whether a `wake:` announcement's comma-separated `names` name one of
/// `ours`. An unreadable name may be ours: it counts, since waking costs
/// a claim and sleeping through work costs a poll.
fn names_ours(names: &str, ours: &HashSet<Uuid>) -> bool {
    names
        .split(',')
        .any(|n| Uuid::parse_str(n).map_or(true, |id| ours.contains(&id)))
}

#[cfg(test)]
mod payloads {
    use std::collections::HashSet;

    use uuid::Uuid;

    use super::{Payload, names_ours, work_payload};

    #[test]
    fn payloads_are_told_apart_by_their_prefix() {
        assert_eq!(work_payload("idle:abc"), Payload::Idle("abc"));
        assert_eq!(work_payload("wake:a,b"), Payload::Wake("a,b"));
        assert_eq!(work_payload(""), Payload::Work);
        assert_eq!(work_payload("wakeup"), Payload::Work);
    }

    #[test]
    fn a_wake_up_is_ours_if_it_names_us_or_cannot_be_read() {
        let (me, other) = (Uuid::now_v7(), Uuid::now_v7());
        let ours = HashSet::from([me]);
        assert!(names_ours(&format!("{other},{me}"), &ours));
        assert!(!names_ours(&other.to_string(), &ours));
        assert!(!names_ours(&other.to_string(), &HashSet::new()));
        // Anyone who can connect can NOTIFY: garbage wakes, at a claim's cost.
        for hostile in ["", "not-a-uuid", &format!("{other},"), &"x".repeat(7000)] {
            assert!(names_ours(hostile, &ours), "{hostile:.20}");
        }
    }
}

/// Whom a listener serves: the count of waits in progress, and the flag
/// it keeps up to date with whether it is subscribed.
struct Serving {
    demand: watch::Receiver<usize>,
    listening: Arc<AtomicBool>,
}

/// Listens on `channel` while `serving.demand` is above zero (and for
/// [`LINGER`] after it falls to zero), until `stop` fires, reconnecting
/// with capped backoff; calls `on_message` with each payload, and with
/// `None` whenever notifications may have been missed (each subscription
/// and reconnect).
async fn listen(
    pool: PgPool,
    checkouts: Arc<Checkouts>,
    channel: &'static str,
    mut serving: Serving,
    on_message: impl Fn(Option<&str>) + Send + 'static,
    mut stop: oneshot::Receiver<()>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        // Nobody waits: hold no LISTEN.
        tokio::select! {
            _ = &mut stop => return,
            wanted = serving.demand.wait_for(|n| *n > 0) => {
                if wanted.is_err() {
                    return;
                }
            }
        }
        let connected = {
            // Counted as a call waiting for the pool, so that the store's
            // calls give their connections back to the pool meanwhile.
            let _waiting = checkouts.wait_for_pool();
            tokio::select! {
                _ = &mut stop => return,
                listener = subscribe(&pool, channel) => listener,
            }
        };
        let mut listener = match connected {
            Ok(listener) => listener,
            Err(_) if pool.is_closed() => return,
            Err(err) => {
                tracing::debug!(error = %err, "LISTEN connection failed; retrying");
                tokio::select! {
                    _ = &mut stop => return,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        // The listener keeps its connection out of the pool while it lives.
        let _held = checkouts.hold();
        serving.listening.store(true, Ordering::Release);
        // Something may have been announced before we were listening (the
        // waiters read the database before they wait) or while we were away.
        on_message(None);
        let mut quiet_since = (*serving.demand.borrow_and_update() == 0).then(Instant::now);
        loop {
            let linger = async {
                match quiet_since {
                    Some(since) => tokio::time::sleep_until(since + LINGER).await,
                    None => std::future::pending().await,
                }
            };
            let received = tokio::select! {
                _ = &mut stop => return,
                changed = serving.demand.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let waiting = *serving.demand.borrow_and_update();
                    quiet_since = if waiting == 0 {
                        quiet_since.or_else(|| Some(Instant::now()))
                    } else {
                        None
                    };
                    continue;
                }
                () = linger => break,
                received = listener.try_recv() => received,
            };
            match received {
                Ok(Some(notification)) => on_message(Some(notification.payload())),
                // Connection lost; the next call reconnects. Something may
                // have been announced while we were away.
                Ok(None) => on_message(None),
                Err(_) if pool.is_closed() => return,
                Err(err) => {
                    tracing::debug!(error = %err, "LISTEN connection broke; reconnecting");
                    break;
                }
            }
        }
        serving.listening.store(false, Ordering::Release);
        // Dropping the listener sends `UNLISTEN *` and gives its connection
        // back to the pool.
        drop(listener);
    }
}

/// A listener subscribed to `channel`.
async fn subscribe(pool: &PgPool, channel: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(channel).await?;
    Ok(listener)
}

/// PostgreSQL only: a store holds a `LISTEN` only while something of its
/// process waits, and a busy store asks its heartbeat for idle peers.
#[cfg(test)]
mod on_postgres {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use uuid::Uuid;

    use crate::postgres::{PgQueue, listening_backends, registered_worker, single_jobs};
    use crate::store::QueueConfig;

    const PATIENCE: Duration = Duration::from_secs(30);

    /// Polls until the store listens on `want` channels and says whether
    /// it hears the work channel as `hears`.
    async fn settle(q: &PgQueue, want: i64, hears: bool, what: &str) {
        let started = tokio::time::Instant::now();
        loop {
            let now = listening_backends(q).await;
            if now == want && q.hears_work() == hears {
                return;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "{what}: {now} LISTEN backends (want {want}), hears work: {}",
                q.hears_work()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_store_listens_only_while_a_worker_or_a_long_poll_waits() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = super::super::migrated(&db.url, QueueConfig::default()).await;
        // Subscribed, but nobody waits: a busy worker, a server with no
        // long poll open.
        let mut work = q.work_events();
        let _idle = q.idle_workers();
        let mut finished = q.finished_events();
        tokio::time::sleep(super::LINGER * 2).await;
        settle(&q, 0, false, "subscriptions alone").await;

        let waiting = tokio::spawn(async move {
            loop {
                work.wait(Duration::from_secs(3600)).await;
            }
        });
        settle(&q, 1, true, "a worker waiting for work").await;
        waiting.abort();
        settle(&q, 0, false, "after the wait ended").await;

        let polling = tokio::spawn(async move {
            loop {
                finished
                    .wait_for(Uuid::now_v7(), 1, Duration::from_secs(3600))
                    .await;
            }
        });
        settle(&q, 1, false, "a long poll waiting").await;
        polling.abort();
        settle(&q, 0, false, "after the long poll ended").await;
    }

    /// Waits until `woken` holds `want`, then a little longer, and returns
    /// what it holds then.
    async fn woken_now(woken: &[Arc<AtomicUsize>], want: usize) -> Vec<usize> {
        let count = |w: &[Arc<AtomicUsize>]| {
            w.iter()
                .map(|n| n.load(Ordering::SeqCst))
                .collect::<Vec<_>>()
        };
        let started = tokio::time::Instant::now();
        while count(woken).iter().sum::<usize>() < want {
            assert!(
                started.elapsed() < PATIENCE,
                "woken: {:?}, want {want} in all",
                count(woken)
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Long enough for a wake-up of everyone to reach every store.
        tokio::time::sleep(Duration::from_millis(500)).await;
        count(woken)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_little_work_wakes_only_the_idle_workers_it_names() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let first = super::super::migrated(&db.url, QueueConfig::default()).await;
        let mut stores = vec![first];
        for _ in 1..4 {
            stores.push(
                PgQueue::connect(&db.url, Arc::new(QueueConfig::default()))
                    .await
                    .expect("connect"),
            );
        }
        let mut woken = Vec::new();
        let mut waiting = Vec::new();
        let mut workers = Vec::new();
        for q in &stores {
            let worker = registered_worker(q).await;
            workers.push(worker);
            let mut events = q.work_events();
            let count = Arc::new(AtomicUsize::new(0));
            woken.push(count.clone());
            waiting.push(tokio::spawn(async move {
                loop {
                    if events.wait(Duration::from_secs(3600)).await {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }));
        }
        for q in &stores {
            settle(q, 4, true, "four idle workers").await;
        }
        for (q, worker) in stores.iter().zip(&workers) {
            q.announce_idle(*worker).await.expect("announce idle");
        }
        // Every subscription wakes its waiters once, in case it missed
        // something.
        let before = woken_now(&woken, 4).await;

        stores[0]
            .submit(single_jobs(1), None)
            .await
            .expect("submit");
        let after = woken_now(&woken, before.iter().sum::<usize>() + 2).await;
        let rose: Vec<bool> = after.iter().zip(&before).map(|(a, b)| a > b).collect();
        assert_eq!(
            rose.iter().filter(|r| **r).count(),
            2,
            "one task wakes two idle workers, one spare: {before:?} -> {after:?}"
        );
        let marked: Vec<Uuid> =
            sqlx::query_scalar("SELECT id FROM workers WHERE idle_since IS NOT NULL ORDER BY id")
                .fetch_all(&stores[0].pool)
                .await
                .expect("marks");
        let mut asleep: Vec<Uuid> = workers
            .iter()
            .zip(&rose)
            .filter(|(_, r)| !**r)
            .map(|(w, _)| *w)
            .collect();
        asleep.sort();
        assert_eq!(marked, asleep, "the woken workers' idle marks were taken");

        // More work than idle workers: a wake-up of everyone.
        stores[0]
            .submit(single_jobs(3), None)
            .await
            .expect("submit");
        let all = woken_now(&woken, after.iter().sum::<usize>() + 4).await;
        assert!(
            all.iter().zip(&after).all(|(a, b)| a > b),
            "three tasks for two marked workers wake all: {after:?} -> {all:?}"
        );
        for task in waiting {
            task.abort();
        }
    }

    /// The next payload on the work channel within `within`, if any.
    async fn heard(listener: &mut sqlx::postgres::PgListener, within: Duration) -> Option<String> {
        tokio::time::timeout(within, listener.recv())
            .await
            .ok()
            .map(|n| n.expect("LISTEN").payload().to_owned())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_worker_going_idle_is_announced_only_while_another_could_hand_it_work() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = super::super::migrated(&db.url, QueueConfig::default()).await;
        let (idle, busy) = (registered_worker(&q).await, registered_worker(&q).await);
        let mut listener = sqlx::postgres::PgListener::connect(&db.url)
            .await
            .expect("connect");
        listener.listen(super::CHANNEL).await.expect("LISTEN");

        // Nobody holds a task: the mark, and no announcement.
        q.announce_idle(idle).await.expect("announce idle");
        assert_eq!(heard(&mut listener, Duration::from_millis(500)).await, None);
        let marked: bool =
            sqlx::query_scalar("SELECT idle_since IS NOT NULL FROM workers WHERE id = $1")
                .bind(idle)
                .fetch_one(&q.pool)
                .await
                .expect("mark");
        assert!(marked, "the idle mark is written all the same");

        // One running task: nothing to hand over either.
        q.submit(single_jobs(1), None).await.expect("submit");
        assert!(heard(&mut listener, PATIENCE).await.is_some(), "the work");
        assert_eq!(q.claim(busy, 1, 0).await.expect("claim").tasks.len(), 1);
        q.announce_idle(idle).await.expect("announce idle");
        assert_eq!(heard(&mut listener, Duration::from_millis(500)).await, None);

        // Two: one of them may wait for a slot, and be handed over.
        q.submit(single_jobs(1), None).await.expect("submit");
        assert!(heard(&mut listener, PATIENCE).await.is_some(), "the work");
        assert_eq!(q.claim(busy, 1, 0).await.expect("claim").tasks.len(), 1);
        q.announce_idle(idle).await.expect("announce idle");
        assert_eq!(
            heard(&mut listener, PATIENCE).await,
            Some(format!("idle:{idle}"))
        );
    }
}
