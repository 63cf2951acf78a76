//! Waking idle workers: one `LISTEN` connection per store, started on the
//! first wait, turns notifications into an in-process signal. NOTIFY can be
//! lost (reconnects, poolers), so waits always have a timeout, and every
//! reconnect wakes the waiters in case something was missed meanwhile.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::postgres::{PgListener, PgPool};
use tokio::sync::{Notify, oneshot};

use super::{CHANNEL, PgQueue};

/// The signal waiters sleep on, and the listener task feeding it.
#[derive(Debug, Default)]
pub(super) struct Wakeup {
    notify: Arc<Notify>,
    /// Dropping the store drops this sender, which stops the listener task.
    listener: OnceLock<oneshot::Sender<()>>,
}

impl PgQueue {
    /// Returns on a notification, or after `timeout`.
    pub(crate) async fn wait_for_work(&self, timeout: Duration) {
        self.wakeup.listener.get_or_init(|| {
            let (stop_tx, stop_rx) = oneshot::channel();
            tokio::spawn(listen(
                self.pool.clone(),
                self.wakeup.notify.clone(),
                stop_rx,
            ));
            stop_tx
        });
        let _ = tokio::time::timeout(timeout, self.wakeup.notify.notified()).await;
    }
}

/// Wakes every current waiter and leaves a permit for the next one, so a
/// notification arriving between a worker's empty claim and its wait is
/// not lost (at worst one wait returns early).
fn wake(notify: &Notify) {
    notify.notify_waiters();
    notify.notify_one();
}

/// Listens until `stop` fires, reconnecting with capped backoff.
async fn listen(pool: PgPool, notify: Arc<Notify>, mut stop: oneshot::Receiver<()>) {
    let mut backoff = Duration::from_millis(100);
    let mut reconnecting = false;
    loop {
        let connected = tokio::select! {
            _ = &mut stop => return,
            listener = subscribe(&pool) => listener,
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
        if reconnecting {
            // Work may have been announced while we were away.
            wake(&notify);
        }
        reconnecting = true;
        loop {
            let received = tokio::select! {
                _ = &mut stop => return,
                received = listener.try_recv() => received,
            };
            match received {
                Ok(Some(_)) => wake(&notify),
                // Connection lost; the next call reconnects. Work may have
                // been announced while we were away.
                Ok(None) => wake(&notify),
                Err(_) if pool.is_closed() => return,
                Err(err) => {
                    tracing::debug!(error = %err, "LISTEN connection broke; reconnecting");
                    break;
                }
            }
        }
    }
}

/// A listener subscribed to the work channel.
async fn subscribe(pool: &PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}
