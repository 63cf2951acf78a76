//! Tables of cases for [`decide`]: each row is a state, told from a busy
//! default, and the decision it must lead to.

use super::*;

const MS: Duration = Duration::from_millis(1);

fn rules() -> Rules {
    Rules {
        slots: 2,
        claim_batch: 1000,
        prefetch_window: 100 * MS,
        complete_batch: 100,
        complete_wait: 200 * MS,
    }
}

/// Both slots busy with 10 ms tasks, nothing waiting, nothing to record.
fn busy(now: Instant) -> State {
    State {
        now,
        running: 2,
        local: 0,
        held: 2,
        pending: 0,
        first_pending: None,
        urgent: false,
        task_ms: Some(10.0),
        claim_ms: 1.0,
        drained_until: None,
        claimed_none: false,
        contended: false,
        handed_off: false,
        peer_idle: false,
        announced_idle: false,
        low_since: None,
        spread: 0.0,
        retry_at: None,
        claiming: false,
        flushing: false,
        stop: None,
    }
}

fn wait(until: Option<Instant>) -> Decision {
    Decision::Wait { until, work: false }
}

fn check(cases: Vec<(&str, State, Decision)>) {
    let rules = rules();
    for (name, state, expected) in cases {
        assert_eq!(decide(&state, &rules), expected, "{name}: {state:?}");
    }
}

#[test]
fn claims_free_slots_and_a_prefetch_window_once_the_local_queue_is_low() {
    let now = Instant::now();
    let b = busy(now);
    check(vec![
        (
            "a fresh worker claims its free slots only",
            State {
                running: 0,
                held: 0,
                task_ms: None,
                ..b.clone()
            },
            Decision::Claim(2),
        ),
        (
            "task time unknown, one slot free",
            State {
                running: 1,
                held: 1,
                task_ms: None,
                ..b.clone()
            },
            Decision::Claim(1),
        ),
        (
            "task time unknown, slots busy: no claim can help",
            State {
                task_ms: None,
                ..b.clone()
            },
            wait(None),
        ),
        (
            "10 ms tasks on two slots: 100 ms of work ahead",
            b.clone(),
            Decision::Claim(20),
        ),
        (
            "one slot free as well",
            State {
                running: 1,
                held: 1,
                ..b.clone()
            },
            Decision::Claim(21),
        ),
        (
            "local queue at half the window: top it up",
            State {
                local: 10,
                held: 12,
                ..b.clone()
            },
            Decision::Claim(10),
        ),
        (
            "local queue above half the window: wait",
            State {
                local: 11,
                held: 13,
                ..b.clone()
            },
            wait(None),
        ),
        (
            "tasks longer than the window: free slots only",
            State {
                task_ms: Some(500.0),
                ..b.clone()
            },
            wait(None),
        ),
        (
            "tasks longer than the window, a slot free",
            State {
                running: 1,
                held: 1,
                task_ms: Some(500.0),
                ..b.clone()
            },
            Decision::Claim(1),
        ),
        (
            "tiny tasks: a whole claim batch",
            State {
                task_ms: Some(0.001),
                ..b.clone()
            },
            Decision::Claim(1000),
        ),
        (
            "tasks of no time at all stay finite",
            State {
                task_ms: Some(0.0),
                ..b.clone()
            },
            Decision::Claim(1000),
        ),
        (
            "held leases fill the room: no claim",
            State {
                task_ms: Some(0.001),
                held: 1100,
                ..b.clone()
            },
            wait(None),
        ),
        (
            "held leases leave room for ten",
            State {
                task_ms: Some(0.001),
                held: 1090,
                ..b.clone()
            },
            Decision::Claim(10),
        ),
    ]);
}

#[test]
fn an_empty_queue_is_not_claimed_from_again_until_work_is_announced() {
    let now = Instant::now();
    let b = busy(now);
    let later = now + 1000 * MS;
    let empty = State {
        drained_until: Some(later),
        claimed_none: true,
        ..b.clone()
    };
    let for_work = Decision::Wait {
        until: Some(later),
        work: true,
    };
    check(vec![
        (
            "a short claim, tasks still wait here: wait for work or the poll interval",
            State {
                local: 3,
                held: 5,
                drained_until: Some(later),
                ..b.clone()
            },
            for_work,
        ),
        (
            "a short claim, nothing left waiting: one more claim tells",
            State {
                drained_until: Some(later),
                ..b.clone()
            },
            Decision::Claim(20),
        ),
        (
            "a claim found nothing: wait for work",
            empty.clone(),
            for_work,
        ),
        (
            "nothing found, free slots: still no claim",
            State {
                running: 0,
                held: 0,
                announced_idle: true,
                ..empty.clone()
            },
            for_work,
        ),
        (
            "the poll interval passed: claim again",
            State {
                drained_until: Some(now - MS),
                ..empty.clone()
            },
            Decision::Claim(20),
        ),
        (
            "nothing found and nothing left here: announce it once",
            State {
                running: 0,
                held: 0,
                ..empty.clone()
            },
            Decision::AnnounceIdle,
        ),
        (
            "a short claim and nothing left here: claim before announcing",
            State {
                running: 0,
                held: 0,
                claimed_none: false,
                ..empty.clone()
            },
            Decision::Claim(22),
        ),
        (
            "idle, but a database call must wait: no announcement",
            State {
                running: 0,
                held: 0,
                retry_at: Some(now + 50 * MS),
                ..empty.clone()
            },
            Decision::Wait {
                until: Some(now + 50 * MS),
                work: true,
            },
        ),
    ]);
}

#[test]
fn a_claim_that_found_the_work_held_claims_again_after_its_delay_and_never_announces_idle() {
    let now = Instant::now();
    let soon = now + 3 * MS;
    let held_elsewhere = State {
        running: 0,
        held: 0,
        drained_until: Some(soon),
        claimed_none: true,
        contended: true,
        ..busy(now)
    };
    check(vec![
        (
            "nothing here, the work held by other claims: wait the short delay, not \
             listening (no one announces work passed over)",
            held_elsewhere.clone(),
            Decision::Wait {
                until: Some(soon),
                work: false,
            },
        ),
        (
            "the delay passed: claim again",
            State {
                now: soon,
                ..held_elsewhere.clone()
            },
            Decision::Claim(22),
        ),
        (
            "the same state without contention is out of work: announce it",
            State {
                contended: false,
                ..held_elsewhere
            },
            Decision::AnnounceIdle,
        ),
    ]);
}

#[test]
fn results_are_recorded_at_n_after_t_or_when_nothing_else_is_in_flight() {
    let now = Instant::now();
    let b = busy(now);
    let first = now - 50 * MS;
    let long = State {
        task_ms: Some(1000.0),
        pending: 1,
        held: 3,
        first_pending: Some(first),
        ..b.clone()
    };
    check(vec![
        (
            "one result while both slots compute: wait T after it",
            long.clone(),
            wait(Some(first + 200 * MS)),
        ),
        (
            "T passed",
            State {
                now: first + 200 * MS,
                ..long.clone()
            },
            Decision::Flush,
        ),
        (
            "N results wait",
            State {
                pending: 100,
                held: 102,
                ..long.clone()
            },
            Decision::Flush,
        ),
        (
            "nothing else running or waiting here",
            State {
                running: 0,
                held: 1,
                drained_until: Some(now + 1000 * MS),
                claimed_none: true,
                ..long.clone()
            },
            Decision::Flush,
        ),
        (
            "a claim comes first and carries them",
            State {
                running: 1,
                held: 2,
                ..long.clone()
            },
            Decision::Claim(1),
        ),
        (
            "a claim is due anyway with short tasks",
            State {
                pending: 3,
                held: 5,
                task_ms: Some(10.0),
                ..long.clone()
            },
            Decision::Claim(20),
        ),
        (
            "T passed while calls back off: wait for the retry",
            State {
                now: first + 300 * MS,
                retry_at: Some(first + 400 * MS),
                ..long.clone()
            },
            wait(Some(first + 400 * MS)),
        ),
        (
            "the retry is due",
            State {
                now: first + 400 * MS,
                retry_at: Some(first + 400 * MS),
                ..long.clone()
            },
            Decision::Flush,
        ),
    ]);
}

#[test]
fn one_claim_and_one_flush_at_a_time_and_results_do_not_wait_behind_a_claim() {
    let now = Instant::now();
    let b = busy(now);
    let first = now - 10 * MS;
    let waiting = State {
        pending: 3,
        held: 5,
        first_pending: Some(first),
        ..b.clone()
    };
    check(vec![
        (
            "a claim in flight: no second claim",
            State {
                claiming: true,
                ..b.clone()
            },
            wait(None),
        ),
        (
            "results while a claim is in flight: they wait for the next claim",
            State {
                claiming: true,
                ..waiting.clone()
            },
            wait(Some(first + 200 * MS)),
        ),
        (
            "results while a claim is in flight, and T is up: flush them",
            State {
                claiming: true,
                first_pending: Some(now - 200 * MS),
                ..waiting.clone()
            },
            Decision::Flush,
        ),
        (
            "results while the slots wait for the claim in flight: they wait for the next claim",
            State {
                claiming: true,
                running: 0,
                local: 0,
                held: 3,
                ..waiting.clone()
            },
            wait(Some(first + 200 * MS)),
        ),
        (
            "the claim found nothing: the results go at once",
            State {
                running: 0,
                local: 0,
                held: 3,
                drained_until: Some(now + 1000 * MS),
                claimed_none: true,
                ..waiting.clone()
            },
            Decision::Flush,
        ),
        (
            "a flush in flight: the claim still goes, carrying the rest",
            State {
                flushing: true,
                ..waiting.clone()
            },
            Decision::Claim(20),
        ),
        (
            "both in flight: wait for either",
            State {
                claiming: true,
                flushing: true,
                ..waiting.clone()
            },
            wait(None),
        ),
        (
            "a flush in flight and N waiting: wait for it to end",
            State {
                flushing: true,
                pending: 100,
                task_ms: Some(1000.0),
                ..waiting.clone()
            },
            wait(None),
        ),
        (
            "drained and idle, but a claim is in flight: no announcement yet",
            State {
                claiming: true,
                running: 0,
                held: 0,
                pending: 0,
                first_pending: None,
                drained_until: Some(now + 1000 * MS),
                claimed_none: true,
                ..b.clone()
            },
            Decision::Wait {
                until: Some(now + 1000 * MS),
                work: true,
            },
        ),
        (
            "stopping with a flush in flight: wait for it before stopping",
            State {
                flushing: true,
                running: 0,
                pending: 0,
                first_pending: None,
                stop: Some(Stopping {
                    deadline: now + 20_000 * MS,
                    cancelled: false,
                }),
                ..b.clone()
            },
            wait(Some(now + 20_000 * MS)),
        ),
    ]);
}

#[test]
fn a_lone_jobs_result_is_recorded_at_once_even_behind_a_claim() {
    let now = Instant::now();
    let first = now - 5 * MS;
    // A one-slot worker of 50 ms tasks with work in hand: its results
    // would wait for the next claim.
    let one = State {
        running: 1,
        local: 6,
        held: 8,
        pending: 1,
        first_pending: Some(first),
        task_ms: Some(50.0),
        ..busy(now)
    };
    let rules = Rules {
        slots: 1,
        ..rules()
    };
    let lone = State {
        urgent: true,
        ..one.clone()
    };
    let cases = vec![
        (
            "a batch's result waits T for the next claim",
            one.clone(),
            wait(Some(first + 200 * MS)),
        ),
        (
            "a lone job's result goes at once",
            lone.clone(),
            Decision::Flush,
        ),
        (
            "also while a claim is in flight",
            State {
                claiming: true,
                ..lone.clone()
            },
            Decision::Flush,
        ),
        (
            "a claim due now carries it",
            State {
                local: 0,
                held: 2,
                ..lone.clone()
            },
            Decision::Claim(2),
        ),
        (
            "a flush in flight: it waits for that one to end",
            State {
                flushing: true,
                ..lone.clone()
            },
            wait(None),
        ),
        (
            "calls back off: it waits for the retry",
            State {
                retry_at: Some(now + 30 * MS),
                ..lone.clone()
            },
            wait(Some(now + 30 * MS)),
        ),
    ];
    for (name, state, want) in cases {
        assert_eq!(decide(&state, &rules), want, "{name}");
    }
}

#[test]
fn half_the_unstarted_tasks_go_to_an_idle_worker_when_worth_two_round_trips() {
    let now = Instant::now();
    let b = State {
        local: 10,
        held: 12,
        peer_idle: true,
        ..busy(now)
    };
    check(vec![
        (
            "five tasks of 10 ms against claims of 1 ms",
            b.clone(),
            Decision::HandOff(5),
        ),
        (
            "too little work to be worth a release and a claim",
            State {
                task_ms: Some(0.3),
                local: 10,
                ..b.clone()
            },
            Decision::Claim(656),
        ),
        (
            "slow claims raise the bar (and stretch the window to 200 ms)",
            State {
                claim_ms: 30.0,
                ..b.clone()
            },
            Decision::Claim(30),
        ),
        (
            "one task: nothing to halve",
            State {
                local: 1,
                held: 3,
                ..b.clone()
            },
            Decision::Claim(19),
        ),
        (
            "task time unknown: nothing is worth moving",
            State {
                task_ms: None,
                ..b.clone()
            },
            wait(None),
        ),
        (
            "no idle worker",
            State {
                peer_idle: false,
                local: 11,
                ..b.clone()
            },
            wait(None),
        ),
        (
            "after a hand-off, no claim while tasks still wait here",
            State {
                peer_idle: false,
                handed_off: true,
                ..b.clone()
            },
            wait(None),
        ),
        (
            "after a hand-off, the local queue emptied: claim",
            State {
                peer_idle: false,
                handed_off: true,
                local: 0,
                held: 2,
                ..b.clone()
            },
            Decision::Claim(20),
        ),
    ]);
}

#[test]
fn shutdown_finishes_cancels_records_and_stops() {
    let now = Instant::now();
    let deadline = now + 20_000 * MS;
    let stopping = |cancelled| {
        Some(Stopping {
            deadline,
            cancelled,
        })
    };
    let b = State {
        stop: stopping(false),
        running: 1,
        held: 1,
        task_ms: None,
        ..busy(now)
    };
    let cancelled = State {
        now: deadline + MS,
        stop: stopping(true),
        ..b.clone()
    };
    check(vec![
        (
            "a task runs: wait for it until the deadline",
            b.clone(),
            wait(Some(deadline)),
        ),
        (
            "never a claim, even with free slots and short tasks",
            State {
                running: 0,
                held: 0,
                task_ms: Some(0.01),
                ..b.clone()
            },
            Decision::Stop,
        ),
        (
            "everything finished: record it, then stop",
            State {
                running: 0,
                pending: 3,
                held: 3,
                first_pending: Some(now),
                ..b.clone()
            },
            Decision::Flush,
        ),
        (
            "results wait while a task runs: T still applies",
            State {
                pending: 1,
                held: 2,
                first_pending: Some(now),
                ..b.clone()
            },
            wait(Some(now + 200 * MS)),
        ),
        (
            "the deadline passed: cancel the running tasks",
            State {
                now: deadline,
                ..b.clone()
            },
            Decision::CancelRunning,
        ),
        (
            "cancelled: they get the grace to stop",
            cancelled.clone(),
            wait(Some(deadline + CANCEL_GRACE)),
        ),
        (
            "the grace passed: record what finished",
            State {
                now: deadline + CANCEL_GRACE,
                pending: 1,
                first_pending: Some(deadline),
                ..cancelled.clone()
            },
            Decision::Flush,
        ),
        (
            "the grace passed, nothing to record: leave the rest",
            State {
                now: deadline + CANCEL_GRACE,
                ..cancelled.clone()
            },
            Decision::Stop,
        ),
        (
            "the database is away: retry until the cleanup grace ends",
            State {
                running: 0,
                pending: 1,
                first_pending: Some(now),
                retry_at: Some(now + 5000 * MS),
                ..b.clone()
            },
            wait(Some(now + 5000 * MS)),
        ),
        (
            "and then give up",
            State {
                now: deadline + CLEANUP_GRACE,
                running: 0,
                pending: 1,
                first_pending: Some(now),
                retry_at: Some(deadline + CLEANUP_GRACE + MS),
                ..b.clone()
            },
            Decision::Stop,
        ),
        (
            "an idle worker ignores idle peers while stopping",
            State {
                peer_idle: true,
                running: 0,
                held: 0,
                task_ms: Some(10.0),
                ..b.clone()
            },
            Decision::Stop,
        ),
    ]);
}

/// The loop turns once per event: a decision to wait must name a moment
/// still to come, or the loop would turn again at once.
#[test]
fn no_state_makes_the_loop_spin() {
    let now = Instant::now();
    let rules = rules();
    let at = |offset: i64| {
        if offset >= 0 {
            now + MS * offset.unsigned_abs() as u32
        } else {
            now - MS * offset.unsigned_abs() as u32
        }
    };
    let times = [None, Some(at(-300)), Some(at(0)), Some(at(300))];
    let mut states = 0;
    for running in 0..=2 {
        for local in [0, 1, 5, 11, 600] {
            for pending in [0, 1, 100] {
                for task_ms in [None, Some(0.001), Some(10.0), Some(1000.0)] {
                    for first in times {
                        for drained in times {
                            for retry in times {
                                let stops = [
                                    None,
                                    Some(Stopping {
                                        deadline: now,
                                        cancelled: true,
                                    }),
                                ];
                                let calls =
                                    [(false, false), (true, false), (false, true), (true, true)];
                                for (stop, (claiming, flushing)) in
                                    stops.into_iter().flat_map(|stop| calls.map(|c| (stop, c)))
                                {
                                    let state = State {
                                        now,
                                        running,
                                        local,
                                        held: running + local + pending,
                                        pending,
                                        first_pending: first.filter(|_| pending > 0),
                                        urgent: false,
                                        task_ms,
                                        claim_ms: 1.0,
                                        drained_until: drained,
                                        claimed_none: local == 0,
                                        contended: false,
                                        handed_off: false,
                                        peer_idle: false,
                                        announced_idle: true,
                                        // Since the first result: a spread
                                        // begun before, at or after it.
                                        low_since: first.or(drained),
                                        spread: 1.0,
                                        retry_at: retry,
                                        claiming,
                                        flushing,
                                        stop,
                                    };
                                    states += 1;
                                    if let Decision::Wait {
                                        until: Some(until), ..
                                    } = decide(&state, &rules)
                                    {
                                        assert!(until > now, "waits until the past: {state:?}");
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(states > 10_000);
}

#[test]
fn the_prefetch_follows_the_task_time_and_the_room_covers_the_slots() {
    let rules = rules();
    assert_eq!(rules.prefetch(None, 1.0), 0);
    assert_eq!(rules.prefetch(Some(10.0), 1.0), 20);
    assert_eq!(rules.prefetch(Some(500.0), 1.0), 0);
    assert_eq!(rules.prefetch(Some(0.0), 1.0), 1000);
    assert_eq!(rules.max_held(), 1100);
    let tiny = Rules {
        slots: 8,
        claim_batch: 1,
        complete_batch: 1,
        ..rules
    };
    assert_eq!(tiny.max_held(), 9, "at least one more than the slots");
}

#[test]
fn a_claim_is_ahead_by_what_the_free_slots_and_local_queue_do_not_take() {
    let rules = rules();
    let now = Instant::now();
    let idle = State {
        running: 0,
        held: 0,
        ..busy(now)
    };
    assert_eq!(rules.ahead(&idle, 22), 20, "two free slots, 20 ahead");
    assert_eq!(rules.ahead(&idle, 2), 0, "only the free slots");
    assert_eq!(rules.ahead(&idle, 1), 0);
    let one_free = State {
        running: 1,
        ..idle.clone()
    };
    assert_eq!(rules.ahead(&one_free, 21), 20);
    let filled = State {
        running: 1,
        local: 3,
        ..idle.clone()
    };
    assert_eq!(
        rules.ahead(&filled, 17),
        17,
        "the local queue fills the slot"
    );
    assert_eq!(rules.ahead(&busy(now), 20), 20, "no slot free");
}

#[test]
fn slow_claims_stretch_the_prefetch_window_up_to_twice() {
    // The default window, 400 ms: eight 50 ms tasks for one slot.
    let rules = Rules::of(&crate::WorkerConfig::default(), 1);
    for (claim_ms, window_ms, tasks) in [
        (1.0, 400.0, 8),
        (20.0, 400.0, 8),
        (30.0, 600.0, 12),
        (40.0, 800.0, 16),
        (50.0, 800.0, 16),
        (500.0, 800.0, 16),
    ] {
        assert!(
            (rules.window_ms(claim_ms) - window_ms).abs() < 1e-9,
            "claims of {claim_ms} ms: a window of {} ms, not {window_ms}",
            rules.window_ms(claim_ms)
        );
        assert_eq!(rules.prefetch(Some(50.0), claim_ms), tasks, "{claim_ms}");
    }
    // A window of 0 (free slots only) stays 0 however slow the claims.
    let none = Rules {
        prefetch_window: Duration::ZERO,
        ..rules.clone()
    };
    assert_eq!(none.window_ms(500.0), 0.0);
    assert_eq!(none.prefetch(Some(50.0), 500.0), 0);
    // A busy worker whose claims take 50 ms claims once per eight tasks
    // rather than once per four; the results that wait longer than
    // `complete_wait` for the next claim go in a call of their own.
    let (claims, calls) = claims_and_calls_per_task(&rules, 50 * MS);
    assert!(
        (0.1..=0.15).contains(&claims),
        "{claims:.3} claims per task"
    );
    assert!(calls <= 0.25, "{calls:.3} calls per task");
}

/// Calls (claims and flushes) per finished task of a busy one-slot worker
/// of 50 ms tasks under `rules`, in a model of the loop: the queue never
/// runs dry, calls answer at once, the loop starts a claimed task as soon
/// as its slot is free, and the task time is known from the start.
fn calls_per_task(rules: &Rules) -> f64 {
    calls_per_task_claims_taking(rules, Duration::ZERO)
}

/// The same model with claims that take `claim` to answer (a flush still
/// answers at once): the worker of a fleet whose database is its
/// bottleneck.
fn calls_per_task_claims_taking(rules: &Rules, claim: Duration) -> f64 {
    claims_and_calls_per_task(rules, claim).1
}

/// Claims, and calls of any kind, per finished task in the same model.
fn claims_and_calls_per_task(rules: &Rules, claim: Duration) -> (f64, f64) {
    let task = 50 * MS;
    let start = Instant::now();
    let mut state = State {
        running: 0,
        held: 0,
        claim_ms: claim.as_secs_f64() * 1e3,
        ..busy(start)
    };
    state.task_ms = Some(50.0);
    let mut ends_at = None;
    // The claim in flight: when it answers, and with how many tasks.
    let mut answer: Option<(Instant, usize)> = None;
    let (mut claims, mut calls, mut finished) = (0u32, 0u32, 0u32);
    while finished < 200 {
        if let Some((_, n)) = answer.filter(|&(at, _)| at <= state.now) {
            state.claiming = false;
            state.held += n;
            state.local += n;
            answer = None;
        }
        if state.running == 0 && state.local > 0 {
            state.local -= 1;
            state.running = 1;
            ends_at = Some(state.now + task);
        }
        match decide(&state, rules) {
            Decision::Claim(n) => {
                claims += 1;
                calls += 1;
                state.held -= state.pending;
                (state.pending, state.first_pending) = (0, None);
                state.claiming = true;
                answer = Some((state.now + claim, n));
            }
            Decision::Flush => {
                calls += 1;
                state.held -= state.pending;
                (state.pending, state.first_pending) = (0, None);
            }
            Decision::Wait { until, .. } => {
                let next = [until, ends_at, answer.map(|(at, _)| at)]
                    .into_iter()
                    .flatten()
                    .min()
                    .expect("a busy worker waits for its task or its claim");
                assert!(next >= state.now, "the loop waits forward");
                state.now = next;
                if ends_at == Some(next) {
                    finished += 1;
                    state.running = 0;
                    ends_at = None;
                    state.pending += 1;
                    state.first_pending.get_or_insert(next);
                }
            }
            other => panic!("a busy worker does not {other:?}"),
        }
    }
    (
        f64::from(claims) / f64::from(finished),
        f64::from(calls) / f64::from(finished),
    )
}

#[test]
fn a_busy_one_slot_worker_calls_once_per_four_tasks_by_default() {
    let rules = Rules::of(&crate::WorkerConfig::default(), 1);
    let by_default = calls_per_task(&rules);
    assert!(
        (0.2..=0.3).contains(&by_default),
        "{by_default} calls per task: the default window holds eight 50 ms \
         tasks and claims four at a time, with the results"
    );
    // Half the window: a call per two tasks; a quarter: a call per task.
    let half = Rules {
        prefetch_window: rules.prefetch_window / 2,
        ..rules.clone()
    };
    let half_calls = calls_per_task(&half);
    assert!((0.45..=0.6).contains(&half_calls), "{half_calls}");
    let quarter = Rules {
        prefetch_window: rules.prefetch_window / 4,
        ..rules
    };
    assert!(
        calls_per_task(&quarter) >= 0.95,
        "{}",
        calls_per_task(&quarter)
    );
}

#[test]
fn a_worker_waiting_on_a_slow_claim_keeps_its_results_for_the_next_one() {
    // On a database that is the fleet's bottleneck a claim can take longer
    // than a task: the slot finishes, nothing is left to run, and the
    // claim has not answered. Recording the result then in a call of its
    // own made such a worker call about twice per three tasks. (Claims
    // slower than `complete_wait` leave the results to it.) A window of
    // 200 ms claims two 50 ms tasks at a time.
    let rules = Rules {
        prefetch_window: 200 * MS,
        ..Rules::of(&crate::WorkerConfig::default(), 1)
    };
    for claim_ms in [0, 20, 60, 120, 180] {
        let calls = calls_per_task_claims_taking(&rules, claim_ms * MS);
        assert!(
            calls <= 0.55,
            "claims of {claim_ms} ms: {calls:.2} calls per task, not about one per two tasks"
        );
    }
}

#[test]
fn a_claim_ahead_waits_its_share_of_the_spread_unless_results_or_a_slot_need_it() {
    let now = Instant::now();
    let rules = rules();
    // 10 ms tasks on two slots: 20 tasks ahead, topped up at 10, which
    // hold 50 ms of work; the longest spread is half of it.
    let low = State {
        local: 10,
        held: 12,
        low_since: Some(now),
        spread: 1.0,
        ..busy(now)
    };
    assert_eq!(rules.spread(&low), 25 * MS);
    let after = |since: Duration| State {
        low_since: Some(now - since),
        ..low.clone()
    };
    check(vec![
        (
            "a claim ahead waits its share of the spread",
            low.clone(),
            wait(Some(now + 25 * MS)),
        ),
        (
            "part of the spread is over",
            after(10 * MS),
            wait(Some(now + 15 * MS)),
        ),
        ("and then it claims", after(25 * MS), Decision::Claim(10)),
        (
            "a share of none claims at once",
            State {
                spread: 0.0,
                ..low.clone()
            },
            Decision::Claim(10),
        ),
        (
            "a result of a job of its own goes now, with the claim",
            State {
                pending: 1,
                first_pending: Some(now),
                urgent: true,
                ..low.clone()
            },
            Decision::Claim(10),
        ),
        (
            "results due at T go now, with the claim",
            State {
                pending: 1,
                first_pending: Some(now - 200 * MS),
                ..low.clone()
            },
            Decision::Claim(10),
        ),
        (
            "results not yet due wait with the claim",
            State {
                pending: 1,
                first_pending: Some(now),
                ..low.clone()
            },
            wait(Some(now + 25 * MS)),
        ),
        (
            "a free slot is never kept waiting",
            State {
                running: 1,
                local: 0,
                held: 1,
                ..low.clone()
            },
            Decision::Claim(21),
        ),
        (
            "above the mark there is nothing to spread",
            State {
                local: 11,
                held: 13,
                ..low.clone()
            },
            wait(None),
        ),
    ]);
}

#[test]
fn the_spread_is_a_share_of_half_the_work_waiting_here() {
    let rules = Rules {
        slots: 1,
        ..rules()
    };
    let now = Instant::now();
    let state = |local: usize, task_ms: Option<f64>, spread: f64| State {
        local,
        task_ms,
        spread,
        ..busy(now)
    };
    assert_eq!(rules.spread(&state(4, Some(50.0), 1.0)), 100 * MS);
    assert_eq!(rules.spread(&state(4, Some(50.0), 0.5)), 50 * MS);
    assert_eq!(rules.spread(&state(4, Some(50.0), 0.0)), Duration::ZERO);
    assert_eq!(rules.spread(&state(0, Some(50.0), 1.0)), Duration::ZERO);
    assert_eq!(rules.spread(&state(4, None, 1.0)), Duration::ZERO);
    assert_eq!(
        rules.spread(&state(4, Some(50.0), 7.0)),
        100 * MS,
        "a share beyond 1 is 1"
    );
}
