//! Exponential backoff for retrying the database after an error.

use std::future::Future;
use std::time::Duration;

use mcq_queue::StoreError;
use tokio_util::sync::CancellationToken;

/// Runs `op` until it succeeds, backing off after each error, or until
/// `give_up` is cancelled (then `None`). `what` names the operation in logs.
///
/// Dropped connections and a restarting server surface here as errors;
/// the pool reconnects on its own, so trying again later is all it takes.
pub(crate) async fn persist<T, F, Fut>(
    what: &str,
    give_up: &CancellationToken,
    mut op: F,
) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    let mut backoff = Backoff::new();
    loop {
        match op().await {
            Ok(value) => {
                if backoff.failures() > 0 {
                    tracing::info!(
                        what,
                        failures = backoff.failures(),
                        "database reachable again"
                    );
                }
                return Some(value);
            }
            Err(err) => {
                let delay = backoff.next_delay();
                tracing::warn!(what, error = %err, retry_in_ms = delay.as_millis() as u64, "database call failed");
                tokio::select! {
                    () = give_up.cancelled() => return None,
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Doubling delays from `FIRST` up to `CAP`; reset after a success.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    next: Duration,
    failures: u32,
}

const FIRST: Duration = Duration::from_millis(50);
/// A restarted PostgreSQL is usually back within seconds, so a longer cap
/// would only delay recovery; a shorter one would hammer a dead server.
const CAP: Duration = Duration::from_secs(5);

impl Backoff {
    pub(crate) fn new() -> Self {
        Backoff {
            next: FIRST,
            failures: 0,
        }
    }

    /// The delay to wait before the next try, doubling the one after.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(CAP);
        self.failures += 1;
        delay
    }

    /// Consecutive failures so far (for logs).
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Forgets past failures after a success.
    pub(crate) fn reset(&mut self) {
        *self = Backoff::new();
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    fn down() -> StoreError {
        StoreError::Corrupt("the database is away".into())
    }

    #[tokio::test(start_paused = true)]
    async fn persist_retries_after_doubling_delays_until_the_call_succeeds() {
        let start = Instant::now();
        let mut calls = 0;
        let got = persist("test", &CancellationToken::new(), || {
            calls += 1;
            let call = calls;
            async move { if call < 4 { Err(down()) } else { Ok(call) } }
        })
        .await;
        assert_eq!(got, Some(4));
        assert_eq!(start.elapsed(), FIRST + FIRST * 2 + FIRST * 4);
    }

    #[tokio::test(start_paused = true)]
    async fn persist_stops_retrying_when_told_to_give_up() {
        let start = Instant::now();
        let give_up = CancellationToken::new();
        tokio::spawn({
            let give_up = give_up.clone();
            async move {
                tokio::time::sleep(Duration::from_secs(12)).await;
                give_up.cancel();
            }
        });
        let got: Option<()> = persist("test", &give_up, || async { Err(down()) }).await;
        assert_eq!(got, None);
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(12),
            "not a retry longer"
        );
    }

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut backoff = Backoff::new();
        let delays: Vec<Duration> = (0..10).map(|_| backoff.next_delay()).collect();
        assert_eq!(delays[0], FIRST);
        assert_eq!(delays[1], FIRST * 2);
        assert!(delays.windows(2).all(|w| w[1] >= w[0]));
        assert_eq!(*delays.last().unwrap(), CAP);
        assert_eq!(backoff.failures(), 10);
        backoff.reset();
        assert_eq!(backoff.next_delay(), FIRST);
    }
}
