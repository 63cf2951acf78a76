//! Hostile and odd input: each case answers as the server documents, the
//! same on both backends, and enqueues nothing it refuses.

use axum::body::Body;
use axum::http::Request;
use mcq_kernel::MAX_SEED;
use serde_json::json;

use crate::harness::{TestApp, test_config};
use crate::on_both;

async fn a_nul_in_a_label_is_refused_by_name(t: &TestApp) {
    let answer = t
        .post_json("/v1/batches", &json!({"label": "a\u{0}b", "jobs": [{}]}))
        .await;
    answer.assert_problem(422, "/problems/invalid-spec");
    assert_eq!(answer.pointers(), ["/label"]);
    assert_eq!(t.jobs_in_database().await, 0);
    // Other control characters are stored as given.
    let answer = t
        .post_json(
            "/v1/batches",
            &json!({"label": "tab\tnewline\n", "jobs": [{}]}),
        )
        .await;
    assert_eq!(answer.status, 202, "{:#?}", answer.body);
    let batch = answer.body["id"].as_str().unwrap().to_owned();
    let view = t.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(view.body["label"], "tab\tnewline\n");
}
on_both!(nul_in_label, a_nul_in_a_label_is_refused_by_name);

async fn seeds_stay_below_2_to_the_53(t: &TestApp) {
    let answer = t
        .post_json("/v1/jobs", &json!({"runs": 100, "seed": MAX_SEED + 1}))
        .await;
    answer.assert_problem(422, "/problems/invalid-spec");
    assert_eq!(answer.pointers(), ["/seed"]);
    let answer = t
        .post_json(
            "/v1/batches",
            &json!({"jobs": [{"runs": 100}, {"runs": 100, "seed": u64::MAX}]}),
        )
        .await;
    answer.assert_problem(422, "/problems/invalid-spec");
    assert_eq!(answer.pointers(), ["/jobs/1/seed"]);
    assert_eq!(t.jobs_in_database().await, 0);
    let answer = t
        .post_json("/v1/jobs", &json!({"runs": 100, "seed": MAX_SEED}))
        .await;
    assert_eq!(answer.status, 202, "{:#?}", answer.body);
    assert_eq!(answer.body["spec"]["seed"], MAX_SEED);
    // Drawn seeds lie in the same range.
    let jobs: Vec<_> = (0..50).map(|_| json!({"runs": 100})).collect();
    let answer = t.post_json("/v1/batches", &json!({ "jobs": jobs })).await;
    let batch = answer.body["id"].as_str().unwrap().to_owned();
    let page = t.get(&format!("/v1/batches/{batch}/jobs?limit=50")).await;
    for job in page.body["jobs"].as_array().unwrap() {
        let seed = job["spec"]["seed"].as_u64().expect("a drawn seed");
        assert!(seed <= MAX_SEED, "drawn seed {seed}");
    }
}
on_both!(seed_range, seeds_stay_below_2_to_the_53);

async fn duplicate_keys_are_refused(t: &TestApp) {
    for (uri, body) in [
        ("/v1/jobs", r#"{"down": 0.7, "down": 0.9}"#),
        ("/v1/batches", r#"{"jobs": [{}], "jobs": [{}, {}]}"#),
        ("/v1/batches", r#"{"jobs": [{"runs": 10, "runs": 20}]}"#),
    ] {
        let answer = t
            .post_raw(uri, "application/json", body.as_bytes().to_vec(), None)
            .await;
        answer.assert_problem(400, "/problems/malformed-request");
        let detail = answer.body["detail"].as_str().unwrap();
        assert!(detail.contains("duplicate field"), "{body}: {detail}");
    }
    assert_eq!(t.jobs_in_database().await, 0);
}
on_both!(duplicate_keys, duplicate_keys_are_refused);

async fn integral_numbers_count_as_integers(t: &TestApp) {
    let answer = t
        .post_json(
            "/v1/jobs",
            &json!({"periods": 12.0, "runs": 1e3, "seed": 5.0}),
        )
        .await;
    assert_eq!(answer.status, 202, "{:#?}", answer.body);
    assert_eq!(answer.body["spec"]["periods"], 12);
    assert_eq!(answer.body["spec"]["runs"], 1000);
}
on_both!(integral_numbers, integral_numbers_count_as_integers);

async fn only_the_hyphenated_uuid_spelling_names_a_resource(t: &TestApp) {
    let answer = t.post_json("/v1/jobs", &json!({"runs": 100})).await;
    let id = uuid::Uuid::parse_str(answer.body["id"].as_str().unwrap()).unwrap();
    let hyphenated = id.hyphenated().to_string();
    assert_eq!(t.get(&format!("/v1/jobs/{hyphenated}")).await.status, 200);
    let upper = hyphenated.to_uppercase();
    assert_eq!(t.get(&format!("/v1/jobs/{upper}")).await.status, 200);
    for other in [
        id.simple().to_string(),
        id.braced().to_string(),
        id.urn().to_string(),
    ] {
        t.get(&format!("/v1/jobs/{other}"))
            .await
            .assert_problem(404, "/problems/not-found");
    }
}
on_both!(
    uuid_spelling,
    only_the_hyphenated_uuid_spelling_names_a_resource
);

async fn a_cursor_from_another_batch_is_a_bad_parameter(t: &TestApp) {
    let three = json!({"jobs": [{"runs": 100}, {"runs": 100}, {"runs": 100}]});
    let mine = t.post_json("/v1/batches", &three).await.body;
    let other = t.post_json("/v1/batches", &three).await.body;
    let (batch, last) = (mine["id"].as_str().unwrap(), mine["job_ids"][2].clone());
    let foreign = other["job_ids"][0].as_str().unwrap();
    let unknown = uuid::Uuid::now_v7();
    for cursor in [foreign.to_owned(), unknown.to_string()] {
        t.get(&format!("/v1/batches/{batch}/jobs?after={cursor}"))
            .await
            .assert_problem(400, "/problems/bad-parameter");
    }
    // The batch's own last job is a cursor with nothing after it.
    let page = t
        .get(&format!(
            "/v1/batches/{batch}/jobs?after={}",
            last.as_str().unwrap()
        ))
        .await;
    assert_eq!(page.status, 200, "{:#?}", page.body);
    assert_eq!(page.body["jobs"], json!([]));
}
on_both!(
    foreign_cursor,
    a_cursor_from_another_batch_is_a_bad_parameter
);

async fn empty_query_values_are_refused(t: &TestApp) {
    let answer = t.post_json("/v1/batches", &json!({"jobs": [{}]})).await;
    let batch = answer.body["id"].as_str().unwrap().to_owned();
    for query in ["after=", "limit=", "wait=", "limit=%2B5", "limit=%205"] {
        t.get(&format!("/v1/batches/{batch}/jobs?{query}"))
            .await
            .assert_problem(400, "/problems/bad-parameter");
    }
    assert_eq!(
        t.get(&format!("/v1/batches/{batch}/jobs?limit=1"))
            .await
            .status,
        200
    );
}
on_both!(empty_query_values, empty_query_values_are_refused);

async fn the_job_limit_applies_while_the_body_is_decoded(t: &TestApp) {
    // The first job past the limit ends decoding: what follows it, even
    // broken JSON, is never read.
    let limit = test_config().max_batch_jobs;
    let body = format!(
        r#"{{"jobs": [{}, {{}}, not json at all"#,
        vec!["{}"; limit].join(",")
    );
    let answer = t
        .post_raw("/v1/batches", "application/json", body.into_bytes(), None)
        .await;
    answer.assert_problem(413, "/problems/batch-too-large");
    assert_eq!(t.jobs_in_database().await, 0);
}
on_both!(
    job_limit_streams,
    the_job_limit_applies_while_the_body_is_decoded
);

/// Asserts that a problem's detail names `words`, each of them.
fn names(answer: &crate::harness::Answer, words: &[&str]) {
    let detail = answer.body["detail"].as_str().unwrap_or_default();
    for word in words {
        assert!(detail.contains(word), "{word:?} missing in {detail:?}");
    }
}

async fn each_limit_answers_413_and_names_itself(t: &TestApp) {
    let config = test_config();
    let (jobs, bytes) = (config.max_batch_jobs, config.max_body_bytes);
    let per_batch = format!("{jobs} jobs per batch");
    let body_limit = format!("limit of {bytes} bytes");
    // One job too many, in a body well within the size limit.
    let listed = json!({"jobs": vec![json!({}); jobs + 1]});
    assert!(listed.to_string().len() < bytes / 10);
    let answer = t.post_json("/v1/batches", &listed).await;
    answer.assert_problem(413, "/problems/batch-too-large");
    names(&answer, &[&per_batch, "max_batch_jobs", "--max-batch-jobs"]);
    // A sweep's jobs are counted as grid points × repeat.
    let sweep = json!({"sweep": {"exercise": [25, 30]}, "repeat": jobs / 2 + 1});
    let answer = t.post_json("/v1/batches", &sweep).await;
    answer.assert_problem(413, "/problems/batch-too-large");
    let asked = format!("asks for {} jobs", 2 * (jobs / 2 + 1));
    names(&answer, &[&asked, &per_batch, "max_batch_jobs"]);
    // A body past the size limit with a single job, on both routes.
    let filler = "x".repeat(bytes);
    let big_batch = json!({"label": filler, "jobs": [{}]});
    let answer = t.post_json("/v1/batches", &big_batch).await;
    answer.assert_problem(413, "/problems/body-too-large");
    names(
        &answer,
        &[&body_limit, "max_body_bytes", "--max-body-bytes"],
    );
    let big_job = format!(r#"{{"runs": 1000{}}}"#, " ".repeat(bytes));
    let answer = t
        .post_raw("/v1/jobs", "application/json", big_job.into_bytes(), None)
        .await;
    answer.assert_problem(413, "/problems/body-too-large");
    names(&answer, &[&body_limit, "max_body_bytes"]);
    assert_eq!(t.jobs_in_database().await, 0);
    // At the job limit exactly, the batch is accepted.
    let answer = t
        .post_json("/v1/batches", &json!({"jobs": vec![json!({}); jobs]}))
        .await;
    assert_eq!(answer.status, 202, "{:?}", answer.body);
}
on_both!(limits, each_limit_answers_413_and_names_itself);

#[tokio::test]
async fn oversized_heads_are_problems() {
    let t = TestApp::sqlite().await;
    let long = format!("/v1/jobs/{}", "a".repeat(9 * 1024));
    t.get(&long)
        .await
        .assert_problem(414, "/problems/uri-too-long");
    let mut request = Request::get("/healthz");
    for i in 0..101 {
        request = request.header(format!("x-filler-{i}"), "1");
    }
    t.send(request.body(Body::empty()).unwrap())
        .await
        .assert_problem(431, "/problems/headers-too-large");
    let request = Request::get("/healthz")
        .header("x-big", "b".repeat(40 * 1024))
        .body(Body::empty())
        .unwrap();
    t.send(request)
        .await
        .assert_problem(431, "/problems/headers-too-large");
    assert_eq!(t.get("/healthz").await.status, 200);
}
