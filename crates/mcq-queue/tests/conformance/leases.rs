//! Leases: expiry and rescue, renewal by heartbeat, fencing, hand-back.

use mcq_queue::Scope;
use std::time::Duration;

use mcq_api_types::JobState;
use mcq_queue::{QueueConfig, Reaped, TaskOutput, WorkerPulse};

use crate::harness::{Db, batch, compute, done_by, quick, single, submit, whole, worker};

pub(crate) async fn expired_lease_is_requeued_and_claimed_again(db: &Db) {
    let store = db.store(quick(300)).await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let (a, b) = (worker(&store).await, worker(&store).await);
    let first = store
        .claim(a, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    assert!(
        store.claim(b, 1).await.expect("claim").is_empty(),
        "leased tasks are not claimable"
    );
    // Worker a goes silent; its lease runs out.
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        store.claim(b, 1).await.expect("claim").is_empty(),
        "claims take queued tasks only; the reaper requeues expired ones"
    );
    assert_eq!(
        store.reap().await.expect("reap"),
        Reaped {
            requeued: 1,
            failed: 0
        }
    );
    let rescued = store
        .claim(b, 1)
        .await
        .expect("claim")
        .pop()
        .expect("rescued");
    assert_eq!(rescued.task_id, first.task_id);
    assert_eq!(rescued.attempt, 2);
    assert_ne!(
        rescued.lease_token, first.lease_token,
        "a new token on every claim"
    );
    assert!(
        store
            .complete(b, vec![compute(&rescued)])
            .await
            .expect("complete")
            .is_empty()
    );
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!((job.state, job.attempts), (JobState::Succeeded, 2));
}

pub(crate) async fn heartbeat_keeps_lease_alive(db: &Db) {
    let store = db.store(quick(400)).await;
    submit(&store, single(1)).await;
    let (a, b) = (worker(&store).await, worker(&store).await);
    let task = store
        .claim(a, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    for _ in 0..8 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let held = [(task.task_id, task.lease_token)];
        assert!(
            store
                .heartbeat(a, &held)
                .await
                .expect("heartbeat")
                .is_clear()
        );
        assert_eq!(
            store.reap().await.expect("reap"),
            Reaped::default(),
            "a renewed lease is not requeued"
        );
        assert!(store.claim(b, 1).await.expect("claim").is_empty());
    }
    assert!(
        store
            .complete(a, vec![compute(&task)])
            .await
            .expect("complete")
            .is_empty()
    );
}

pub(crate) async fn late_completion_fail_and_release_are_refused(db: &Db) {
    let store = db.store(quick(200)).await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let (late, rescuer) = (worker(&store).await, worker(&store).await);
    let stale = store
        .claim(late, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.reap().await.expect("reap").requeued, 1);
    let fresh = store
        .claim(rescuer, 1)
        .await
        .expect("claim")
        .pop()
        .expect("rescued");
    let before = store.refused_count();

    // The late worker wakes up: everything it says is refused.
    let refused = store
        .complete(late, vec![compute(&stale)])
        .await
        .expect("complete");
    assert_eq!(refused, vec![stale.task_id]);
    assert!(
        !store
            .fail(late, stale.task_id, stale.lease_token, "late")
            .await
            .expect("fail")
    );
    store
        .release(late, &[(stale.task_id, stale.lease_token)])
        .await
        .expect("release");
    assert_eq!(store.refused_count() - before, 3, "refusals are counted");
    assert_eq!(
        store
            .job(id, Scope::All)
            .await
            .expect("read")
            .expect("job")
            .state,
        JobState::Running
    );

    // The rescuer still holds the lease and finishes the job, once.
    assert!(
        store
            .complete(rescuer, vec![compute(&fresh)])
            .await
            .expect("complete")
            .is_empty()
    );
    assert_eq!(
        store
            .complete(rescuer, vec![compute(&fresh)])
            .await
            .expect("complete"),
        vec![fresh.task_id]
    );
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Succeeded);
    assert!(job.result.is_some());
}

pub(crate) async fn release_hands_back_without_spending_an_attempt(db: &Db) {
    let store = db.default_store().await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let w = worker(&store).await;
    let task = store
        .claim(w, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    store
        .release(w, &[(task.task_id, task.lease_token)])
        .await
        .expect("release");
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(
        (job.state, job.attempts),
        (JobState::Queued, 0),
        "back in the queue, attempt refunded"
    );
    let again = store
        .claim(w, 1)
        .await
        .expect("claim")
        .pop()
        .expect("claimable again at once");
    assert_eq!((again.task_id, again.attempt), (task.task_id, 1));
    assert!(
        store
            .complete(w, vec![compute(&task)])
            .await
            .expect("complete")
            == vec![task.task_id],
        "old token refused"
    );
    assert!(
        store
            .complete(w, vec![compute(&again)])
            .await
            .expect("complete")
            .is_empty()
    );
}

pub(crate) async fn heartbeat_renews_only_presented_leases(db: &Db) {
    let store = db.store(quick(300)).await;
    submit(&store, batch(2)).await;
    let (a, b) = (worker(&store).await, worker(&store).await);
    let claimed = store.claim(a, 2).await.expect("claim");
    let (kept, forgotten) = (&claimed[0], &claimed[1]);
    // Worker a never saw `forgotten` (say the claim's answer was lost), so
    // it presents only `kept`: the other lease must run out.
    let held = [(kept.task_id, kept.lease_token)];
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            store
                .heartbeat(a, &held)
                .await
                .expect("heartbeat")
                .is_clear()
        );
    }
    assert_eq!(store.reap().await.expect("reap").requeued, 1);
    let rescued = store.claim(b, 2).await.expect("claim");
    assert_eq!(
        rescued.iter().map(|t| t.task_id).collect::<Vec<_>>(),
        vec![forgotten.task_id],
        "only the unpresented lease expired"
    );
    // Had worker a known it, its heartbeat now reports the task as lost.
    let reply = store
        .heartbeat(a, &[(forgotten.task_id, forgotten.lease_token)])
        .await
        .expect("heartbeat");
    assert_eq!(reply.lost, vec![forgotten.task_id]);
    assert!(reply.cancelled.is_empty());
    // Completed tasks are no longer held either.
    assert!(
        store
            .complete(a, vec![compute(kept)])
            .await
            .expect("complete")
            .is_empty()
    );
    assert_eq!(
        store.heartbeat(a, &held).await.expect("heartbeat").lost,
        vec![kept.task_id]
    );
}

pub(crate) async fn heartbeat_pairs_each_token_with_its_task(db: &Db) {
    let store = db.store(quick(300)).await;
    submit(&store, batch(2)).await;
    let a = worker(&store).await;
    let claimed = store.claim(a, 2).await.expect("claim");
    let (first, second) = (&claimed[0], &claimed[1]);
    // Both tokens are live, but each is presented with the other task: a
    // lease is the pair, so neither task is held as presented.
    let swapped = [
        (first.task_id, second.lease_token),
        (second.task_id, first.lease_token),
    ];
    let reply = store.heartbeat(a, &swapped).await.expect("heartbeat");
    let mut both = vec![first.task_id, second.task_id];
    both.sort_unstable();
    assert_eq!(reply.lost, both);
    assert!(reply.cancelled.is_empty());
    // Presented properly, both are held (renewal: `heartbeat_keeps_lease_alive`).
    let paired = [
        (first.task_id, first.lease_token),
        (second.task_id, second.lease_token),
    ];
    assert!(
        store
            .heartbeat(a, &paired)
            .await
            .expect("heartbeat")
            .is_clear()
    );
}

pub(crate) async fn lease_expiring_on_last_attempt_fails_the_job(db: &Db) {
    let config = QueueConfig {
        max_attempts: 2,
        // Long enough that a busy machine's claim-then-reap never outlasts
        // it (the lease must still be alive right after the claim).
        ..quick(2_000)
    };
    let store = db.store(config).await;
    let id = submit(&store, single(1)).await.job_ids[0];
    let w = worker(&store).await;
    for attempt in 1..=2 {
        if attempt > 1 {
            assert_eq!(
                store.reap().await.expect("reap"),
                Reaped {
                    requeued: 1,
                    failed: 0
                },
                "an expired lease with attempts left goes back to the queue"
            );
        }
        let task = store
            .claim(w, 1)
            .await
            .expect("claim")
            .pop()
            .expect("a task with attempts left is claimable");
        assert_eq!(task.attempt, attempt);
        assert_eq!(
            store.reap().await.expect("reap"),
            Reaped::default(),
            "the lease is alive"
        );
        // The worker dies with the task (a poison task would kill every one).
        tokio::time::sleep(Duration::from_millis(2_300)).await;
    }
    assert_eq!(
        store.reap().await.expect("reap"),
        Reaped {
            requeued: 0,
            failed: 1
        }
    );
    assert!(
        store.claim(w, 1).await.expect("claim").is_empty(),
        "no rescue beyond max_attempts"
    );
    assert_eq!(
        store.reap().await.expect("reap"),
        Reaped::default(),
        "reaped once"
    );
    let job = store.job(id, Scope::All).await.expect("read").expect("job");
    assert_eq!(job.state, JobState::Failed);
    let error = job.error.expect("an error");
    assert!(
        error.contains("lease expired on attempt 2 of 2"),
        "error says what happened: {error}"
    );
    assert!(job.timings.finished_at.is_some() && job.result.is_none());
}

/// One completion call that mixes live leases and stale tokens, presented
/// out of id order: exactly the live ones count, each job once, and the
/// refused ones come back in the order they were presented.
pub(crate) async fn mixed_completion_records_only_live_leases(db: &Db) {
    let store = db.default_store().await;
    let ids = submit(&store, batch(4)).await.job_ids;
    let me = worker(&store).await;
    let mut claimed = store.claim(me, 4).await.expect("claim");
    assert_eq!(claimed.len(), 4);
    claimed.reverse();
    let mut done: Vec<_> = claimed.iter().map(compute).collect();
    // Two of the four present a token that was never theirs.
    done[0].lease_token = uuid::Uuid::new_v4();
    done[2].lease_token = uuid::Uuid::new_v4();

    let refused = store.complete(me, done).await.expect("complete");
    assert_eq!(refused, vec![claimed[0].task_id, claimed[2].task_id]);
    for (task, live) in claimed.iter().zip([false, true, false, true]) {
        let job = store
            .job(task.job_id, Scope::All)
            .await
            .expect("read")
            .expect("job");
        if live {
            assert_eq!(job.state, JobState::Succeeded);
            assert!(job.result.is_some(), "a recorded job carries its result");
        } else {
            assert_eq!(
                job.state,
                JobState::Running,
                "a refused task changes nothing"
            );
            assert!(job.result.is_none());
        }
    }

    // The refused tasks still run under their real tokens.
    let rest = vec![compute(&claimed[0]), compute(&claimed[2])];
    assert!(store.complete(me, rest).await.expect("complete").is_empty());
    for id in ids {
        let job = store.job(id, Scope::All).await.expect("read").expect("job");
        assert_eq!(job.state, JobState::Succeeded);
    }
    assert_eq!(done_by(&store, me).await, (4, 4));
}

/// A completion sent along with a claim is fenced and recorded exactly as
/// on its own, and the claim takes only queued tasks.
pub(crate) async fn completion_sent_with_a_claim_is_fenced_and_recorded(db: &Db) {
    let store = db.default_store().await;
    let ids = submit(&store, batch(5)).await.job_ids;
    let me = worker(&store).await;
    let first = store.claim(me, 2).await.expect("claim");
    assert_eq!(first.len(), 2);
    let mut done: Vec<_> = first.iter().map(whole).collect();
    let expected_price = match &done[1].output {
        TaskOutput::Result(result) => result.price,
        TaskOutput::Partial(_) => unreachable!("`whole` returns results"),
    };
    // The first presents a token that was never its own.
    done[0].lease_token = uuid::Uuid::new_v4();

    let reply = store
        .complete_and_claim(me, done, 2)
        .await
        .expect("complete and claim");
    assert_eq!(
        reply.refused,
        vec![first[0].task_id],
        "fenced as on its own"
    );
    let second = reply.claimed.expect("the claim ran");
    assert_eq!(second.len(), 2, "two of the three queued tasks");
    for task in &second {
        assert!(
            first.iter().all(|f| f.task_id != task.task_id),
            "a running task was claimed again"
        );
        assert_eq!(task.attempt, 1);
    }
    let recorded = store
        .job(first[1].job_id, Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert_eq!(recorded.state, JobState::Succeeded);
    let price = recorded
        .result
        .expect("a recorded job carries its result")
        .price;
    assert_eq!(
        price.to_bits(),
        expected_price.to_bits(),
        "the computed price, bit for bit"
    );
    let refused = store
        .job(first[0].job_id, Scope::All)
        .await
        .expect("read")
        .expect("job");
    assert_eq!(
        refused.state,
        JobState::Running,
        "a refused task changes nothing"
    );
    for task in &second {
        let job = store
            .job(task.job_id, Scope::All)
            .await
            .expect("read")
            .expect("job");
        assert_eq!(job.state, JobState::Running, "claimed jobs start");
    }

    // The rest, with the last claim of the queue: one task left to take.
    let rest: Vec<_> = [&first[0]].into_iter().chain(&second).map(whole).collect();
    let reply = store
        .complete_and_claim(me, rest, 5)
        .await
        .expect("complete and claim");
    assert!(reply.refused.is_empty());
    let last = reply.claimed.expect("the claim ran");
    assert_eq!(last.len(), 1);
    let reply = store
        .complete_and_claim(me, vec![whole(&last[0])], 5)
        .await
        .expect("complete and claim");
    assert!(reply.refused.is_empty());
    assert!(
        reply.claimed.expect("the claim ran").is_empty(),
        "queue drained"
    );
    for id in ids {
        let job = store.job(id, Scope::All).await.expect("read").expect("job");
        assert_eq!(job.state, JobState::Succeeded);
    }
    assert_eq!(done_by(&store, me).await, (5, 5));
}

/// The fleet takes turns to reap: an offer within the gap of the last reap
/// scans nothing, even with a lease expired; past it, the offer reaps.
pub(crate) async fn workers_take_turns_to_reap(db: &Db) {
    let store = db.store(quick(200)).await;
    let hour = Duration::from_secs(3600);
    // The first offer ever takes the turn; another within the hour does not.
    assert_eq!(
        store.reap_in_turn(hour).await.expect("reap"),
        Some(Reaped::default())
    );
    assert_eq!(store.reap_in_turn(hour).await.expect("reap"), None);
    submit(&store, single(1)).await;
    let (a, b) = (worker(&store).await, worker(&store).await);
    store
        .claim(a, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        store.reap_in_turn(hour).await.expect("reap"),
        None,
        "not this offer's turn"
    );
    assert!(
        store.claim(b, 1).await.expect("claim").is_empty(),
        "the expired lease was left alone"
    );
    assert_eq!(
        store.reap_in_turn(Duration::ZERO).await.expect("reap"),
        Some(Reaped {
            requeued: 1,
            failed: 0
        })
    );
    assert_eq!(store.claim(b, 1).await.expect("claim").len(), 1);
}

/// A heartbeat that offers (`WorkerPulse::reaper_gap`) takes the fleet's
/// reaper turn by the same rule as `reap_in_turn`, in its own round trip,
/// and a turn taken either way counts for the other.
pub(crate) async fn a_heartbeat_offers_to_take_the_reaper_turn(db: &Db) {
    let store = db.default_store().await;
    let w = worker(&store).await;
    let hour = Duration::from_secs(3600);
    let offering = |gap| WorkerPulse {
        draining: false,
        tasks_last_minute: 0,
        reaper_gap: gap,
    };
    let turn = |gap| {
        let store = store.clone();
        async move {
            store
                .heartbeat_reporting(w, &[], offering(gap))
                .await
                .expect("heartbeat")
                .reaper_turn
        }
    };
    assert!(!turn(None).await, "no offer, no turn");
    assert!(
        turn(Some(hour)).await,
        "the first offer ever takes the turn"
    );
    assert!(!turn(Some(hour)).await, "taken within the hour");
    assert_eq!(
        store.reap_in_turn(hour).await.expect("reap"),
        None,
        "the heartbeat's turn counts for every offer"
    );
    assert!(turn(Some(Duration::ZERO)).await, "past the gap");
    assert!(
        store
            .reap_in_turn(Duration::ZERO)
            .await
            .expect("reap")
            .is_some()
    );
    assert!(!turn(Some(hour)).await, "a reap_in_turn counts too");
}

/// PostgreSQL: a reaper pass that finds no expired lease, a refused
/// failure and the cancellation of an unknown batch end their
/// transactions before they return. A store keeps the connection of its
/// last call for its next one, so a transaction left to be rolled back
/// on the next use sat idle in the database until then, where an
/// `idle_in_transaction_session_timeout` would end the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_change_nothing_leave_no_transaction_open() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let store = db.default_store().await;
    submit(&store, single(1)).await;
    let me = worker(&store).await;
    let task = store
        .claim(me, 1)
        .await
        .expect("claim")
        .pop()
        .expect("a task");
    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    let open = || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
        )
        .fetch_one(&pool)
        .await
        .expect("read pg_stat_activity")
    };
    assert_eq!(store.reap().await.expect("reap"), Reaped::default());
    assert_eq!(open().await, 0, "after a reaper pass that found nothing");
    let refused = store
        .fail(me, task.task_id, uuid::Uuid::new_v4(), "not this lease")
        .await
        .expect("fail");
    assert!(!refused, "another lease's token is refused");
    assert_eq!(open().await, 0, "after a refused failure");
    let unknown = store
        .cancel_batch(uuid::Uuid::new_v4(), mcq_queue::Scope::All)
        .await
        .expect("cancel");
    assert_eq!(unknown, None);
    assert_eq!(open().await, 0, "after cancelling an unknown batch");
}
