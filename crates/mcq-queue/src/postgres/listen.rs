//! Waking idle workers and waiting long polls: a `LISTEN` connection per
//! store and channel, started on the first wait, turns notifications into
//! an in-process signal. NOTIFY can be lost (reconnects, poolers), so waits
//! always have a timeout, and every reconnect wakes the waiters in case
//! something was missed meanwhile.
//!
//! Through a pool in transaction mode the store listens to nothing (a
//! server connection there serves whichever client runs a transaction):
//! its waiters then wake on this process's own signals and their timeouts.
//!
//! The work channel also carries idle announcements (`idle:<worker id>`,
//! [`crate::Store::announce_idle`]): they go to the idle subscribers and
//! wake nobody, since they announce no work. Every other payload (the
//! submissions' and releases' empty one) wakes the waiting workers.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::oneshot;
use uuid::Uuid;

use super::checkout::Checkouts;
use super::{CHANNEL, FINISHED_CHANNEL, PgQueue};
use crate::StoreError;
use crate::finished::FinishedEvents;
use crate::idle::{IdleAnnouncer, IdleWorkers};
use crate::work::{WorkEvents, WorkSignal};

/// Prefix of an idle announcement's payload on the work channel.
const IDLE_PREFIX: &str = "idle:";

/// The signal waiters sleep on, the idle announcements, and the listener
/// task feeding both.
#[derive(Debug, Default)]
pub(super) struct Wakeup {
    work: WorkSignal,
    idle: IdleAnnouncer,
    /// Dropping the store drops this sender, which stops the listener task.
    listener: OnceLock<oneshot::Sender<()>>,
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
        if !self.listens() {
            self.wakeup.work.wake();
        }
    }

    /// Announces on the work channel that `worker` is idle, and marks its
    /// row so, for the peers that hear no announcement (through a
    /// transaction-mode pool their heartbeats ask; `tasks.rs`).
    pub(crate) async fn announce_idle(&self, worker: Uuid) -> Result<(), StoreError> {
        sqlx::query(
            "WITH mark AS (UPDATE workers SET idle_since = now() WHERE id = $3)
             SELECT pg_notify($1, $2)",
        )
        .bind(CHANNEL)
        .bind(format!("{IDLE_PREFIX}{worker}"))
        .bind(worker)
        .execute(&mut *self.conn().await?)
        .await?;
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
    /// does not listen: then only this process's own signals wake).
    fn listen_for_work(&self) {
        if !self.listens() {
            return;
        }
        self.wakeup.listener.get_or_init(|| {
            let (stop_tx, stop_rx) = oneshot::channel();
            let work = self.wakeup.work.clone();
            let idle = self.wakeup.idle.clone();
            tokio::spawn(listen(
                self.pool.clone(),
                self.checkouts.clone(),
                CHANNEL,
                move |payload| match payload.and_then(|p| p.strip_prefix(IDLE_PREFIX)) {
                    // An unreadable announcement is dropped: it is a hint.
                    Some(worker) => {
                        if let Ok(worker) = Uuid::parse_str(worker) {
                            idle.announce(worker);
                        }
                    }
                    None => work.wake(),
                },
                stop_rx,
            ));
            stop_tx
        });
    }

    /// Subscribes to finished-work announcements (`NOTIFY` on
    /// [`FINISHED_CHANNEL`] with the batch or job id as payload).
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

/// Listens on `channel` until `stop` fires, reconnecting with capped
/// backoff; calls `on_message` with each payload, and with `None` whenever
/// notifications may have been missed (a reconnect).
async fn listen(
    pool: PgPool,
    checkouts: Arc<Checkouts>,
    channel: &'static str,
    on_message: impl Fn(Option<&str>) + Send + 'static,
    mut stop: oneshot::Receiver<()>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let connected = tokio::select! {
            _ = &mut stop => return,
            listener = subscribe(&pool, channel) => listener,
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
        // Something may have been announced before we were listening (the
        // first waiters subscribe before this connection is up) or while
        // we were away.
        on_message(None);
        loop {
            let received = tokio::select! {
                _ = &mut stop => return,
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
    }
}

/// A listener subscribed to `channel`.
async fn subscribe(pool: &PgPool, channel: &str) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(channel).await?;
    Ok(listener)
}
