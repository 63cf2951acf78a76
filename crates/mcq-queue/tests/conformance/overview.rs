//! The operators' reads: batches newest first, the queue's depth, workers
//! with their state.

use std::time::{Duration, Instant};

use mcq_api_types::WorkerState;
use mcq_queue::{BatchQuery, QueueConfig, Submission, WorkerPulse};

use crate::harness::{Db, batch, compute, quick, single, submit, worker};

/// A batch of `n` small jobs with this label.
fn labelled(n: u64, label: &str) -> Submission {
    Submission {
        label: Some(label.into()),
        ..batch(n)
    }
}

fn query(limit: u32) -> BatchQuery {
    BatchQuery {
        limit,
        ..BatchQuery::default()
    }
}

pub(crate) async fn batches_are_listed_newest_first_filtered_and_paged(db: &Db) {
    let store = db.default_store().await;
    let mut ids = Vec::new();
    for label in ["alpha one", "beta", "alpha two", "gamma", "alpha three"] {
        ids.push(submit(&store, labelled(2, label)).await.batch_id.unwrap());
    }
    // A job without a batch is never listed.
    submit(&store, single(99)).await;
    let newest_first: Vec<_> = ids.iter().rev().copied().collect();

    let all = store
        .batches(query(100), mcq_queue::Scope::All)
        .await
        .expect("list");
    assert_eq!(all.iter().map(|b| b.id).collect::<Vec<_>>(), newest_first);
    assert_eq!(all[0].label.as_deref(), Some("alpha three"));
    assert_eq!(all[0].total, 2);

    // Pages of two follow each other through the cursor.
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .batches(BatchQuery { after, ..query(2) }, mcq_queue::Scope::All)
            .await
            .expect("page");
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = Some(last.id);
        paged.extend(page.iter().map(|b| b.id));
    }
    assert_eq!(paged, newest_first);

    let alphas = store
        .batches(
            BatchQuery {
                label: Some("alpha".into()),
                ..query(100)
            },
            mcq_queue::Scope::All,
        )
        .await
        .expect("by label");
    assert_eq!(
        alphas.iter().map(|b| b.id).collect::<Vec<_>>(),
        [ids[4], ids[2], ids[0]]
    );
    assert!(
        store
            .batches(
                BatchQuery {
                    label: Some("Alpha".into()),
                    ..query(100)
                },
                mcq_queue::Scope::All
            )
            .await
            .expect("by label")
            .is_empty(),
        "the label filter is case-sensitive"
    );

    // Finish the jobs of "beta" (the second batch, so the oldest job
    // claims come from the first): claim everything, complete only its jobs.
    let w = worker(&store).await;
    let beta_jobs = store
        .batch_jobs(ids[1], mcq_queue::Scope::All, None, 10)
        .await
        .expect("jobs")
        .expect("batch");
    // A claim takes staged jobs from one staged row at a time: claim until none are left.
    let mut claimed = Vec::new();
    loop {
        let more = store.claim(w, 100).await.expect("claim");
        if more.is_empty() {
            break;
        }
        claimed.extend(more);
    }
    let beta: Vec<_> = claimed
        .iter()
        .filter(|t| beta_jobs.iter().any(|j| j.id == t.job_id))
        .map(compute)
        .collect();
    assert_eq!(beta.len(), 2);
    assert!(store.complete(w, beta).await.expect("complete").is_empty());
    let done = store
        .batches(
            BatchQuery {
                done: Some(true),
                ..query(100)
            },
            mcq_queue::Scope::All,
        )
        .await
        .expect("done");
    assert_eq!(done.iter().map(|b| b.id).collect::<Vec<_>>(), [ids[1]]);
    assert!(done[0].done && done[0].counts.succeeded == 2);
    let active = store
        .batches(
            BatchQuery {
                done: Some(false),
                ..query(2)
            },
            mcq_queue::Scope::All,
        )
        .await
        .expect("active");
    assert_eq!(
        active.iter().map(|b| b.id).collect::<Vec<_>>(),
        [ids[4], ids[3]]
    );
    let older_active = store
        .batches(
            BatchQuery {
                done: Some(false),
                after: Some(ids[3]),
                ..query(100)
            },
            mcq_queue::Scope::All,
        )
        .await
        .expect("active, older");
    assert_eq!(
        older_active.iter().map(|b| b.id).collect::<Vec<_>>(),
        [ids[2], ids[0]],
        "the state filter skips the done batch between them"
    );
}

pub(crate) async fn queue_depth_counts_unfinished_tasks_by_state(db: &Db) {
    // Failed attempts wait an hour: they stay `scheduled` however slow the test.
    let store = db
        .store(QueueConfig {
            retry_backoff: Duration::from_secs(3600),
            ..QueueConfig::default()
        })
        .await;
    let empty = store.queue().await.expect("queue");
    assert_eq!(
        (
            empty.depth.queued,
            empty.depth.scheduled,
            empty.depth.running
        ),
        (0, 0, 0)
    );
    assert!(empty.oldest_queued_at.is_none() && empty.oldest_queued_age_ms.is_none());
    assert_eq!(empty.workers.active, 0);

    let submitted = submit(&store, batch(6)).await;
    let view = store.queue().await.expect("queue");
    assert_eq!(view.depth.queued, 6);
    let oldest = view.oldest_queued_at.expect("something waits");
    assert!(oldest <= view.read_at);
    assert!(view.oldest_queued_age_ms.expect("age") >= 0.0);

    let w = worker(&store).await;
    let claimed = store.claim(w, 3).await.expect("claim");
    assert!(
        store
            .fail(w, claimed[0].task_id, claimed[0].lease_token, "once")
            .await
            .expect("fail")
    );
    assert!(
        store
            .complete(w, vec![compute(&claimed[1])])
            .await
            .expect("complete")
            .is_empty()
    );
    let view = store.queue().await.expect("queue");
    assert_eq!(
        (view.depth.queued, view.depth.scheduled, view.depth.running),
        (3, 1, 1),
        "{view:?}"
    );
    assert_eq!(
        (
            view.workers.active,
            view.workers.draining,
            view.workers.lost
        ),
        (1, 0, 0)
    );
    // The oldest due task is still one of the batch's, never a later one.
    assert!(view.oldest_queued_at.expect("waiting") >= oldest);
    store
        .cancel_batch(submitted.batch_id.unwrap(), mcq_queue::Scope::All)
        .await
        .expect("cancel");
    let view = store.queue().await.expect("queue");
    assert_eq!(
        (view.depth.queued, view.depth.scheduled, view.depth.running),
        (0, 0, 0),
        "cancelled tasks are no longer waiting or running: {view:?}"
    );
    assert!(view.oldest_queued_at.is_none());
}

pub(crate) async fn workers_show_state_held_tasks_and_throughput(db: &Db) {
    let store = db.default_store().await;
    submit(&store, batch(4)).await;
    let w = worker(&store).await;
    let claimed = store.claim(w, 3).await.expect("claim");
    let find = |list: Vec<mcq_api_types::WorkerView>| list.into_iter().find(|v| v.id == w);
    let me = find(store.workers().await.expect("workers")).expect("listed");
    assert_eq!(me.state, WorkerState::Active);
    assert_eq!((me.tasks_held, me.tasks_last_minute), (3, 0));

    assert!(
        store
            .complete(w, vec![compute(&claimed[0])])
            .await
            .expect("complete")
            .is_empty()
    );
    let pulse = WorkerPulse {
        draining: true,
        tasks_last_minute: 7,
        reaper_gap: None,
    };
    let held: Vec<_> = claimed[1..]
        .iter()
        .map(|t| (t.task_id, t.lease_token))
        .collect();
    assert!(
        store
            .heartbeat_reporting(w, &held, pulse)
            .await
            .expect("heartbeat")
            .is_clear()
    );
    let me = find(store.workers().await.expect("workers")).expect("listed");
    assert_eq!(me.state, WorkerState::Draining);
    assert_eq!((me.tasks_held, me.tasks_last_minute), (2, 7));
    // A heartbeat that tells nothing leaves what was told.
    store.heartbeat(w, &held).await.expect("heartbeat");
    let me = find(store.workers().await.expect("workers")).expect("listed");
    assert_eq!((me.state, me.tasks_last_minute), (WorkerState::Draining, 7));
    assert_eq!(store.queue().await.expect("queue").workers.draining, 1);
}

pub(crate) async fn a_silent_worker_is_listed_as_lost(db: &Db) {
    let store = db.store(quick(200)).await;
    let w = worker(&store).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let listed = store.workers().await.expect("workers");
        let me = listed.iter().find(|v| v.id == w).expect("still listed");
        if me.state == WorkerState::Lost {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a worker silent for 30 s with a 200 ms lease is still {:?}",
            me.state
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(store.queue().await.expect("queue").workers.lost, 1);
}

pub(crate) async fn recent_compute_reads_finished_jobs_within_its_bounds(db: &Db) {
    let store = db.default_store().await;
    let w = worker(&store).await;
    submit(&store, batch(3)).await;
    let done = crate::harness::drain(&store, w).await;
    assert_eq!(done.len(), 3);
    // Newer work that has not run is no history.
    submit(&store, batch(2)).await;
    let recent = store
        .recent_compute(100, Duration::from_secs(600))
        .await
        .expect("recent compute");
    assert_eq!(recent.len(), 3, "{recent:?}");
    let mut seeds: Vec<u64> = recent
        .iter()
        .map(|finished| {
            // `compute` reports 0.25 ms for every task, one task per job.
            assert_eq!(finished.compute_ms, 0.25, "{finished:?}");
            let spec: mcq_kernel::Spec =
                serde_json::from_str(&finished.spec).expect("a stored spec");
            assert_eq!(spec.runs, Some(1000));
            spec.seed.expect("a seed")
        })
        .collect();
    seeds.sort_unstable();
    assert_eq!(seeds, [1, 2, 3]);
    // The scan reads at most so many of the newest jobs, and the window
    // ends now.
    let scanned = store
        .recent_compute(2, Duration::from_secs(600))
        .await
        .expect("recent compute");
    assert!(scanned.len() <= 2, "{scanned:?}");
    let none = store
        .recent_compute(100, Duration::ZERO)
        .await
        .expect("recent compute");
    assert!(none.is_empty(), "{none:?}");
}
