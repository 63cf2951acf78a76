//! Every endpoint's happy path, idempotency, paging and cancellation.

use serde_json::{Value, json};

use crate::harness::TestApp;
use crate::on_both;

fn ids(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("array")
        .iter()
        .map(|v| v.as_str().expect("id").to_owned())
        .collect()
}

async fn job_is_enqueued_with_defaults_and_a_seed(t: &TestApp) {
    let a = t
        .post_json("/v1/jobs", &json!({"runs": 1000, "up": 1.5}))
        .await;
    assert_eq!(a.status, 202, "{:#?}", a.body);
    let id = a.body["id"].as_str().expect("id").to_owned();
    assert_eq!(a.headers["location"], format!("/v1/jobs/{id}").as_str());
    assert_eq!(a.body["state"], "queued");
    assert_eq!(a.body["spec"]["up"], 1.5);
    assert_eq!(
        a.body["spec"]["down"], 0.8,
        "omitted fields take the original sample's values"
    );
    assert!(
        a.body["spec"]["seed"].is_u64(),
        "a seed is drawn and stored: {:#?}",
        a.body
    );
    assert!(a.body["batch_id"].is_null());

    let got = t.get(&format!("/v1/jobs/{id}")).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body["id"], id.as_str());
    assert_eq!(got.body["spec"], a.body["spec"]);
    assert!(got.body["timings"]["submitted_at"].is_string());
    // A job id is not a batch id.
    t.get(&format!("/v1/batches/{id}"))
        .await
        .assert_problem(404, "/problems/not-found");
    assert_eq!(t.jobs_in_database().await, 1);
}
on_both!(job_is_enqueued, job_is_enqueued_with_defaults_and_a_seed);

async fn given_seeds_are_kept_and_missing_ones_differ(t: &TestApp) {
    let body = json!({"jobs": [{"runs": 100, "seed": 7}, {"runs": 100}, {"runs": 100}]});
    let a = t.post_json("/v1/batches", &body).await;
    assert_eq!(a.status, 202, "{:#?}", a.body);
    let id = a.body["id"].as_str().unwrap();
    let page = t.get(&format!("/v1/batches/{id}/jobs")).await;
    let seeds: Vec<u64> = page.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["spec"]["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds[0], 7);
    assert_ne!(
        seeds[1], seeds[2],
        "independent jobs get independent streams"
    );
}
on_both!(seeds, given_seeds_are_kept_and_missing_ones_differ);

async fn batch_is_read_and_paged_in_submission_order(t: &TestApp) {
    let jobs: Vec<Value> = (0..5).map(|i| json!({"runs": 1000 + i})).collect();
    let a = t
        .post_json("/v1/batches", &json!({"label": "paging", "jobs": jobs}))
        .await;
    assert_eq!(a.status, 202, "{:#?}", a.body);
    let id = a.body["id"].as_str().unwrap().to_owned();
    let job_ids = ids(&a.body["job_ids"]);
    assert_eq!(job_ids.len(), 5);
    assert_eq!(a.headers["location"], format!("/v1/batches/{id}").as_str());

    let batch = t.get(&format!("/v1/batches/{id}")).await;
    assert_eq!(batch.status, 200, "{:#?}", batch.body);
    assert_eq!(batch.body["total"], 5);
    assert_eq!(batch.body["label"], "paging");
    assert_eq!(batch.body["counts"]["queued"], 5);
    assert_eq!(batch.body["done"], false);
    assert!(batch.body["stats"].is_null());

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let uri = match &after {
            Some(a) => format!("/v1/batches/{id}/jobs?limit=2&after={a}"),
            None => format!("/v1/batches/{id}/jobs?limit=2"),
        };
        let page = t.get(&uri).await;
        assert_eq!(page.status, 200, "{:#?}", page.body);
        pages += 1;
        for job in page.body["jobs"].as_array().unwrap() {
            assert_eq!(job["batch_id"], id.as_str());
            seen.push(job["id"].as_str().unwrap().to_owned());
        }
        match page.body["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        seen, job_ids,
        "pages follow submission order without gaps or repeats"
    );
    let runs: Vec<u64> = {
        let page = t.get(&format!("/v1/batches/{id}/jobs?limit=1000")).await;
        page.body["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["spec"]["runs"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(runs, vec![1000, 1001, 1002, 1003, 1004]);
    assert_eq!(t.jobs_in_database().await, 5);
}
on_both!(paging, batch_is_read_and_paged_in_submission_order);

async fn idempotent_submissions_replay_and_conflict(t: &TestApp) {
    let body = br#"{"jobs": [{"runs": 1000}, {"runs": 2000}]}"#.to_vec();
    let same_differently_formatted =
        b"{ \"jobs\" : [ {\"runs\":1000},\n {\"runs\":2000} ] }".to_vec();
    let first = t
        .post_raw(
            "/v1/batches",
            "application/json",
            body.clone(),
            Some("key-1"),
        )
        .await;
    assert_eq!(first.status, 202, "{:#?}", first.body);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let again = t
        .post_raw(
            "/v1/batches",
            "application/json",
            same_differently_formatted,
            Some("key-1"),
        )
        .await;
    assert_eq!(again.status, 202, "{:#?}", again.body);
    assert_eq!(again.body, first.body, "a replay answers the original ids");
    assert_eq!(again.headers["idempotent-replayed"], "true");
    assert_eq!(t.jobs_in_database().await, 2, "nothing enqueued twice");

    let other = br#"{"jobs": [{"runs": 1000}]}"#.to_vec();
    t.post_raw("/v1/batches", "application/json", other, Some("key-1"))
        .await
        .assert_problem(409, "/problems/idempotency-conflict");
    assert_eq!(t.jobs_in_database().await, 2);

    let job = br#"{"runs": 500}"#.to_vec();
    let j1 = t
        .post_raw("/v1/jobs", "application/json", job.clone(), Some("key-2"))
        .await;
    let j2 = t
        .post_raw("/v1/jobs", "application/json", job, Some("key-2"))
        .await;
    assert_eq!((j1.status.as_u16(), j2.status.as_u16()), (202, 202));
    assert_eq!(j1.body["id"], j2.body["id"]);
    assert_eq!(
        j1.body["spec"]["seed"], j2.body["spec"]["seed"],
        "the replay reports the seed drawn the first time"
    );
    assert_eq!(t.jobs_in_database().await, 3);
    // Without a key, the same body is a new job.
    let j3 = t.post_json("/v1/jobs", &json!({"runs": 500})).await;
    assert_ne!(j3.body["id"], j1.body["id"]);
}
on_both!(idempotency, idempotent_submissions_replay_and_conflict);

async fn cancelling_jobs_and_batches(t: &TestApp) {
    let a = t
        .post_json(
            "/v1/batches",
            &json!({"jobs": [{"runs": 1000}, {"runs": 1000}, {"runs": 1000}]}),
        )
        .await;
    let id = a.body["id"].as_str().unwrap().to_owned();
    let job_ids = ids(&a.body["job_ids"]);

    let c = t
        .post_empty(&format!("/v1/jobs/{}/cancel", job_ids[0]))
        .await;
    assert_eq!(c.status, 200, "{:#?}", c.body);
    assert_eq!(c.body, json!({"id": job_ids[0], "state": "cancelled"}));
    let b = t.post_empty(&format!("/v1/batches/{id}/cancel")).await;
    assert_eq!(b.status, 200, "{:#?}", b.body);
    assert_eq!(b.body, json!({"id": id, "cancelled": 2}));
    let again = t.post_empty(&format!("/v1/batches/{id}/cancel")).await;
    assert_eq!(
        again.body["cancelled"], 0,
        "cancelling twice cancels nothing more"
    );

    let batch = t.get(&format!("/v1/batches/{id}")).await;
    assert_eq!(batch.body["counts"]["cancelled"], 3);
    assert_eq!(batch.body["done"], true);
    let job = t.get(&format!("/v1/jobs/{}", job_ids[1])).await;
    assert_eq!(job.body["state"], "cancelled");

    let unknown = uuid::Uuid::new_v4();
    t.post_empty(&format!("/v1/jobs/{unknown}/cancel"))
        .await
        .assert_problem(404, "/problems/not-found");
    t.post_empty(&format!("/v1/batches/{unknown}/cancel"))
        .await
        .assert_problem(404, "/problems/not-found");
}
on_both!(cancel, cancelling_jobs_and_batches);

async fn probes_workers_and_fallbacks(t: &TestApp) {
    let h = t.get("/healthz").await;
    assert_eq!(
        (h.status.as_u16(), &h.body),
        (200, &json!({"status": "ok"}))
    );
    let r = t.get("/readyz").await;
    assert_eq!(
        (r.status.as_u16(), &r.body),
        (200, &json!({"status": "ready"}))
    );
    let w = t.get("/v1/workers").await;
    assert_eq!(w.status, 200);
    assert_eq!(w.body, json!({"workers": []}));
    t.get("/v1/nothing-here")
        .await
        .assert_problem(404, "/problems/no-route");
    let delete = axum::http::Request::delete("/v1/jobs")
        .body(axum::body::Body::empty())
        .unwrap();
    t.send(delete)
        .await
        .assert_problem(405, "/problems/method-not-allowed");
}
on_both!(probes, probes_workers_and_fallbacks);

/// Every call fails on a database without the schema, so the server is
/// not ready there, though it is alive.
async fn not_ready_without_the_schema(postgres: bool) {
    let Some(t) = TestApp::unmigrated(postgres).await else {
        return;
    };
    assert_eq!(t.get("/healthz").await.status, 200);
    t.get("/readyz")
        .await
        .assert_problem(503, "/problems/unavailable");
}

#[tokio::test]
async fn not_ready_without_the_schema_sqlite() {
    not_ready_without_the_schema(false).await;
}

#[tokio::test]
async fn not_ready_without_the_schema_postgres() {
    not_ready_without_the_schema(true).await;
}
