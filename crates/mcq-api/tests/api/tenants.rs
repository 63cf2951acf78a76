//! API keys, roles and tenants: who may do what, and that one tenant's
//! work is invisible to another (answered exactly like unknown ids).

use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use mcq_queue::{NewKey, Role, TenantLimits};
use serde_json::{Value, json};

use crate::harness::{Answer, TestApp};
use crate::on_both;

/// Makes a key for `tenant` with `role` straight in the store.
async fn key(t: &TestApp, tenant: &str, role: Role) -> String {
    let minted = mcq_keys::mint().expect("random bytes");
    t.store
        .create_key(NewKey {
            id: minted.id.clone(),
            tenant: tenant.into(),
            role,
            label: None,
            secret_hash: minted.secret_hash.clone(),
        })
        .await
        .expect("store the key");
    minted.key
}

async fn send(
    t: &TestApp,
    method: &str,
    uri: &str,
    key: Option<&str>,
    body: Option<&Value>,
) -> Answer {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let body = match body {
        Some(body) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(body.to_string())
        }
        None => Body::empty(),
    };
    t.send(request.body(body).unwrap()).await
}

fn id_of(answer: &Answer) -> String {
    assert_eq!(answer.status, 202, "{:#?}", answer.body);
    answer.body["id"].as_str().expect("id").to_owned()
}

async fn keys_are_required_once_one_exists(t: &TestApp) {
    // Open while no key exists (the quick start).
    assert_eq!(t.get("/v1/workers").await.status, 200);
    let alice = key(t, "alice", Role::Submit).await;
    // The open answer may be cached for a moment; then a key is needed.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let answer = t.get("/v1/workers").await;
        if answer.status != 200 || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    refused.assert_problem(401, "/problems/unauthorized");
    assert_eq!(
        refused.headers[header::WWW_AUTHENTICATE],
        "Bearer realm=\"mcq\""
    );
    send(t, "POST", "/v1/jobs", None, Some(&json!({"runs": 1000})))
        .await
        .assert_problem(401, "/problems/unauthorized");
    // Alice's key with its last character changed (to another one: a
    // key that already ends in 0 would otherwise stay itself).
    let (head, last) = alice.split_at(alice.len() - 1);
    let altered = format!("{head}{}", if last == "0" { "1" } else { "0" });
    assert_ne!(altered, alice);
    for bad in [
        "mcq_0000000000000000_0000000000000000000000000000000000000000000000000000000000000000",
        "not-a-key",
        &alice.replace("mcq_", "mcx_"),
        &altered,
    ] {
        let answer = send(
            t,
            "GET",
            "/v1/jobs/00000000-0000-0000-0000-000000000000",
            Some(bad),
            None,
        )
        .await;
        answer.assert_problem(401, "/problems/unauthorized");
        assert!(answer.headers.contains_key(header::WWW_AUTHENTICATE));
    }
    // Probes and the API description stay public.
    assert_eq!(t.get("/healthz").await.status, 200);
    assert_eq!(t.get("/openapi.json").await.status, 200);
    // A good key works.
    let job = send(
        t,
        "POST",
        "/v1/jobs",
        Some(&alice),
        Some(&json!({"runs": 1000})),
    )
    .await;
    id_of(&job);
}
on_both!(keys_required, keys_are_required_once_one_exists);

async fn roles_limit_what_a_key_may_do(t: &TestApp) {
    let submit = key(t, "lab", Role::Submit).await;
    let read = key(t, "lab", Role::Read).await;
    let admin = key(t, "ops", Role::Admin).await;
    let id = id_of(
        &send(
            t,
            "POST",
            "/v1/batches",
            Some(&submit),
            Some(&json!({"jobs": [{"runs": 1000}]})),
        )
        .await,
    );
    // read: sees its tenant's work, may not change it.
    assert_eq!(
        send(t, "GET", &format!("/v1/batches/{id}"), Some(&read), None)
            .await
            .status,
        200
    );
    send(t, "POST", "/v1/jobs", Some(&read), Some(&json!({})))
        .await
        .assert_problem(403, "/problems/forbidden");
    send(
        t,
        "POST",
        &format!("/v1/batches/{id}/cancel"),
        Some(&read),
        None,
    )
    .await
    .assert_problem(403, "/problems/forbidden");
    // Only admin sees the workers.
    send(t, "GET", "/v1/workers", Some(&submit), None)
        .await
        .assert_problem(403, "/problems/forbidden");
    assert_eq!(
        send(t, "GET", "/v1/workers", Some(&admin), None)
            .await
            .status,
        200
    );
    // admin sees and cancels another tenant's work.
    assert_eq!(
        send(t, "GET", &format!("/v1/batches/{id}"), Some(&admin), None)
            .await
            .status,
        200
    );
    let cancelled = send(
        t,
        "POST",
        &format!("/v1/batches/{id}/cancel"),
        Some(&admin),
        None,
    )
    .await;
    assert_eq!(
        (cancelled.status.as_u16(), &cancelled.body["cancelled"]),
        (200, &json!(1))
    );
}
on_both!(roles, roles_limit_what_a_key_may_do);

async fn another_tenants_ids_answer_like_unknown_ones(t: &TestApp) {
    let alice = key(t, "alice", Role::Submit).await;
    let bob = key(t, "bob", Role::Submit).await;
    let batch = send(
        t,
        "POST",
        "/v1/batches",
        Some(&alice),
        Some(&json!({"jobs": [{"runs": 1000}, {"runs": 1000}]})),
    )
    .await;
    let id = id_of(&batch);
    let job = batch.body["job_ids"][0]
        .as_str()
        .expect("job id")
        .to_owned();
    let single = id_of(
        &send(
            t,
            "POST",
            "/v1/jobs",
            Some(&alice),
            Some(&json!({"runs": 1000})),
        )
        .await,
    );
    let unknown = uuid::Uuid::now_v7().to_string();
    for (uri, method) in [
        (format!("/v1/batches/{id}"), "GET"),
        (format!("/v1/batches/{id}/jobs"), "GET"),
        (format!("/v1/batches/{id}/summary"), "GET"),
        (format!("/v1/batches/{id}/results"), "GET"),
        (format!("/v1/batches/{id}/results?format=csv"), "GET"),
        (format!("/v1/jobs/{job}"), "GET"),
        (format!("/v1/jobs/{single}"), "GET"),
        (format!("/v1/jobs/{job}/cancel"), "POST"),
        (format!("/v1/batches/{id}/cancel"), "POST"),
    ] {
        let theirs = send(t, method, &uri, Some(&bob), None).await;
        let none = send(
            t,
            method,
            &uri.replace(&id, &unknown)
                .replace(&job, &unknown)
                .replace(&single, &unknown),
            Some(&bob),
            None,
        )
        .await;
        theirs.assert_problem(404, "/problems/not-found");
        none.assert_problem(404, "/problems/not-found");
        // The same answer, but for the id it names.
        let masked = |a: &Answer| {
            a.body["detail"]
                .as_str()
                .unwrap()
                .replace(&unknown, "ID")
                .replace(&id, "ID")
                .replace(&job, "ID")
                .replace(&single, "ID")
        };
        assert_eq!(masked(&theirs), masked(&none), "{uri}");
    }
    // Lists are per tenant too.
    let listed = send(t, "GET", "/v1/batches", Some(&bob), None).await;
    assert_eq!(listed.status, 200, "{:#?}", listed.body);
    assert_eq!(listed.body["batches"], json!([]), "{:#?}", listed.body);
    let mine = send(t, "GET", "/v1/batches", Some(&alice), None).await;
    assert_eq!(
        mine.body["batches"][0]["id"],
        id.as_str(),
        "{:#?}",
        mine.body
    );
    // Nothing of alice's was cancelled by bob's tries.
    let mine = send(t, "GET", &format!("/v1/batches/{id}"), Some(&alice), None).await;
    assert_eq!(mine.body["counts"]["cancelled"], 0, "{:#?}", mine.body);
    assert_eq!(
        send(t, "GET", &format!("/v1/jobs/{single}"), Some(&alice), None)
            .await
            .body["state"],
        "queued"
    );
}
on_both!(isolation, another_tenants_ids_answer_like_unknown_ones);

async fn idempotency_keys_are_per_tenant(t: &TestApp) {
    let alice = key(t, "alice", Role::Submit).await;
    let bob = key(t, "bob", Role::Submit).await;
    let post = |key: String| async move {
        let request = Request::post("/v1/batches")
            .header(header::AUTHORIZATION, format!("Bearer {key}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header("Idempotency-Key", "run-1")
            .body(Body::from(json!({"jobs": [{"runs": 1000}]}).to_string()))
            .unwrap();
        t.send(request).await
    };
    let a = post(alice.clone()).await;
    let b = post(bob.clone()).await;
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (202, 202));
    assert_ne!(a.body["id"], b.body["id"], "bob must not get alice's batch");
    assert!(!b.headers.contains_key("idempotent-replayed"));
    let again = post(alice).await;
    assert_eq!(again.body["id"], a.body["id"]);
    assert_eq!(again.headers["idempotent-replayed"], "true");
    let bobs = send(
        t,
        "GET",
        &format!("/v1/batches/{}", b.body["id"].as_str().unwrap()),
        Some(&bob),
        None,
    )
    .await;
    assert_eq!(bobs.status, 200);
}
on_both!(idempotency_per_tenant, idempotency_keys_are_per_tenant);

async fn a_revoked_key_stops_working(t: &TestApp) {
    let alice = key(t, "alice", Role::Submit).await;
    let id = mcq_keys::parse(&alice).unwrap().id.to_owned();
    assert_eq!(
        send(
            t,
            "GET",
            "/v1/batches/00000000-0000-0000-0000-000000000000",
            Some(&alice),
            None
        )
        .await
        .status,
        404
    );
    t.store
        .revoke_key(&id)
        .await
        .expect("revoke")
        .expect("the key exists");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = send(
            t,
            "GET",
            "/v1/batches/00000000-0000-0000-0000-000000000000",
            Some(&alice),
            None,
        )
        .await;
        if answer.status == 401 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the revoked key still works: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Revoking every key does not reopen the server.
    send(t, "GET", "/v1/workers", None, None)
        .await
        .assert_problem(401, "/problems/unauthorized");
}
on_both!(revoked, a_revoked_key_stops_working);

async fn quotas_refuse_work_past_the_limits(t: &TestApp) {
    let alice = key(t, "alice", Role::Submit).await;
    t.store
        .set_tenant_limits(
            "alice",
            TenantLimits {
                max_active_jobs: Some(3),
                max_paths_per_job: Some(10_000),
            },
        )
        .await
        .expect("limits");
    let two = json!({"jobs": [{"runs": 1000}, {"runs": 1000}]});
    id_of(&send(t, "POST", "/v1/batches", Some(&alice), Some(&two)).await);
    let over = send(t, "POST", "/v1/batches", Some(&alice), Some(&two)).await;
    over.assert_problem(429, "/problems/quota-exceeded");
    assert_eq!(over.headers[header::RETRY_AFTER], "5");
    id_of(
        &send(
            t,
            "POST",
            "/v1/jobs",
            Some(&alice),
            Some(&json!({"runs": 1000})),
        )
        .await,
    );
    send(
        t,
        "POST",
        "/v1/jobs",
        Some(&alice),
        Some(&json!({"runs": 1000})),
    )
    .await
    .assert_problem(429, "/problems/quota-exceeded");
    // A sweep counts the jobs it expands to.
    let sweep = json!({"spec": {"runs": 1000}, "sweep": {"exercise": [25, 30]}});
    send(t, "POST", "/v1/batches", Some(&alice), Some(&sweep))
        .await
        .assert_problem(429, "/problems/quota-exceeded");
    // Paths per job: a spec past the limit names its field.
    let bob = key(t, "bob", Role::Submit).await;
    t.store
        .set_tenant_limits(
            "bob",
            TenantLimits {
                max_active_jobs: None,
                max_paths_per_job: Some(10_000),
            },
        )
        .await
        .expect("limits");
    let big = send(
        t,
        "POST",
        "/v1/batches",
        Some(&bob),
        Some(&json!({"jobs": [{"runs": 10_000}, {"runs": 10_001}, {"target_std_error": 5e-324}]})),
    )
    .await;
    big.assert_problem(422, "/problems/invalid-spec");
    assert_eq!(big.pointers(), ["/jobs/1/runs", "/jobs/2/target_std_error"]);
    // In a sweep, the limit points at the swept value or the base spec.
    let swept = send(
        t,
        "POST",
        "/v1/batches",
        Some(&bob),
        Some(&json!({"sweep": {"runs": [10_000, 10_001, 20_000]}})),
    )
    .await;
    swept.assert_problem(422, "/problems/invalid-spec");
    assert_eq!(swept.pointers(), ["/sweep/runs/1", "/sweep/runs/2"]);
    let based = send(
        t,
        "POST",
        "/v1/batches",
        Some(&bob),
        Some(&json!({"spec": {"runs": 10_001}, "sweep": {"exercise": [25, 30]}})),
    )
    .await;
    based.assert_problem(422, "/problems/invalid-spec");
    assert_eq!(based.pointers(), ["/spec/runs"]);
    assert_eq!(t.jobs_in_database().await, 3, "refused work stores nothing");
}
on_both!(quotas, quotas_refuse_work_past_the_limits);

async fn a_repeated_key_is_answered_even_at_the_quota(t: &TestApp) {
    let alice = key(t, "alice", Role::Submit).await;
    t.store
        .set_tenant_limits(
            "alice",
            TenantLimits {
                max_active_jobs: Some(2),
                max_paths_per_job: None,
            },
        )
        .await
        .expect("limits");
    let two = json!({"jobs": [{"runs": 1000}, {"runs": 1000}]});
    let post = |idempotency: &'static str| {
        Request::post("/v1/batches")
            .header(header::AUTHORIZATION, format!("Bearer {alice}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header("Idempotency-Key", idempotency)
            .body(Body::from(two.to_string()))
            .unwrap()
    };
    let first = t.send(post("fill")).await;
    let id = id_of(&first);
    // The tenant is at its quota; the same request again adds nothing.
    let again = t.send(post("fill")).await;
    assert_eq!(id_of(&again), id);
    assert_eq!(again.headers[mcq_api_types::IDEMPOTENT_REPLAYED], "true");
    t.send(post("other"))
        .await
        .assert_problem(429, "/problems/quota-exceeded");
    assert_eq!(t.jobs_in_database().await, 2);
}
on_both!(quota_replay, a_repeated_key_is_answered_even_at_the_quota);

/// Submissions racing each other near the quota: the count and the insert
/// are one step per tenant, so together they never pass it.
async fn racing_submissions_never_pass_the_quota(t: &TestApp) {
    const LIMIT: usize = 30;
    const BEFORE: usize = 20;
    let alice = key(t, "alice", Role::Submit).await;
    t.store
        .set_tenant_limits(
            "alice",
            TenantLimits {
                max_active_jobs: Some(LIMIT as u64),
                max_paths_per_job: None,
            },
        )
        .await
        .expect("limits");
    let batch = |n: usize| json!({"jobs": vec![json!({"runs": 1000}); n]});
    id_of(&send(t, "POST", "/v1/batches", Some(&alice), Some(&batch(BEFORE))).await);
    // 48 submissions of 1 to 4 jobs (120 jobs) for the 10 places left,
    // some of them single jobs, all sent at once.
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..48 {
        let size = 1 + i % 4;
        let (uri, body) = if size == 1 && i % 8 == 0 {
            ("/v1/jobs", json!({"runs": 1000}))
        } else {
            ("/v1/batches", batch(size))
        };
        let request = Request::post(uri)
            .header(header::AUTHORIZATION, format!("Bearer {alice}"))
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap();
        let app = t.app.clone();
        racing.spawn(async move {
            let response = tower::ServiceExt::oneshot(app, request)
                .await
                .expect("the router is infallible");
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .expect("body");
            let body: Value = serde_json::from_slice(&bytes).expect("a JSON answer");
            (size, status, headers, body)
        });
    }
    let (mut accepted, mut refused) = (0, 0);
    while let Some(answer) = racing.join_next().await {
        let (size, status, headers, body) = answer.expect("a request task");
        match status {
            202 => accepted += size,
            429 => {
                refused += 1;
                assert_eq!(body["type"], "/problems/quota-exceeded", "{body:#}");
                assert_eq!(headers[header::RETRY_AFTER], "5");
                assert_eq!(headers[header::CONTENT_TYPE], "application/problem+json");
            }
            other => panic!("a racing submission was answered {other}: {body:#}"),
        }
    }
    assert!(
        BEFORE + accepted <= LIMIT,
        "{accepted} jobs accepted past the {BEFORE} already there: over the quota of {LIMIT}"
    );
    // Every refusal saw the tenant too full for its at most 4 jobs, and
    // nothing finished meanwhile: the quota is filled, not over-refused.
    assert!(
        refused > 0 && BEFORE + accepted > LIMIT - 4,
        "{accepted} accepted, {refused} refused"
    );
    // Nothing half-written: the accepted jobs, each batch whole, each job with its task.
    assert_eq!(t.jobs_in_database().await, (BEFORE + accepted) as i64);
    for (what, sql) in [
        (
            "batches missing jobs",
            "SELECT count(*) FROM batches b WHERE b.total <> (SELECT count(*) FROM jobs j WHERE j.batch_id = b.id)",
        ),
        (
            "jobs without a task",
            "SELECT count(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM tasks k WHERE k.job_id = j.id)",
        ),
    ] {
        let n = mcq_testdb::query_i64(&t.url, sql).await.expect(what);
        assert_eq!(n, 0, "{what}");
    }
}

mod quota_race {
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite() {
        let t = crate::harness::TestApp::sqlite().await;
        super::racing_submissions_never_pass_the_quota(&t).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres() {
        let Some(t) = crate::harness::TestApp::postgres().await else {
            return;
        };
        super::racing_submissions_never_pass_the_quota(&t).await;
    }
}

async fn writes_without_a_key_need_a_json_content_type(t: &TestApp) {
    let id = id_of(
        &t.post_json("/v1/batches", &json!({"jobs": [{"runs": 1000}]}))
            .await,
    );
    let uri = format!("/v1/batches/{id}/cancel");
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut request = Request::post(&uri);
        if let Some(content_type) = content_type {
            request = request.header(header::CONTENT_TYPE, content_type);
        }
        t.send(request.body(Body::from("x=1")).unwrap())
            .await
            .assert_problem(415, "/problems/unsupported-media-type");
    }
    let still = t.get(&format!("/v1/batches/{id}")).await;
    assert_eq!(still.body["counts"]["cancelled"], 0, "{:#?}", still.body);
    let cancelled = t.post_empty(&uri).await;
    assert_eq!(
        (cancelled.status.as_u16(), &cancelled.body["cancelled"]),
        (200, &json!(1))
    );
}
on_both!(cross_site, writes_without_a_key_need_a_json_content_type);

async fn only_allowed_hosts_are_answered(t: &TestApp) {
    let app = mcq_api::app(mcq_api::AppState {
        store: t.store.clone(),
        config: mcq_api::ApiConfig {
            allowed_hosts: vec!["mcq.example".into(), "localhost".into()],
            ..crate::harness::test_config()
        },
    });
    let status = |host: &'static str| {
        let app = app.clone();
        async move {
            let request = Request::get("/v1/workers")
                .header(header::HOST, host)
                .body(Body::empty())
                .unwrap();
            tower::ServiceExt::oneshot(app, request)
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    assert_eq!(status("mcq.example").await, 200);
    assert_eq!(status("MCQ.example:8080").await, 200);
    assert_eq!(status("localhost:8080").await, 200);
    assert_eq!(status("attacker.example").await, 421);
    assert_eq!(status("mcq.example.attacker.example").await, 421);
}
on_both!(allowed_hosts, only_allowed_hosts_are_answered);
