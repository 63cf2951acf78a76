//! Long polls: `?wait=` on `GET /v1/batches/{id}` and `GET /v1/jobs/{id}`
//! holds the answer until the batch is done (the job has finished) or the
//! wait runs out, so a client learns of completion from one request
//! instead of polling every few milliseconds.
//!
//! Completions happen wherever the workers run — other processes, other
//! machines — so the server cannot rely on an in-process signal; it
//! re-reads the row. Each re-read is one query, so the pause between reads
//! follows the batch's progress: long while much work remains, short near
//! the end, never longer than [`MAX_PAUSE`] (the most a wait adds to the
//! moment a client sees the last result). Where every process announces
//! the jobs it finishes (PostgreSQL), those announcements wake the wait
//! and it re-reads on its own only every [`ANNOUNCED_MAX_PAUSE`], a
//! safety net for an announcement lost in flight.

use std::time::Duration;

use mcq_api_types::MAX_WAIT;
use tokio::sync::watch;
use tokio::time::Instant;
use uuid::Uuid;

use crate::problem::ApiError;

/// Shortest pause between two reads of the same row.
const MIN_PAUSE: Duration = Duration::from_millis(1);
/// Longest pause between two reads: bounds how late a wait notices completion.
pub(crate) const MAX_PAUSE: Duration = Duration::from_millis(25);
/// Longest pause between two reads while finished-work announcements from
/// every process wake the wait. Each read of a batch costs the database
/// about 0.8 ms of CPU on the machine we measure on; at the 25 ms cap a
/// waiting client read its batch 23 times in a 0.6 s `mcq bench compare`
/// trial, CPU taken from the workers' kernels.
pub(crate) const ANNOUNCED_MAX_PAUSE: Duration = Duration::from_millis(250);
/// First pause while nothing is known about the pace of the work.
const FIRST_PAUSE: Duration = Duration::from_millis(2);
/// A pause lasts at least this many times the read before it. Reading a
/// big batch's view is itself work (about 0.2 s of PostgreSQL CPU per
/// 100,000 jobs, measured with `pg_stat_statements`), and without this
/// floor one waiting client would keep a database backend busy the whole
/// time; with it a wait costs at most a fifth of one.
const READ_COST_FACTOR: u32 = 4;

/// Set when the server begins a graceful shutdown; waits then answer at
/// once instead of holding the shutdown up for their full length.
#[derive(Debug, Clone)]
pub(crate) struct Stopping(pub(crate) watch::Receiver<bool>);

/// Exactly the values [`parse_wait`] accepts, as a regular expression for
/// the OpenAPI document: 0 to 60 seconds written as seconds (`2`, `2.5s`)
/// or milliseconds (`500ms`).
pub(crate) const WAIT_PATTERN: &str =
    r"^0*(([1-5]?[0-9](\.[0-9]+)?|60(\.0+)?)s?|([1-5]?[0-9]{1,4}(\.[0-9]+)?|60000(\.0+)?)ms)$";

/// Parses `wait`: `250ms`, `1.5s`, or a bare number of seconds (as in the
/// `Prefer: wait=` header of RFC 7240); from 0 to [`MAX_WAIT`], compared
/// as written (no rounding lets `60.000001` through). Absent means no
/// wait; an empty value is refused like any other malformed one.
pub(crate) fn parse_wait(text: Option<&str>) -> Result<Duration, ApiError> {
    let Some(text) = text else {
        return Ok(Duration::ZERO);
    };
    let bad = || {
        ApiError::BadParameter(format!(
            "wait must be a duration from 0 to {} s, such as 500ms, 2s or 2 (seconds); got {:?}",
            MAX_WAIT.as_secs(),
            text.chars().take(40).collect::<String>()
        ))
    };
    let (number, scale, max) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3, MAX_WAIT.as_millis())
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0, u128::from(MAX_WAIT.as_secs()))
    } else {
        (text, 1.0, u128::from(MAX_WAIT.as_secs()))
    };
    // Digits, optionally a dot and more digits: no signs, exponents,
    // spaces, `inf` or `NaN`.
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty()
        || !digits(whole)
        || !digits(fraction)
        || (number.contains('.') && fraction.is_empty())
    {
        return Err(bad());
    }
    let significant = whole.trim_start_matches('0');
    let within = match significant.parse::<u128>() {
        _ if significant.len() > 12 => false,
        Ok(n) if n < max => true,
        Ok(n) if n == max => fraction.bytes().all(|b| b == b'0'),
        Ok(_) => false,
        // Only zeros before the dot.
        Err(_) => true,
    };
    if !within {
        return Err(bad());
    }
    let seconds = number.parse::<f64>().map_err(|_| bad())? * scale;
    Ok(Duration::from_secs_f64(seconds.min(MAX_WAIT.as_secs_f64())))
}

/// The longest a wait may hold a request under `request_timeout`: three
/// quarters of it, so the answer leaves before the timeout middleware
/// turns it into a 503.
pub(crate) fn cap(wait: Duration, request_timeout: Duration) -> Duration {
    wait.min(request_timeout * 3 / 4)
}

/// Chooses the pause before the next read from the progress seen so far.
#[derive(Debug)]
pub(crate) struct Pacer {
    /// When the first read happened and how many were finished then.
    first: Option<(Instant, u64)>,
    /// The pause used while no progress has been seen.
    backoff: Duration,
    /// The longest pause (a slow read can still stretch it).
    max: Duration,
}

impl Pacer {
    pub(crate) fn new(max: Duration) -> Self {
        Pacer {
            first: None,
            backoff: FIRST_PAUSE,
            max: max.max(FIRST_PAUSE),
        }
    }

    /// The pause after a read at `now` that found `finished` of `total`
    /// finished. Once progress has been seen, the remaining work is
    /// estimated from the rate since the first read and the pause is half
    /// of it: reads thin out while much remains and tighten at the end.
    /// Without progress it backs off by half each time. Never shorter than
    /// [`READ_COST_FACTOR`] times `read`, what the last read took.
    pub(crate) fn pause(
        &mut self,
        now: Instant,
        read: Duration,
        finished: u64,
        total: u64,
    ) -> Duration {
        let (t0, f0) = *self.first.get_or_insert((now, finished));
        let elapsed = now.duration_since(t0).as_secs_f64();
        let pause = if finished > f0 && elapsed > 0.0 {
            let rate = (finished - f0) as f64 / elapsed;
            let remaining = total.saturating_sub(finished) as f64 / rate;
            Duration::from_secs_f64(remaining / 2.0)
        } else {
            let pause = self.backoff;
            self.backoff = (self.backoff * 3 / 2).min(self.max);
            pause
        };
        pause
            .clamp(MIN_PAUSE, self.max)
            .max(read * READ_COST_FACTOR)
    }
}

/// How far the awaited work has come, as read from one view.
pub(crate) struct Progress {
    pub(crate) finished: u64,
    pub(crate) total: u64,
    pub(crate) done: bool,
}

/// What a long poll can be woken by besides its own schedule: the store's
/// finished-work announcements, filtered by the key of the awaited work
/// (its batch id, or the id of a job without a batch) as read from the
/// view by `key`.
pub(crate) struct Wake<T> {
    pub(crate) events: mcq_queue::FinishedEvents,
    pub(crate) key: fn(&T) -> Uuid,
}

/// Reads a view with `read` until `progress` says it is done, `wait` has
/// run out or the server is stopping, pacing the reads with a [`Pacer`];
/// returns the last view. With a zero wait that is exactly one read. With
/// `wake`, the next read comes forward once as many jobs of the awaited
/// work have been announced finished as were unfinished at the last read,
/// though never sooner than [`READ_COST_FACTOR`] times that read.
pub(crate) async fn poll_until<T, Fut>(
    wait: Duration,
    mut stopping: Option<Stopping>,
    mut wake: Option<Wake<T>>,
    mut read: impl FnMut() -> Fut,
    progress: impl Fn(&T) -> Progress,
) -> Result<T, ApiError>
where
    Fut: std::future::Future<Output = Result<T, ApiError>>,
{
    let deadline = Instant::now() + wait;
    let announced = wake
        .as_ref()
        .is_some_and(|w| w.events.covers_every_process());
    let mut pacer = Pacer::new(if announced {
        ANNOUNCED_MAX_PAUSE
    } else {
        MAX_PAUSE
    });
    loop {
        let started = Instant::now();
        let view = read().await?;
        let Progress {
            finished,
            total,
            done,
        } = progress(&view);
        let now = Instant::now();
        let read_took = now - started;
        let pause = pacer.pause(now, read_took, finished, total);
        if done {
            return Ok(view);
        }
        let keep_going = match wake.as_mut() {
            None => sleep_until_next(pause, deadline, stopping.as_mut()).await,
            Some(wake) => {
                let key = (wake.key)(&view);
                let remaining = total.saturating_sub(finished).max(1);
                let floor = (read_took * READ_COST_FACTOR).clamp(MIN_PAUSE, pause);
                sleep_until_next(floor, deadline, stopping.as_mut()).await
                    && woken_or_slept(
                        &mut wake.events,
                        (key, remaining),
                        pause - floor,
                        deadline,
                        stopping.as_mut(),
                    )
                    .await
            }
        };
        if !keep_going {
            return Ok(view);
        }
    }
}

/// Like [`sleep_until_next`], but ends early once `remaining` jobs under
/// `key` have been announced as finished.
async fn woken_or_slept(
    events: &mut mcq_queue::FinishedEvents,
    (key, remaining): (Uuid, u64),
    pause: Duration,
    deadline: Instant,
    stopping: Option<&mut Stopping>,
) -> bool {
    tokio::select! {
        keep_going = sleep_until_next(pause, deadline, stopping) => keep_going,
        _ = events.wait_for(key, remaining, pause) => Instant::now() < deadline,
    }
}

/// Sleeps for `pause`, but not past `deadline`. Returns false when the
/// wait should end now: the deadline has passed or the server is stopping.
pub(crate) async fn sleep_until_next(
    pause: Duration,
    deadline: Instant,
    stopping: Option<&mut Stopping>,
) -> bool {
    let now = Instant::now();
    if now >= deadline {
        return false;
    }
    let wake = deadline.min(now + pause);
    match stopping {
        Some(Stopping(stop)) => {
            if *stop.borrow() {
                return false;
            }
            tokio::select! {
                () = tokio::time::sleep_until(wake) => true,
                // A changed flag or a dropped sender both mean shutdown.
                _ = stop.changed() => false,
            }
        }
        None => {
            tokio::time::sleep_until(wake).await;
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_parse_with_and_without_units() {
        let ok = |text: &str| parse_wait(Some(text)).expect(text);
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("1.5s"), Duration::from_millis(1500));
        assert_eq!(ok("2"), Duration::from_secs(2));
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("60s"), MAX_WAIT);
        assert_eq!(ok("60.000s"), MAX_WAIT);
        assert_eq!(ok("60000ms"), MAX_WAIT);
        assert_eq!(ok("007s"), Duration::from_secs(7));
        assert_eq!(parse_wait(None).unwrap(), Duration::ZERO);
    }

    #[test]
    fn bad_waits_are_refused() {
        for bad in [
            "-1",
            "61",
            "60001ms",
            "1e3",
            "NaN",
            "inf",
            "abc",
            "1m",
            "1h",
            "s",
            "ms",
            ".",
            "1.2.3",
            "+5",
            "5 s",
            "0x10",
            "1_000",
            "",
            " 3s",
            "3s ",
            ".5",
            "5.",
            "60.0000001",
            "60000.5ms",
            "59.99999999999999999999999999999999999999999999999999999999999999s1",
        ] {
            let err = parse_wait(Some(bad)).expect_err(bad);
            assert!(matches!(err, ApiError::BadParameter(_)), "{bad}: {err:?}");
        }
    }

    #[test]
    fn a_wait_stays_below_the_request_timeout() {
        let timeout = Duration::from_secs(30);
        assert_eq!(
            cap(Duration::from_secs(60), timeout),
            Duration::from_millis(22_500)
        );
        assert_eq!(cap(Duration::from_secs(5), timeout), Duration::from_secs(5));
    }

    #[test]
    fn pauses_back_off_without_progress_and_tighten_near_the_end() {
        let start = Instant::now();
        let mut pacer = Pacer::new(MAX_PAUSE);
        let mut last = Duration::ZERO;
        for i in 0..20 {
            let pause = pacer.pause(start + Duration::from_millis(i), Duration::ZERO, 0, 100);
            assert!(
                pause >= last && pause <= MAX_PAUSE,
                "{pause:?} after {last:?}"
            );
            last = pause;
        }
        assert_eq!(last, MAX_PAUSE, "the backoff reaches its cap");
        // 50 of 100 done after 500 ms: about 500 ms remain, so the cap applies.
        let far = pacer.pause(start + Duration::from_millis(500), Duration::ZERO, 50, 100);
        assert_eq!(far, MAX_PAUSE);
        // 98 of 100 after 980 ms: about 20 ms remain, so pause about 10 ms.
        let near = pacer.pause(start + Duration::from_millis(980), Duration::ZERO, 98, 100);
        assert!(
            near < MAX_PAUSE && near >= Duration::from_millis(9),
            "{near:?}"
        );
        // All done: the shortest pause (the caller stops reading anyway).
        assert_eq!(
            pacer.pause(
                start + Duration::from_millis(1000),
                Duration::ZERO,
                100,
                100
            ),
            MIN_PAUSE
        );
    }

    #[test]
    fn announced_waits_read_rarely_until_the_end_is_near() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let mut pacer = Pacer::new(ANNOUNCED_MAX_PAUSE);
        pacer.pause(start, Duration::ZERO, 0, 100);
        // 10 of 100 after 60 ms: about 540 ms remain. Announcements wake
        // the wait, so the safety-net read waits 250 ms rather than 25.
        let far = pacer.pause(start + ms(60), Duration::ZERO, 10, 100);
        assert_eq!(far, ANNOUNCED_MAX_PAUSE);
        // 90 of 100 after 540 ms: about 60 ms remain, pause about 30 ms.
        let near = pacer.pause(start + ms(540), Duration::ZERO, 90, 100);
        assert!(near > ms(25) && near < ms(35), "{near:?}");
        // Without progress the backoff climbs to the same cap.
        let mut idle = Pacer::new(ANNOUNCED_MAX_PAUSE);
        let last = (0..40)
            .map(|i| idle.pause(start + ms(i), Duration::ZERO, 0, 100))
            .last();
        assert_eq!(last, Some(ANNOUNCED_MAX_PAUSE));
    }

    #[test]
    fn an_expensive_read_spaces_the_next_one_out() {
        let start = Instant::now();
        let mut pacer = Pacer::new(MAX_PAUSE);
        // A 200 ms read of a big batch: the next read waits 0.8 s, past
        // the usual cap, so the wait keeps a backend busy a fifth of the time.
        let pause = pacer.pause(start, Duration::from_millis(200), 10, 100_000);
        assert_eq!(pause, Duration::from_millis(800));
        // A cheap read leaves the progress-based pause alone.
        let pause = pacer.pause(
            start + Duration::from_millis(1),
            Duration::from_micros(100),
            10,
            100_000,
        );
        assert!(pause <= MAX_PAUSE, "{pause:?}");
    }
}
