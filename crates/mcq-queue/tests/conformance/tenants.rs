//! Tenants in the queue: scoped reads and cancels, idempotency keys per
//! tenant, quotas' counts, keys, and the fair share of claims.

use std::collections::HashSet;

use mcq_queue::{IdempotencyKey, NewKey, Role, Scope, StoreError, Submission, TenantLimits};
use uuid::Uuid;

use crate::harness::{Db, batch, job, single, submit, worker};

/// Makes a key for `tenant` and returns the tenant's id.
async fn tenant(store: &mcq_queue::Store, name: &str) -> i32 {
    let key = store
        .create_key(NewKey {
            id: Uuid::new_v4().simple().to_string()[..16].to_owned(),
            tenant: name.into(),
            role: Role::Submit,
            label: None,
            secret_hash: vec![0; 32],
        })
        .await
        .expect("create key");
    key.tenant.id
}

fn of(tenant: i32, submission: Submission) -> Submission {
    Submission {
        tenant,
        ..submission
    }
}

pub(crate) async fn reads_and_cancels_stay_within_their_tenant(db: &Db) {
    let store = db.default_store().await;
    let alice = tenant(&store, "alice").await;
    let bob = tenant(&store, "bob").await;
    let a = submit(&store, of(alice, batch(3))).await;
    let batch_id = a.batch_id.expect("batch");
    let job_id = a.job_ids[0];
    let mine = Scope::Tenant(alice);
    let theirs = Scope::Tenant(bob);
    assert!(store.batch(batch_id, mine).await.unwrap().is_some());
    assert!(store.batch(batch_id, Scope::All).await.unwrap().is_some());
    assert!(store.batch(batch_id, theirs).await.unwrap().is_none());
    assert!(store.job(job_id, theirs).await.unwrap().is_none());
    assert!(
        store
            .batch_jobs(batch_id, theirs, None, 10)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        store
            .batch_jobs(batch_id, mine, None, 10)
            .await
            .unwrap()
            .unwrap()
            .len(),
        3
    );
    assert_eq!(store.cancel_job(job_id, theirs).await.unwrap(), None);
    assert_eq!(store.cancel_batch(batch_id, theirs).await.unwrap(), None);
    assert_eq!(
        store
            .batch(batch_id, mine)
            .await
            .unwrap()
            .unwrap()
            .counts
            .queued,
        3
    );
    assert_eq!(store.active_jobs(alice).await.unwrap(), 3);
    assert_eq!(store.active_jobs(bob).await.unwrap(), 0);
    assert_eq!(store.cancel_batch(batch_id, mine).await.unwrap(), Some(3));
    assert_eq!(store.active_jobs(alice).await.unwrap(), 0);
}

pub(crate) async fn idempotency_keys_are_unique_per_tenant(db: &Db) {
    let store = db.default_store().await;
    let alice = tenant(&store, "alice").await;
    let bob = tenant(&store, "bob").await;
    let keyed = |tenant| {
        let mut s = of(tenant, single(7));
        s.idempotency = Some(mcq_queue::IdempotencyKey {
            key: "same".into(),
            fingerprint: "f".into(),
        });
        s
    };
    let a = submit(&store, keyed(alice)).await;
    let b = submit(&store, keyed(bob)).await;
    assert!(!a.replayed && !b.replayed);
    assert_ne!(a.job_ids, b.job_ids);
    let again = submit(&store, keyed(alice)).await;
    assert!(again.replayed);
    assert_eq!(again.job_ids, a.job_ids);
}

pub(crate) async fn keys_and_limits_are_stored(db: &Db) {
    let store = db.default_store().await;
    assert!(!store.has_keys().await.unwrap());
    let id = tenant(&store, "lab").await;
    assert!(store.has_keys().await.unwrap());
    let limits = TenantLimits {
        max_active_jobs: Some(10),
        max_paths_per_job: None,
    };
    let set = store.set_tenant_limits("lab", limits).await.unwrap();
    assert_eq!((set.id, set.limits), (id, limits));
    let keys = store.keys().await.unwrap();
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0].tenant.limits, limits);
    let revoked = store.revoke_key(&keys[0].id).await.unwrap().unwrap();
    assert!(revoked.revoked_at.is_some());
    assert!(store.revoke_key("missing").await.unwrap().is_none());
    // Revoked keys still count: a server does not reopen.
    assert!(store.has_keys().await.unwrap());
    let names: Vec<String> = store
        .tenants()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["default", "lab"]);
}

/// Tenant A floods the queue with 20,000 jobs, then tenant B submits one:
/// B's job is in the first claim made after it (the bound: no claim of A's
/// work comes between), and with one task per claim within two claims.
pub(crate) async fn a_flood_does_not_delay_another_tenants_job(db: &Db) {
    let store = db.default_store().await;
    let a = tenant(&store, "a").await;
    let b = tenant(&store, "b").await;
    let w = worker(&store).await;
    // One batch (staged on PostgreSQL) and many small ones (queued tasks).
    submit(&store, of(a, batch(10_000))).await;
    for _ in 0..20 {
        submit(&store, of(a, batch(500))).await;
    }
    // A's work is under way.
    assert_eq!(store.claim(w, 64).await.unwrap().len(), 64);
    let theirs = submit(&store, of(b, single(1))).await.job_ids[0];
    let claimed = store.claim(w, 64).await.unwrap();
    assert_eq!(claimed.len(), 64, "work-conserving: A fills the rest");
    assert_eq!(
        claimed.iter().filter(|t| t.job_id == theirs).count(),
        1,
        "B's job is in the first claim after it was submitted"
    );
    // One slot per claim: B waits at most one claim of A's.
    let again = submit(&store, of(b, single(2))).await.job_ids[0];
    let first = store.claim(w, 1).await.unwrap();
    let second = store.claim(w, 1).await.unwrap();
    assert!(
        first.iter().chain(&second).any(|t| t.job_id == again),
        "B's second job within two one-task claims"
    );
    // And work goes on for A alone.
    let rest = store.claim(w, 10).await.unwrap();
    assert_eq!(rest.len(), 10);
    let job_ids: HashSet<Uuid> = rest.iter().map(|t| t.job_id).collect();
    assert!(!job_ids.contains(&theirs) && !job_ids.contains(&again));
}

/// With several tenants waiting, one claim serves each of them an equal part.
pub(crate) async fn claims_share_equally_between_waiting_tenants(db: &Db) {
    let store = db.default_store().await;
    let w = worker(&store).await;
    let mut jobs_of = Vec::new();
    for name in ["t1", "t2", "t3"] {
        let id = tenant(&store, name).await;
        let submitted = submit(&store, of(id, batch(100))).await;
        jobs_of.push(submitted.job_ids.into_iter().collect::<HashSet<_>>());
    }
    let claimed = store.claim(w, 30).await.unwrap();
    let per_tenant: Vec<usize> = jobs_of
        .iter()
        .map(|jobs| claimed.iter().filter(|t| jobs.contains(&t.job_id)).count())
        .collect();
    assert_eq!(per_tenant, [10, 10, 10]);
}

/// What one tenant leaves of its part goes to the others in the same
/// claim, each task once. Two claims of 8 between a tenant with 20 jobs
/// and one with 1 (then 1 more) take 7 and 1 each; one of them visits the
/// first tenant a second time (the order of the tenants turns every
/// claim), where a walk that found the tenant's tasks it had already
/// locked counted them again and the claim took 5 in all.
pub(crate) async fn a_claim_gives_what_one_tenant_leaves_to_the_others(db: &Db) {
    let store = db.default_store().await;
    let w = worker(&store).await;
    let many = tenant(&store, "many").await;
    let few = tenant(&store, "few").await;
    let mut jobs_of = [HashSet::new(), HashSet::new()];
    jobs_of[0].extend(submit(&store, of(many, batch(20))).await.job_ids);
    for round in 0..2 {
        jobs_of[1].extend(submit(&store, of(few, single(round))).await.job_ids);
        let claimed = store.claim(w, 8).await.unwrap();
        let tasks: HashSet<i64> = claimed.iter().map(|t| t.task_id).collect();
        assert_eq!(tasks.len(), claimed.len(), "each task once: {claimed:?}");
        let per_tenant: Vec<usize> = jobs_of
            .iter()
            .map(|jobs| claimed.iter().filter(|t| jobs.contains(&t.job_id)).count())
            .collect();
        assert_eq!(per_tenant, [7, 1], "claim {round}");
    }
}

/// Within a tenant, a batch of higher priority is claimed first.
pub(crate) async fn priority_orders_a_tenants_batches(db: &Db) {
    let store = db.default_store().await;
    let w = worker(&store).await;
    let low = submit(&store, batch(5)).await;
    let high = submit(
        &store,
        Submission {
            priority: 5,
            jobs: (1..=3).map(|s| job(1000, s)).collect(),
            ..batch(0)
        },
    )
    .await;
    let claimed = store.claim(w, 3).await.unwrap();
    let ids: HashSet<Uuid> = claimed.iter().map(|t| t.job_id).collect();
    assert_eq!(ids, high.job_ids.iter().copied().collect());
    let next = store.claim(w, 5).await.unwrap();
    assert!(next.iter().all(|t| low.job_ids.contains(&t.job_id)));
}

/// Submissions of one tenant racing each other near its quota: the count
/// and the insert are one step, so together they never pass it. A key used
/// before is answered with what it created, whatever the count.
pub(crate) async fn racing_submissions_stay_within_the_quota(db: &Db) {
    const LIMIT: u64 = 12;
    let store = db.default_store().await;
    let alice = tenant(&store, "alice").await;
    // 24 submissions of 1 to 3 jobs (48 jobs) for 12 places, all at once.
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..24u64 {
        let store = store.clone();
        let size = 1 + i % 3;
        racing.spawn(async move {
            let submission = if size == 1 {
                of(alice, single(i))
            } else {
                of(alice, batch(size))
            };
            (size, store.submit_within(submission, Some(LIMIT)).await)
        });
    }
    let mut accepted = 0;
    while let Some(answer) = racing.join_next().await {
        match answer.expect("a submission task") {
            (size, Ok(_)) => accepted += size,
            (
                size,
                Err(StoreError::QuotaExceeded {
                    limit,
                    active,
                    adding,
                }),
            ) => {
                assert_eq!((limit, adding), (LIMIT, size));
                assert!(active + adding > LIMIT, "{active} + {adding}");
            }
            (_, Err(other)) => panic!("a racing submission failed: {other}"),
        }
    }
    // Nothing finished meanwhile, so every refusal saw the tenant too full
    // for its at most 3 jobs: the quota is filled, never passed.
    assert!(
        accepted <= LIMIT && accepted > LIMIT - 3,
        "{accepted} accepted"
    );
    assert_eq!(store.active_jobs(alice).await.unwrap(), accepted);

    let bob = tenant(&store, "bob").await;
    let keyed = |key: &str| Submission {
        idempotency: Some(IdempotencyKey {
            key: key.into(),
            fingerprint: "two jobs".into(),
        }),
        ..of(bob, batch(2))
    };
    let first = store.submit_within(keyed("k"), Some(2)).await.unwrap();
    let again = store.submit_within(keyed("k"), Some(2)).await.unwrap();
    assert!(again.replayed);
    assert_eq!(again.job_ids, first.job_ids);
    assert!(matches!(
        store.submit_within(keyed("j"), Some(2)).await,
        Err(StoreError::QuotaExceeded { active: 2, .. })
    ));
    assert_eq!(store.active_jobs(bob).await.unwrap(), 2);
    // A refused key was not kept: with room again it is a new submission.
    let fresh = store.submit_within(keyed("j"), Some(4)).await.unwrap();
    assert!(!fresh.replayed);
}
