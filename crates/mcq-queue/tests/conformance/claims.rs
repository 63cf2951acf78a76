//! Claiming: exclusivity under concurrency, what a claim sets, wake-ups.

use mcq_queue::Scope;
use std::collections::HashSet;
use std::time::{Duration, Instant};

use mcq_api_types::JobState;
use uuid::Uuid;

use mcq_kernel::CHUNK_PATHS;
use mcq_queue::{QueueConfig, Submission};

use crate::harness::{
    Db, batch, compute, job, keep_long_poll, keep_waiting_for_work, single, submit, worker,
};

pub(crate) async fn concurrent_claimers_each_task_claimed_once(db: &Db) {
    let setup = db.default_store().await;
    let submitted = submit(&setup, batch(300)).await;
    // Four claim loops, each with its own store (its own pool), as four
    // worker processes would.
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let store = db.default_store().await;
        loops.spawn(async move {
            let w = worker(&store).await;
            let mut mine = Vec::new();
            loop {
                let claimed = store.claim(w, 7).await.expect("claim");
                if claimed.is_empty() {
                    return mine;
                }
                let done = claimed.iter().map(compute).collect();
                assert!(store.complete(w, done).await.expect("complete").is_empty());
                mine.extend(claimed.into_iter().map(|t| t.task_id));
            }
        });
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    while let Some(ids) = loops.join_next().await {
        for id in ids.expect("claim loop") {
            total += 1;
            assert!(seen.insert(id), "task {id} claimed twice");
        }
    }
    assert_eq!(total, 300, "every task claimed exactly once");
    let view = setup
        .batch(submitted.batch_id.expect("batch"), Scope::All)
        .await
        .expect("read")
        .expect("batch");
    assert_eq!(view.counts.succeeded, 300);
    assert!(view.done);
    for id in &submitted.job_ids {
        let job = setup
            .job(*id, Scope::All)
            .await
            .expect("read")
            .expect("job");
        assert_eq!((job.state, job.attempts), (JobState::Succeeded, 1));
    }
}

pub(crate) async fn claim_sets_running_token_attempt_and_start(db: &Db) {
    let store = db.default_store().await;
    let ids = submit(&store, batch(3)).await.job_ids;
    let w = worker(&store).await;
    let claimed = store.claim(w, 2).await.expect("claim");
    assert_eq!(claimed.len(), 2, "at most max");
    assert_eq!(claimed[0].job_id, ids[0], "oldest first");
    assert_ne!(claimed[0].lease_token, claimed[1].lease_token);
    for task in &claimed {
        assert_eq!(task.attempt, 1);
        assert_eq!(task.chunks, Some(0..1));
        let job = store
            .job(task.job_id, Scope::All)
            .await
            .expect("read")
            .expect("job");
        assert_eq!((job.state, job.attempts), (JobState::Running, 1));
        assert!(
            job.timings.started_at.is_some()
                && job.timings.queue_wait_ms.is_some_and(|ms| ms >= 0.0)
        );
    }
    assert_eq!(store.claim(w, 0).await.expect("claim").len(), 0);
    assert_eq!(
        store.claim(w, 10).await.expect("claim").len(),
        1,
        "only the third is left"
    );
    assert!(store.claim(w, 10).await.expect("claim").is_empty());
}

/// What a claim of `max` tasks, `ahead` of them beyond the worker's free
/// slots, takes.
async fn claimed_ahead(store: &mcq_queue::Store, w: Uuid, max: u32, ahead: u32) -> usize {
    let reply = store
        .complete_and_claim_ahead(w, Vec::new(), max, ahead)
        .await
        .expect("claim");
    reply.claimed.expect("claim").len()
}

/// A claim ahead of the free slots takes the free slots' tasks, then at
/// most its share of the work left beyond them: with two workers, half of
/// it (rounded up). A claim without tasks ahead takes all it asks for.
/// Staged jobs (PostgreSQL) are work left as queued tasks are.
pub(crate) async fn claims_ahead_take_at_most_half_of_the_rest(db: &Db) {
    let store = db.default_store().await;
    submit(&store, batch(12)).await;
    let (w, w2) = (worker(&store).await, worker(&store).await);
    // A plain claim first: in the staged variant it writes the jobs out.
    assert_eq!(store.claim(w, 1).await.expect("claim").len(), 1);
    // 11 queued: 1 for the free slot, then half of the other 10.
    assert_eq!(claimed_ahead(&store, w, 9, 8).await, 1 + 5);
    // 5 queued: 1, then half of 4.
    assert_eq!(claimed_ahead(&store, w2, 9, 8).await, 1 + 2);
    // 2 queued: two free slots take both, nothing ahead is left.
    assert_eq!(claimed_ahead(&store, w2, 3, 1).await, 2);
    // 3 queued, or staged: no slot free, half, rounded up.
    submit(&store, batch(3)).await;
    assert_eq!(claimed_ahead(&store, w, 4, 4).await, 2);
    assert_eq!(store.claim(w, 10).await.expect("claim").len(), 1);
    assert!(store.claim(w, 10).await.expect("claim").is_empty());
}

/// The share of a claim ahead is the work left divided among the live
/// fleet's workers that do not drain, each counted in workers of the
/// claimant's size: a fleet of many workers near the end of its work
/// claims a few tasks each, not whole prefetch windows.
pub(crate) async fn claims_ahead_take_their_share_of_the_fleet(db: &Db) {
    let store = db.default_store().await;
    // Each PostgreSQL session reads the fleet at most once a second.
    let fleet_changed = || async {
        if !matches!(db, Db::Sqlite(_)) {
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
    };
    submit(&store, batch(21)).await;
    let mut fleet = Vec::new();
    for _ in 0..4 {
        fleet.push(worker(&store).await);
    }
    // 21 left (staged, in the staged variant): 1 for the free slot, then
    // a quarter of the other 20.
    assert_eq!(claimed_ahead(&store, fleet[0], 9, 8).await, 1 + 5);
    // 15 left: 1, then a quarter of 14, rounded up.
    assert_eq!(claimed_ahead(&store, fleet[1], 9, 8).await, 1 + 4);
    // A worker that left counts no more: 10 left, 1, then a third of 9.
    store.deregister(fleet[3]).await.expect("deregister");
    fleet_changed().await;
    assert_eq!(claimed_ahead(&store, fleet[2], 9, 8).await, 1 + 3);
    // Nor does one that drains: 6 left, 1, then half of 5, rounded up.
    let pulse = mcq_queue::WorkerPulse {
        draining: true,
        tasks_last_minute: 0,
        reaper_gap: None,
    };
    store
        .heartbeat_reporting(fleet[2], &[], pulse)
        .await
        .expect("heartbeat");
    fleet_changed().await;
    assert_eq!(claimed_ahead(&store, fleet[0], 9, 8).await, 1 + 3);
    // A worker of twice the others' slots counts them as half a worker
    // each: with it, two workers of four slots make a fleet of two of its
    // size. 2 left, no slot free: half.
    let big = store
        .register_worker(mcq_queue::WorkerInfo {
            hostname: "test-host".into(),
            pid: std::process::id(),
            concurrency: 8,
        })
        .await
        .expect("register");
    fleet_changed().await;
    assert_eq!(claimed_ahead(&store, big, 8, 8).await, 1);
    assert_eq!(store.claim(fleet[1], 10).await.expect("claim").len(), 1);
    assert!(store.claim(fleet[1], 10).await.expect("claim").is_empty());
}

pub(crate) async fn work_events_wake_on_submit(db: &Db) {
    let store = db.default_store().await;
    let mut events = store.work_events();
    let sqlite = matches!(db, Db::Sqlite(_));
    if !sqlite {
        // The LISTEN connection, once up, signals its subscribers in case
        // something came before it listened: let that signal pass.
        tokio::time::timeout(
            Duration::from_secs(30),
            events.wait(Duration::from_secs(60)),
        )
        .await
        .expect("the listener connects within 30 s");
    }
    // SQLite signals only the workers of the same process (same store);
    // PostgreSQL those of every process.
    let other = if sqlite {
        store.clone()
    } else {
        db.default_store().await
    };
    submit(&other, single(1)).await;
    tokio::time::timeout(
        Duration::from_secs(30),
        events.wait(Duration::from_secs(60)),
    )
    .await
    .expect("woken long before the 60 s timeout");
    // The signal counted once: with no more work, the timeout bounds the wait.
    let started = Instant::now();
    events.wait(Duration::from_millis(50)).await;
    assert!(started.elapsed() >= Duration::from_millis(50));
}

/// A signal sent while no worker waits (each between an empty claim and
/// its next wait) ends the next wait of every worker, not of one only.
pub(crate) async fn a_signal_sent_between_waits_reaches_every_worker(db: &Db) {
    let store = db.default_store().await;
    let (mut first, mut second) = (store.work_events(), store.work_events());
    if !matches!(db, Db::Sqlite(_)) {
        // Let the listener's connection signal pass, for both.
        for events in [&mut first, &mut second] {
            tokio::time::timeout(
                Duration::from_secs(30),
                events.wait(Duration::from_secs(60)),
            )
            .await
            .expect("the listener connects within 30 s");
        }
    }
    let w = worker(&store).await;
    assert!(store.claim(w, 1).await.expect("claim").is_empty());
    submit(&store, single(1)).await;
    for events in [&mut first, &mut second] {
        tokio::time::timeout(
            Duration::from_secs(30),
            events.wait(Duration::from_secs(60)),
        )
        .await
        .expect("a submission made while nobody waited ends each next wait");
    }
    assert_eq!(store.claim(w, 1).await.expect("claim").len(), 1);
}

/// Completing jobs announces their batch, with how many finished, to
/// subscribers of finished work (what long polls wait on).
pub(crate) async fn finishing_a_job_announces_its_batch(db: &Db) {
    let store = db.default_store().await;
    let mut events = store.finished_events();
    let mut second = store.finished_events();
    let _listening = keep_long_poll(&store);
    if matches!(db, Db::Postgres(_) | Db::PostgresStaged(_)) {
        // The LISTEN connection opens in the background and says so with
        // a wake-up for everyone; wait for it so nothing below is missed.
        for events in [&mut events, &mut second] {
            events
                .wait_for(Uuid::now_v7(), 1, Duration::from_secs(10))
                .await;
        }
    }
    let submitted = submit(&store, batch(2)).await;
    let batch_id = submitted.batch_id.expect("a batch");
    let w = worker(&store).await;
    let claimed = store.claim(w, 2).await.expect("claim");
    assert_eq!(claimed.len(), 2);
    let refused = store
        .complete(w, claimed.iter().map(compute).collect())
        .await
        .expect("complete");
    assert!(refused.is_empty());
    assert!(
        events.wait_for(batch_id, 2, Duration::from_secs(10)).await,
        "no announcement of the batch's two finished jobs"
    );
    assert!(
        !second
            .wait_for(batch_id, 3, Duration::from_millis(500))
            .await,
        "two finished jobs were announced as more"
    );
}

/// A worker's idle announcement reaches every subscriber (on PostgreSQL in
/// any process, through the work channel) and wakes no worker waiting for
/// work: it announces none. (On PostgreSQL it goes out while other workers
/// hold two running tasks, work one of them could hand over: a third
/// worker holds two here.)
pub(crate) async fn idle_announcements_reach_subscribers_and_wake_no_one(db: &Db) {
    let store = db.default_store().await;
    // On SQLite announcements stay in the process, as work wake-ups do.
    let other = match db {
        Db::Sqlite(_) => store.clone(),
        _ => db.default_store().await,
    };
    let mut idle = store.idle_workers();
    let mut also = store.idle_workers();
    // On PostgreSQL a store listens only while one of its workers waits
    // for work (a busy one asks its heartbeat instead): keep one waiting.
    let _listening = keep_waiting_for_work(&store);
    let (idle_worker, busy_worker) = (worker(&other).await, worker(&store).await);
    submit(&store, batch(2)).await;
    let holder = worker(&store).await;
    assert_eq!(store.claim(holder, 2).await.expect("claim").len(), 2);
    // The LISTEN connection opens in the background: announce until heard.
    let heard = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            other.announce_idle(idle_worker).await.expect("announce");
            if let Ok(who) = tokio::time::timeout(Duration::from_millis(100), idle.next()).await {
                return who;
            }
        }
    })
    .await
    .expect("an idle announcement reaches a subscriber within 20 s");
    assert_eq!(heard, idle_worker);
    // The second subscriber hears the same, and the next one in order.
    store.announce_idle(busy_worker).await.expect("announce");
    let mut seen = Vec::new();
    while seen.last() != Some(&busy_worker) {
        let who = tokio::time::timeout(Duration::from_secs(10), also.next())
            .await
            .expect("every subscriber hears every announcement");
        seen.push(who);
    }
    assert!(
        seen.iter().all(|w| [idle_worker, busy_worker].contains(w)),
        "{seen:?}"
    );
    // A wait for work ends at its timeout however many workers go idle
    // meanwhile. (The listener is up: it signalled before the first
    // announcement was heard, so before this subscription.)
    let mut events = store.work_events();
    let wait = tokio::spawn(async move { events.wait(Duration::from_secs(60)).await });
    idle.skip_pending();
    if !matches!(db, Db::Sqlite(_)) {
        // Anyone who can connect can NOTIFY: an announcement that names no
        // worker is dropped, neither passed on nor waking anyone.
        let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
        for payload in ["idle:not-a-uuid", "idle:", "idle:00000000-0000"] {
            sqlx::query("SELECT pg_notify('mcq_work', $1)")
                .bind(payload)
                .execute(&pool)
                .await
                .expect("notify");
        }
        pool.close().await;
    }
    for _ in 0..5 {
        other.announce_idle(idle_worker).await.expect("announce");
        // Earlier announcements may still be on their way.
        loop {
            let who = tokio::time::timeout(Duration::from_secs(10), idle.next())
                .await
                .expect("announced after the listener was up: heard");
            if who == idle_worker {
                break;
            }
            assert_eq!(who, busy_worker);
        }
    }
    assert!(
        !wait.is_finished(),
        "an idle announcement, or one naming no worker, woke a worker waiting for work"
    );
    wait.abort();
}

/// Each finished job is announced once, whichever call finishes it: a
/// split job whose partials arrive in two calls (its merged result then
/// going with a claim), and whole jobs completed with a claim. Waiters
/// count announcements, so a job announced twice would end a long poll
/// on its batch before the batch is done.
pub(crate) async fn every_finished_job_is_announced_once(db: &Db) {
    let store = db
        .store(QueueConfig {
            chunks_per_task: 1,
            ..QueueConfig::default()
        })
        .await;
    let mut events = store.finished_events();
    let mut counter = store.finished_events();
    let _listening = keep_long_poll(&store);
    if matches!(db, Db::Postgres(_) | Db::PostgresStaged(_)) {
        for events in [&mut events, &mut counter] {
            events
                .wait_for(Uuid::now_v7(), 1, Duration::from_secs(10))
                .await;
        }
    }
    let submission = Submission {
        jobs: vec![job(3 * CHUNK_PATHS, 7), job(1000, 8), job(1000, 9)],
        ..batch(0)
    };
    let batch_id = submit(&store, submission).await.batch_id.expect("a batch");
    let w = worker(&store).await;
    let split = store.claim(w, 2).await.expect("claim");
    assert_eq!(split.len(), 2, "two of the split job's three tasks");
    let refused = store
        .complete(w, split.iter().map(compute).collect())
        .await
        .expect("complete");
    assert!(refused.is_empty());
    let last = store.claim(w, 1).await.expect("claim");
    let reply = store
        .complete_and_claim(w, last.iter().map(compute).collect(), 10)
        .await
        .expect("complete and claim");
    assert!(reply.refused.is_empty());
    let whole = reply.claimed.expect("the claim ran");
    assert_eq!(whole.len(), 2, "the two whole jobs: {whole:?}");
    let reply = store
        .complete_and_claim(w, whole.iter().map(compute).collect(), 10)
        .await
        .expect("complete and claim");
    assert!(reply.refused.is_empty());
    assert!(
        events.wait_for(batch_id, 3, Duration::from_secs(10)).await,
        "the batch's three finished jobs were not all announced"
    );
    assert!(
        !counter
            .wait_for(batch_id, 4, Duration::from_millis(500))
            .await,
        "three finished jobs were announced as more"
    );
}

/// Every claimed task names its job's batch, through a claim alone and a
/// claim that carries completions; a job submitted alone names none.
pub(crate) async fn a_claim_names_each_tasks_batch(db: &Db) {
    let store = db.default_store().await;
    let batch_id = submit(&store, batch(3)).await.batch_id.expect("a batch");
    let alone = submit(&store, single(9)).await.job_ids[0];
    let w = worker(&store).await;
    let first = store.claim(w, 1).await.expect("claim");
    let done = first.iter().map(compute).collect();
    let reply = store
        .complete_and_claim(w, done, 10)
        .await
        .expect("complete and claim");
    assert!(reply.refused.is_empty());
    let rest = reply.claimed.expect("the claim ran");
    let all: Vec<_> = first.iter().chain(&rest).collect();
    assert_eq!(all.len(), 4, "{all:?}");
    for task in all {
        let expected = (task.job_id != alone).then_some(batch_id);
        assert_eq!(task.batch_id, expected, "task {}", task.task_id);
    }
}

/// Claims of one task each, all at once, on a batch large enough to be
/// staged on PostgreSQL: each takes a task, or reports that the work it
/// passed over was held by another claim. None comes back empty as if the
/// queue were, which would send its worker to wait for the poll while
/// thousands of jobs wait. On SQLite claims take turns and each takes one.
pub(crate) async fn small_claims_at_once_take_a_task_or_report_the_work_held(db: &Db) {
    const CLAIMS: usize = 16;
    let setup = db.default_store().await;
    let submitted = submit(&setup, batch(2000)).await;
    let w = worker(&setup).await;
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(CLAIMS));
    let mut claims = tokio::task::JoinSet::new();
    for _ in 0..CLAIMS {
        // A store each, as separate worker processes would claim.
        let store = db.default_store().await;
        let start = start.clone();
        claims.spawn(async move {
            start.wait().await;
            let reply = store
                .complete_and_claim(w, Vec::new(), 1)
                .await
                .expect("claim");
            (reply.claimed.expect("the claim ran"), reply.contended)
        });
    }
    let mut taken = HashSet::new();
    let mut contended = 0_u64;
    while let Some(answer) = claims.join_next().await {
        let (tasks, held) = answer.expect("claim task");
        match tasks.as_slice() {
            [task] => assert!(taken.insert(task.task_id), "a task claimed twice"),
            [] => {
                assert!(held, "an empty claim with 1,984 jobs or more waiting");
                contended += 1;
            }
            more => panic!("a claim of one took {}", more.len()),
        }
    }
    if let Db::Sqlite(_) = db {
        assert_eq!(contended, 0, "SQLite's claims take turns");
    }
    let first = taken.len() as u64;
    assert_eq!(first + contended, CLAIMS as u64);
    let rest = crate::harness::drain(&setup, w).await;
    for task in &rest {
        assert!(
            taken.insert(task.task_id),
            "task {} claimed twice",
            task.task_id
        );
    }
    assert_eq!(taken.len(), 2000, "every job claimed once");
    let view = setup
        .batch(submitted.batch_id.expect("batch"), Scope::All)
        .await
        .expect("read")
        .expect("batch");
    let counts = (
        view.counts.queued,
        view.counts.running,
        view.counts.succeeded,
    );
    assert_eq!(counts, (0, first, 2000 - first));
}
