//! Leases: expiry and rescue, renewal by heartbeat, fencing, hand-back.

use std::time::Duration;

use mcq_queue::JobState;

use crate::harness::{Db, compute, quick, single, submit, worker};

pub(crate) async fn expired_lease_is_rescued_by_next_claim(db: &Db) {
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
    let job = store.job(id).await.expect("read").expect("job");
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
        assert!(store.heartbeat(a).await.expect("heartbeat").is_empty());
        assert!(
            store.claim(b, 1).await.expect("claim").is_empty(),
            "a renewed lease is not rescued"
        );
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
        store.job(id).await.expect("read").expect("job").state,
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
    let job = store.job(id).await.expect("read").expect("job");
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
    let job = store.job(id).await.expect("read").expect("job");
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
