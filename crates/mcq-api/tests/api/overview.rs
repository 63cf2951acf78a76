//! The operators' endpoints: `GET /v1/batches`, `/v1/workers`, `/v1/queue`.

use serde_json::{Value, json};

use crate::harness::TestApp;
use crate::on_both;

/// Ids of the batches on a page, in order.
fn batch_ids(page: &Value) -> Vec<String> {
    page["batches"]
        .as_array()
        .expect("batches")
        .iter()
        .map(|b| b["id"].as_str().expect("id").to_owned())
        .collect()
}

async fn batches_are_listed_newest_first_by_cursor(t: &TestApp) {
    let mut ids = Vec::new();
    for label in ["sweep a", "other", "sweep b"] {
        let a = t
            .post_json(
                "/v1/batches",
                &json!({"label": label, "jobs": [{"runs": 1000}, {"runs": 1000}]}),
            )
            .await;
        assert_eq!(a.status, 202, "{:#?}", a.body);
        ids.push(a.body["id"].as_str().unwrap().to_owned());
    }
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();

    let all = t.get("/v1/batches").await;
    assert_eq!(all.status, 200, "{:#?}", all.body);
    assert_eq!(batch_ids(&all.body), newest_first);
    assert!(all.body.get("next").is_none(), "{:#?}", all.body);
    let first = &all.body["batches"][0];
    assert_eq!(first["label"], "sweep b");
    assert_eq!(first["total"], 2);
    assert_eq!(first["counts"]["queued"], 2);
    assert_eq!(first["done"], false);
    assert!(first["timings"]["submitted_at"].is_string());

    let page = t.get("/v1/batches?limit=2").await;
    assert_eq!(batch_ids(&page.body), newest_first[..2]);
    let next = page.body["next"].as_str().expect("a next page").to_owned();
    assert_eq!(next, newest_first[1]);
    let rest = t.get(&format!("/v1/batches?limit=2&after={next}")).await;
    assert_eq!(batch_ids(&rest.body), newest_first[2..]);
    assert!(rest.body.get("next").is_none());

    let sweeps = t.get("/v1/batches?label=sweep").await;
    assert_eq!(batch_ids(&sweeps.body), [ids[2].clone(), ids[0].clone()]);
    let spaced = t.get("/v1/batches?label=sweep%20a").await;
    assert_eq!(batch_ids(&spaced.body), [ids[0].clone()]);
    let active = t.get("/v1/batches?state=active").await;
    assert_eq!(batch_ids(&active.body), newest_first);
    let done = t.get("/v1/batches?state=done").await;
    assert_eq!(done.body, json!({"batches": []}));
}
on_both!(batches_listed, batches_are_listed_newest_first_by_cursor);

async fn bad_list_parameters_are_problems(t: &TestApp) {
    for query in [
        "state=finished",
        "state=DONE",
        "limit=0",
        "limit=101",
        "limit=-1",
        "limit=ten",
        "after=42",
        "after=not-a-uuid",
    ] {
        t.get(&format!("/v1/batches?{query}"))
            .await
            .assert_problem(400, "/problems/bad-parameter");
    }
    let long = "x".repeat(201);
    t.get(&format!("/v1/batches?label={long}"))
        .await
        .assert_problem(400, "/problems/bad-parameter");
    // A parameter given must have a value, as the OpenAPI document says;
    // a label filter holding U+0000 matches nothing any backend can store.
    for query in ["state=", "label=", "after=", "limit=", "label=a%00b"] {
        t.get(&format!("/v1/batches?{query}"))
            .await
            .assert_problem(400, "/problems/bad-parameter");
    }
    assert_eq!(t.get("/v1/batches?limit=100").await.status, 200);
}
on_both!(bad_list_parameters, bad_list_parameters_are_problems);

async fn queue_and_workers_show_depth_and_state(t: &TestApp) {
    let empty = t.get("/v1/queue").await;
    assert_eq!(empty.status, 200, "{:#?}", empty.body);
    assert_eq!(
        empty.body["depth"],
        json!({"queued": 0, "scheduled": 0, "running": 0})
    );
    assert_eq!(
        empty.body["workers"],
        json!({"active": 0, "draining": 0, "lost": 0})
    );
    assert!(
        empty.body["oldest_queued_at"].is_null() && empty.body["oldest_queued_age_ms"].is_null()
    );
    assert!(empty.body["read_at"].is_string());

    let a = t
        .post_json(
            "/v1/batches",
            &json!({"jobs": [{"runs": 1000}, {"runs": 1000}, {"runs": 1000}]}),
        )
        .await;
    assert_eq!(a.status, 202);
    let worker = t
        .store
        .register_worker(mcq_queue::WorkerInfo {
            hostname: "probe".into(),
            pid: 7,
            concurrency: 2,
        })
        .await
        .expect("register");
    t.store.claim(worker, 1).await.expect("claim");
    let queue = t.get("/v1/queue").await;
    assert_eq!(
        queue.body["depth"],
        json!({"queued": 2, "scheduled": 0, "running": 1})
    );
    assert_eq!(queue.body["workers"]["active"], 1);
    assert!(queue.body["oldest_queued_at"].is_string());
    assert!(queue.body["oldest_queued_age_ms"].as_f64().expect("age") >= 0.0);

    let workers = t.get("/v1/workers").await;
    assert_eq!(workers.status, 200);
    let listed = &workers.body["workers"][0];
    assert_eq!(listed["id"], worker.to_string());
    assert_eq!(listed["state"], "active");
    assert_eq!(listed["tasks_held"], 1);
    assert_eq!(listed["tasks_last_minute"], 0);
    assert_eq!(listed["hostname"], "probe");
}
on_both!(queue_and_workers, queue_and_workers_show_depth_and_state);
