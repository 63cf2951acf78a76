//! What the worker does next, as a pure function of what it knows.
//!
//! [`decide`] looks at a [`State`] (slots, local queue, finished results
//! waiting to be recorded, recent task and claim times, the clock) and
//! returns one [`Decision`]. The loop in `driver.rs` carries it out and
//! asks again after every event: a finished task, a freed slot, a work or
//! idle announcement, a timer. Nothing here waits, reads the clock or
//! calls the database, so every rule is tested by a table of cases.
//!
//! The rules (docs/worker.md, "Design decisions", says why each is kept):
//!
//! - **Claim** the free slots plus a prefetch window of work judged by the
//!   recent task time (a longer window while claims are slow to answer),
//!   once the local queue is down to half of that window, and, when every
//!   slot has work, after a random share of half the work left here (so
//!   that a fleet of equal tasks started together does not claim in
//!   step); not while the
//!   queue was just seen short and tasks still wait here, nor after a
//!   claim found nothing (either until work is announced or the poll
//!   interval passes, or, when the claim passed over work other claims
//!   held, a short delay the loop chose), while tasks handed
//!   to an idle worker still wait here, or while the held leases fill the
//!   room.
//! - **Hand off** the later half of the local queue when another worker
//!   announces it is idle and that half holds more work than two claim
//!   round trips.
//! - **Flush** finished results when `complete_batch` of them wait,
//!   `complete_wait` after the first one, when one of them is the result
//!   of a job of its own (no batch: someone likely waits on that job), or
//!   when nothing else is running, waiting or being claimed here; a claim
//!   made first carries them.
//!   Other results that finish while a claim is in flight wait for the
//!   next claim (within `complete_wait`) rather than go in a call of their own,
//!   also when the slots have nothing left to run until that claim
//!   answers: on a database that is the fleet's bottleneck, claims are in
//!   flight most of the time, and those extra calls cost more than they
//!   saved. At most one claim and one flush are in flight at once.
//! - **Announce** once that this worker is idle when the queue is empty
//!   and nothing is left here (not when its last claim found the work held
//!   by other claims: there is work, and it claims again shortly).
//! - At **shutdown**: no claims or hand-offs; running tasks finish until the
//!   deadline, then are cancelled and get [`CANCEL_GRACE`]; results are
//!   recorded; the loop gives up [`CLEANUP_GRACE`] after the deadline.

use std::time::Duration;

use tokio::time::Instant;

/// How long cancelled tasks get to reach a chunk boundary at shutdown.
pub(crate) const CANCEL_GRACE: Duration = Duration::from_secs(2);
/// Time after the shutdown deadline for recording and handing back before
/// the worker stops retrying a database that is gone.
pub(crate) const CLEANUP_GRACE: Duration = Duration::from_secs(5);

/// Round trips of a claim that the prefetch window holds at least.
pub(crate) const CLAIM_ROUND_TRIPS: f64 = 20.0;
/// The most slow claims stretch the prefetch window, as a multiple of the
/// configured one: a bound on the work one worker holds back from others
/// at the end of a batch.
pub(crate) const MOST_STRETCH: f64 = 2.0;

/// The longest a claim ahead waits past the moment the local queue ran
/// low, as a share of the work then left here (see [`decide`]).
pub(crate) const MOST_SPREAD: f64 = 0.5;

/// The worker's fixed knobs, from [`crate::WorkerConfig`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rules {
    /// Compute slots.
    pub(crate) slots: usize,
    /// Most tasks claimed in one call.
    pub(crate) claim_batch: usize,
    /// Work claimed ahead of the free slots, judged by recent task times.
    pub(crate) prefetch_window: Duration,
    /// Results recorded at once when this many wait (N).
    pub(crate) complete_batch: usize,
    /// Results recorded at the latest this long after the first one
    /// began to wait (T).
    pub(crate) complete_wait: Duration,
}

impl Rules {
    /// The rules of a worker configured by `config` with `slots` slots.
    pub(crate) fn of(config: &crate::WorkerConfig, slots: usize) -> Rules {
        Rules {
            slots,
            claim_batch: config.claim_batch.max(1),
            prefetch_window: config.prefetch_window,
            complete_batch: config.complete_batch.max(1),
            complete_wait: config.complete_wait,
        }
    }

    /// Of a claim of `n` tasks, those wanted beyond the slots that are
    /// free and not already filled by the local queue: the prefetch, which
    /// the store limits to this worker's share of the fleet's work left
    /// (`Store::complete_and_claim_ahead`).
    pub(crate) fn ahead(&self, state: &State, n: usize) -> usize {
        let free = self
            .slots
            .saturating_sub(state.running)
            .saturating_sub(state.local);
        n.saturating_sub(free)
    }

    /// Most leases held at once: a claim batch in hand and a completion
    /// batch waiting, and at least one more than the slots. When the
    /// database records slower than the slots compute, the worker stops
    /// claiming rather than pile up leases that could expire in the backlog.
    pub(crate) fn max_held(&self) -> usize {
        (self.claim_batch + self.complete_batch).max(self.slots + 1)
    }

    /// The prefetch window, in milliseconds, for claims that take
    /// `claim_ms` to answer: the configured one, stretched to
    /// [`CLAIM_ROUND_TRIPS`] round trips of a claim when claims are slow,
    /// to at most [`MOST_STRETCH`] times the configured window.
    ///
    /// Claims slow down when the database is short of CPU, and a fleet
    /// that kept claiming the same few tasks per call then spent more of
    /// that CPU per task on calls: 256 one-slot workers of 50 ms tasks on
    /// two cores read about a fifth less CPU per task with a window of a
    /// second than of 400 ms, where a fleet of 16 read more with it, its
    /// batch's tail longer (docs/results.md). The worker tops up at half
    /// the window, so a claim's round trip stays at most a tenth of the
    /// work it still holds.
    pub(crate) fn window_ms(&self, claim_ms: f64) -> f64 {
        let set = self.prefetch_window.as_secs_f64() * 1e3;
        (claim_ms * CLAIM_ROUND_TRIPS).clamp(set, set * MOST_STRETCH)
    }

    /// Whether the local queue is down to the mark where the worker
    /// claims more: half of its prefetch.
    pub(crate) fn low(&self, state: &State) -> bool {
        state.local <= self.prefetch(state.task_ms, state.claim_ms) / 2
    }

    /// How long a claim ahead of busy slots waits after the local queue
    /// ran low: the worker's share (`state.spread`) of [`MOST_SPREAD`] of
    /// the work waiting here. Half of that work or more is left when the
    /// claim goes, ten round trips of a claim or more at the window's
    /// least (see [`Rules::window_ms`]).
    pub(crate) fn spread(&self, state: &State) -> Duration {
        let left_ms = state.task_ms.unwrap_or(0.0) * state.local as f64 / self.slots.max(1) as f64;
        let ms = left_ms * MOST_SPREAD * state.spread.clamp(0.0, 1.0);
        Duration::from_secs_f64(ms.max(0.0) / 1e3)
    }

    /// Tasks worth holding beyond the free slots: enough to keep every slot
    /// busy for the prefetch window (stretched by slow claims, see
    /// [`Rules::window_ms`]) at `task_ms` per task, at most a claim batch;
    /// none while task times are unknown, so long tasks are never hoarded.
    pub(crate) fn prefetch(&self, task_ms: Option<f64>, claim_ms: f64) -> usize {
        let Some(task_ms) = task_ms else {
            return 0;
        };
        let window_ms = self.window_ms(claim_ms);
        // A floor keeps the count finite for tasks that take no time.
        let tasks = window_ms / task_ms.max(0.001) * self.slots as f64;
        if tasks >= self.claim_batch as f64 {
            self.claim_batch
        } else {
            tasks as usize
        }
    }
}

/// What the loop knows when it decides.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct State {
    /// The loop's clock.
    pub(crate) now: Instant,
    /// Slots computing a task.
    pub(crate) running: usize,
    /// Claimed tasks waiting for a slot.
    pub(crate) local: usize,
    /// Leases held: local, running and finished but not yet recorded.
    pub(crate) held: usize,
    /// Finished tasks (computed, failed or cancelled) not yet recorded.
    pub(crate) pending: usize,
    /// When the oldest of those finished.
    pub(crate) first_pending: Option<Instant>,
    /// One of those is a whole job's result of a job without a batch.
    pub(crate) urgent: bool,
    /// Recent compute time per task; `None` until one finished since the
    /// worker last ran out of work.
    pub(crate) task_ms: Option<f64>,
    /// Recent round trip of a claim.
    pub(crate) claim_ms: f64,
    /// Set when a claim found fewer tasks than it asked for: until then no
    /// claim can help while tasks still wait here, unless work is
    /// announced first.
    pub(crate) drained_until: Option<Instant>,
    /// The last claim found nothing at all: until `drained_until`, no
    /// claim can help even with nothing left here.
    pub(crate) claimed_none: bool,
    /// The last claim passed over work other claims held, and
    /// `drained_until` is a short delay: work is waiting, not gone.
    pub(crate) contended: bool,
    /// Tasks were handed to an idle worker since the last claim: claiming
    /// before the local queue is empty would take them back.
    pub(crate) handed_off: bool,
    /// Another worker announced that it is idle (since the last decision).
    pub(crate) peer_idle: bool,
    /// This worker announced itself idle since it last claimed a task.
    pub(crate) announced_idle: bool,
    /// When the local queue was first seen low ([`Rules::low`]) since the
    /// last claim began.
    pub(crate) low_since: Option<Instant>,
    /// This worker's share, from 0 to 1, of the longest wait of its next
    /// claim ahead ([`Rules::spread`]), drawn at random as each claim
    /// begins.
    pub(crate) spread: f64,
    /// A database call failed: no call before this.
    pub(crate) retry_at: Option<Instant>,
    /// A claim is in flight.
    pub(crate) claiming: bool,
    /// A flush is in flight.
    pub(crate) flushing: bool,
    /// Set once shutdown began.
    pub(crate) stop: Option<Stopping>,
}

/// Where a shutdown stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopping {
    /// When running tasks are cancelled.
    pub(crate) deadline: Instant,
    /// Whether they were.
    pub(crate) cancelled: bool,
}

/// The next step of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Claim up to this many tasks, recording the computed results
    /// waiting here in the same call.
    Claim(usize),
    /// Record the results waiting here.
    Flush,
    /// Hand this many unstarted tasks (the last claimed) back to the queue
    /// for an idle worker.
    HandOff(usize),
    /// Tell other workers this one is idle.
    AnnounceIdle,
    /// Raise the cancel flag of every running task (shutdown deadline).
    CancelRunning,
    /// Wait for an event: a finished task, an announcement, shutdown; or
    /// until `until`; with `work`, also for work to be announced.
    Wait {
        /// Latest moment to decide again.
        until: Option<Instant>,
        /// Whether an announcement of new work can change the decision.
        work: bool,
    },
    /// Shutdown is complete (or given up): leave the loop.
    Stop,
}

/// The decision for `state` under `rules` (module docs).
pub(crate) fn decide(state: &State, rules: &Rules) -> Decision {
    let now = state.now;
    let can_call = state.retry_at.is_none_or(|at| at <= now);
    let flush_at = state.first_pending.map(|at| at + rules.complete_wait);
    let flush_due = state.pending > 0
        && (state.pending >= rules.complete_batch
            || state.urgent
            || flush_at.is_some_and(|at| at <= now));
    // While calls wait for a retry, or a flush is in flight, a due flush
    // is no reason to wake: the retry or the flush's end is.
    let (flush_at, retry_at) = if can_call {
        (flush_at.filter(|_| !state.flushing), None)
    } else {
        (None, state.retry_at)
    };

    if let Some(stop) = state.stop {
        let give_up = stop.deadline + CLEANUP_GRACE;
        if now >= give_up {
            return Decision::Stop;
        }
        let grace_over = stop.cancelled && now >= stop.deadline + CANCEL_GRACE;
        let tasks_over = state.running == 0 || grace_over;
        if state.pending > 0 && can_call && !state.flushing && (tasks_over || flush_due) {
            return Decision::Flush;
        }
        if tasks_over && state.pending == 0 && !state.claiming && !state.flushing {
            return Decision::Stop;
        }
        if state.running > 0 && !stop.cancelled && now >= stop.deadline {
            return Decision::CancelRunning;
        }
        let phase_end = if stop.cancelled {
            stop.deadline + CANCEL_GRACE
        } else {
            stop.deadline
        };
        let until = [flush_at, retry_at, Some(phase_end), Some(give_up)];
        return Decision::Wait {
            until: earliest(until),
            work: false,
        };
    }

    if state.peer_idle && can_call {
        let half = state.local / 2;
        let moved_ms = state.task_ms.map_or(0.0, |ms| half as f64 * ms);
        if half > 0 && moved_ms > 2.0 * state.claim_ms {
            return Decision::HandOff(half);
        }
    }

    let short = state.drained_until.is_some_and(|until| now < until);
    // After a short claim the queue may still hold work another worker
    // skipped past; once nothing waits here, one more claim tells.
    let drained = short && (state.local > 0 || state.claimed_none);
    let prefetch = rules.prefetch(state.task_ms, state.claim_ms);
    let free = rules.slots.saturating_sub(state.running);
    let room = rules.max_held().saturating_sub(state.held);
    let want = (free + prefetch)
        .saturating_sub(state.local)
        .min(rules.claim_batch)
        .min(room);
    let low = rules.low(state);
    let keeping_hand_off = state.handed_off && state.local > 0;
    let claim = can_call && !state.claiming && want > 0 && low && !drained && !keeping_hand_off;
    // A claim only of work ahead (every free slot has a task here) waits
    // its random share of the spread past the moment the queue ran low,
    // unless results are due: it carries them.
    let ahead_only = free <= state.local;
    let spread_until = state
        .low_since
        .map(|since| since + rules.spread(state))
        .filter(|&at| claim && ahead_only && !flush_due && at > now);
    if claim && spread_until.is_none() {
        return Decision::Claim(want);
    }

    let idle = state.running == 0 && state.local == 0;
    // A worker whose slots wait for the claim in flight is not done: the
    // claim's answer brings work, and the results ride the next claim.
    let flush_now = flush_due || (idle && !state.claiming);
    if can_call && !state.flushing && state.pending > 0 && flush_now {
        return Decision::Flush;
    }
    let quiet = !state.claiming && !state.flushing && state.pending == 0;
    let out_of_work = state.claimed_none && !state.contended;
    if can_call && drained && out_of_work && idle && quiet && !state.announced_idle {
        return Decision::AnnounceIdle;
    }
    let drained_until = state.drained_until.filter(|_| drained);
    Decision::Wait {
        until: earliest([flush_at, drained_until, retry_at, spread_until]),
        // Work passed over because other claims held it is announced by no
        // one: a contended worker waits out its short delay without
        // listening (listening costs the database a wake-up per finished
        // job).
        work: drained && !state.contended,
    }
}

fn earliest<const N: usize>(times: [Option<Instant>; N]) -> Option<Instant> {
    times.into_iter().flatten().min()
}

#[cfg(test)]
mod tests;
