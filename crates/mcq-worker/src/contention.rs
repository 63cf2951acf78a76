//! How soon to claim again after a claim passed over work that other
//! claims held.
//!
//! On PostgreSQL a staged batch row is taken by one claim at a time, so in
//! a large fleet the claims that arrive while one holds it find nothing
//! else and are told so (`CompletedAndClaimed::contended`). Work is
//! waiting and no signal will announce it, so such a worker claims again
//! after a short delay instead of waiting for the poll. The delays double
//! while the claims keep finding the rows held, from [`FIRST`] up to
//! [`CAP`], and each is drawn from the upper half of its range, so that the
//! workers that collided once spread out instead of colliding again.

use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// The first delay: about the time one claim holds a staged row.
pub(crate) const FIRST: Duration = Duration::from_millis(2);
/// The longest delay: far below the poll, so a worker never waits long
/// for work that is already there, and long enough that a crowd of
/// workers backing off does not keep the database busy with empty claims.
pub(crate) const CAP: Duration = Duration::from_millis(100);

/// Delays for one worker's claims while they find the work held.
#[derive(Debug, Clone)]
pub(crate) struct Contention {
    next: Duration,
    rng: Xoshiro256PlusPlus,
}

impl Contention {
    /// A worker's delays, drawn from a generator seeded with `seed` (the
    /// worker's id: different workers draw different delays).
    pub(crate) fn new(seed: u64) -> Contention {
        Contention {
            next: FIRST,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The delay before claiming again after one more contended claim:
    /// between half the current step and the step, which then doubles.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let step = self.next;
        self.next = (step * 2).min(CAP);
        let half = step / 2;
        let nanos = u64::try_from(half.as_nanos()).unwrap_or(u64::MAX);
        half + Duration::from_nanos(self.rng.random_range(0..=nanos))
    }

    /// A claim found the work it could: the next contention starts short.
    pub(crate) fn reset(&mut self) {
        self.next = FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_within_their_upper_half_up_to_the_cap_and_restart_after_a_reset() {
        let mut contention = Contention::new(7);
        let mut step = FIRST;
        for _ in 0..12 {
            let delay = contention.next_delay();
            assert!(
                delay >= step / 2 && delay <= step,
                "{delay:?} outside {step:?}"
            );
            step = (step * 2).min(CAP);
        }
        assert_eq!(step, CAP, "twelve doublings of 2 ms reach the cap");
        contention.reset();
        assert!(contention.next_delay() <= FIRST);
    }

    #[test]
    fn workers_with_different_seeds_draw_different_delays() {
        let (mut a, mut b) = (Contention::new(1), Contention::new(2));
        let a: Vec<Duration> = (0..8).map(|_| a.next_delay()).collect();
        let b: Vec<Duration> = (0..8).map(|_| b.next_delay()).collect();
        assert_ne!(a, b);
    }
}
