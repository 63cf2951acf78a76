//! Sweeps through the API: expansion, validation all or nothing, the grid
//! point of each job, the summary by point and the results as tables.

use axum::body::Body;
use axum::http::{Request, header};
use mcq_queue::{Store, TaskDone, TaskOutput, WorkerInfo};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::harness::TestApp;
use crate::on_both;

/// Computes every queued task with the kernel, as a worker would.
pub(crate) async fn work_off(store: &Store) {
    let info = WorkerInfo {
        hostname: "test".into(),
        pid: std::process::id(),
        concurrency: 1,
    };
    let worker = store.register_worker(info).await.expect("register");
    let cancel = std::sync::atomic::AtomicBool::new(false);
    loop {
        let claimed = store.claim(worker, 100).await.expect("claim");
        if claimed.is_empty() {
            return;
        }
        let done = claimed
            .iter()
            .map(|task| {
                let valid = task.spec.validate().expect("valid");
                let output = match &task.chunks {
                    Some(chunks) => {
                        TaskOutput::Partial(valid.run_chunks(chunks.clone(), &cancel).expect("run"))
                    }
                    None => TaskOutput::Result(valid.price(&cancel).expect("price")),
                };
                TaskDone {
                    task_id: task.task_id,
                    lease_token: task.lease_token,
                    output,
                    compute_ms: 1.0,
                    compute_span: None,
                }
            })
            .collect();
        assert!(
            store
                .complete(worker, done)
                .await
                .expect("complete")
                .is_empty()
        );
    }
}

/// A GET with an Accept header: status, content type and body text.
async fn get_text(t: &TestApp, uri: &str, accept: &str) -> (u16, String, String) {
    let request = Request::get(uri)
        .header(header::ACCEPT, accept)
        .body(Body::empty())
        .unwrap();
    let response = t.app.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        content_type,
        String::from_utf8(bytes.to_vec()).expect("utf-8"),
    )
}

const SWEEP: &str = r#"{"label": "grid", "spec": {"runs": 20000, "variance_reduction": "none"},
    "sweep": {"exercise": [25, 30, 35], "periods": [10, 20]}, "repeat": 2}"#;

async fn a_sweep_expands_into_one_job_per_point_and_repeat(t: &TestApp) {
    let body: Value = serde_json::from_str(SWEEP).unwrap();
    let accepted = t.post_json("/v1/batches", &body).await;
    assert_eq!(accepted.status, 202, "{:#?}", accepted.body);
    let ids: Vec<&str> = accepted.body["job_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 12);
    let batch = accepted.body["id"].as_str().unwrap();

    // Job 7 prices point 3: exercise 30 (the second), periods 20 (the second).
    let job = t.get(&format!("/v1/jobs/{}", ids[7])).await;
    assert_eq!(job.body["point"], json!({"exercise": 30, "periods": 20}));
    assert_eq!(job.body["spec"]["exercise"], 30.0);
    assert_eq!(job.body["spec"]["periods"], 20);
    assert_eq!(job.body["spec"]["runs"], 20000);
    assert_ne!(
        job.body["spec"]["seed"],
        t.get(&format!("/v1/jobs/{}", ids[6])).await.body["spec"]["seed"],
        "repeats of a point draw their own seeds"
    );
    assert_eq!(
        job.body["tasks"],
        json!({"total": 1, "done": 0, "claims": 0})
    );

    let view = t.get(&format!("/v1/batches/{batch}")).await;
    assert_eq!(view.body["total"], 12);
    assert_eq!(
        view.body["sweep"],
        json!({"exercise": [25, 30, 35], "periods": [10, 20]})
    );
    assert_eq!(view.body["repeat"], 2);
    let page = t.get(&format!("/v1/batches/{batch}/jobs?limit=3")).await;
    let points: Vec<&Value> = page.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["point"])
        .collect();
    assert_eq!(
        points,
        [
            &json!({"exercise": 25, "periods": 10}),
            &json!({"exercise": 25, "periods": 10}),
            &json!({"exercise": 25, "periods": 20})
        ]
    );

    work_off(&t.store).await;
    let summary = t.get(&format!("/v1/batches/{batch}/summary")).await;
    assert_eq!(summary.status, 200, "{:#?}", summary.body);
    assert_eq!(summary.body["done"], true);
    let groups = summary.body["points"].as_array().unwrap();
    assert_eq!(groups.len(), 6);
    let jobs = t.get(&format!("/v1/batches/{batch}/jobs?limit=100")).await;
    let jobs = jobs.body["jobs"].as_array().unwrap().clone();
    for (i, group) in groups.iter().enumerate() {
        let mine = &jobs[2 * i..2 * i + 2];
        assert_eq!(group["point"], mine[0]["point"]);
        assert_eq!(group["counts"]["succeeded"], 2);
        let prices: Vec<f64> = mine
            .iter()
            .map(|j| j["result"]["price"].as_f64().unwrap())
            .collect();
        let errors: Vec<f64> = mine
            .iter()
            .map(|j| j["result"]["std_error"].as_f64().unwrap())
            .collect();
        let price = &group["price"];
        assert_eq!(price["count"], 2);
        assert!((price["mean"].as_f64().unwrap() - (prices[0] + prices[1]) / 2.0).abs() < 1e-12);
        let se = (errors[0].powi(2) + errors[1].powi(2)).sqrt() / 2.0;
        assert!((price["std_error"].as_f64().unwrap() - se).abs() < 1e-12);
        assert_eq!(price["paths"], 40000);
    }
    // A deeper strike is worth less: the grid really varies the spec.
    let mean = |i: usize| groups[i]["price"]["mean"].as_f64().unwrap();
    assert!(mean(0) > mean(2) && mean(2) > mean(4), "{groups:#?}");

    // Results as CSV: a header, then one row per job in submission order.
    let (status, content_type, csv) =
        get_text(t, &format!("/v1/batches/{batch}/results"), "text/csv").await;
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/csv"), "{content_type}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 13, "{csv}");
    assert!(
        lines[0].starts_with(
            "job_id,state,exercise,periods,price,std_error,ci95_low,ci95_high,paths,seed"
        ),
        "{}",
        lines[0]
    );
    let row: Vec<&str> = lines[8].split(',').collect();
    assert_eq!(&row[..4], [ids[7], "succeeded", "30", "20"]);
    assert_eq!(row[4], jobs[7]["result"]["price"].to_string());
    assert!(!lines[0].contains("delta"), "no delta unless asked for");
    assert_eq!(
        row[9],
        jobs[7]["spec"]["seed"].to_string(),
        "seeds are written exactly"
    );

    // JSON lines with chosen fields, in the order asked.
    let (status, content_type, lines) = get_text(
        t,
        &format!("/v1/batches/{batch}/results?fields=periods,price,attempts"),
        "application/x-ndjson",
    )
    .await;
    assert_eq!(
        (status, content_type.as_str()),
        (200, "application/x-ndjson")
    );
    let rows: Vec<Value> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 12);
    assert_eq!(
        lines.lines().next().unwrap().split(':').next().unwrap(),
        "{\"periods\""
    );
    assert_eq!(
        rows[7],
        json!({"periods": 20, "price": jobs[7]["result"]["price"], "attempts": 1})
    );

    // JSON pages with a cursor.
    let first = t
        .get(&format!(
            "/v1/batches/{batch}/results?limit=5&fields=job_id"
        ))
        .await;
    assert_eq!(first.body["columns"], json!(["job_id"]));
    assert_eq!(first.body["rows"].as_array().unwrap().len(), 5);
    let next = first.body["next"].as_str().unwrap();
    let second = t
        .get(&format!(
            "/v1/batches/{batch}/results?limit=5&fields=job_id&after={next}"
        ))
        .await;
    assert_eq!(second.body["rows"][0]["job_id"], ids[5]);

    let bad = t
        .get(&format!("/v1/batches/{batch}/results?fields=price,prise"))
        .await;
    bad.assert_problem(400, "/problems/bad-parameter");
    let bad = t
        .get(&format!("/v1/batches/{batch}/results?format=xlsx"))
        .await;
    bad.assert_problem(400, "/problems/bad-parameter");
}
on_both!(
    sweep_jobs_points_summary_and_tables,
    a_sweep_expands_into_one_job_per_point_and_repeat
);

async fn a_bad_sweep_stores_nothing_and_points_at_every_problem(t: &TestApp) {
    let cases = [
        (
            json!({"sweep": {"exercise": [25, "x"], "strike": [1]}}),
            vec!["/sweep/exercise/1", "/sweep/strike"],
        ),
        (
            json!({"sweep": {"exercise": [25, -1, -2]}}),
            vec!["/sweep/exercise/1", "/sweep/exercise/2"],
        ),
        (
            json!({"sweep": {"up": [1.5, 1.05]}, "spec": {"periods": 0}}),
            vec!["/sweep/up/1", "/spec/periods"],
        ),
        (json!({"sweep": {"periods": []}}), vec!["/sweep/periods"]),
        (
            json!({"sweep": {"exercise": [25]}, "repeat": 2, "spec": {"seed": 3}}),
            vec!["/spec/seed"],
        ),
        (
            json!({"sweep": {"exercise": [25]}, "jobs": [{}]}),
            vec!["/jobs"],
        ),
        (json!({"spec": {}}), vec!["/spec"]),
        (json!({"jobs": [{}], "repeat": 2}), vec!["/repeat"]),
        (json!({}), vec!["/jobs"]),
    ];
    for (body, pointers) in cases {
        let answer = t.post_json("/v1/batches", &body).await;
        answer.assert_problem(422, "/problems/invalid-spec");
        let mut got = answer.pointers();
        got.sort();
        let mut want: Vec<String> = pointers.iter().map(|p| (*p).to_owned()).collect();
        want.sort();
        assert_eq!(got, want, "{body}: {:#?}", answer.body);
    }
    let malformed = t
        .post_json("/v1/batches", &json!({"sweep": {"exercise": 25}}))
        .await;
    malformed.assert_problem(400, "/problems/malformed-request");
    // 40 × 40 points is more than the test server's 500 jobs: refused
    // before anything is expanded.
    let axis: Vec<u32> = (1..=40).collect();
    let huge = t
        .post_json(
            "/v1/batches",
            &json!({"sweep": {"exercise": axis, "initial": axis}}),
        )
        .await;
    huge.assert_problem(413, "/problems/batch-too-large");
    let huge = t
        .post_json(
            "/v1/batches",
            &json!({"sweep": {"exercise": [1, 2]}, "repeat": 4_000_000_000u32}),
        )
        .await;
    huge.assert_problem(413, "/problems/batch-too-large");
    assert_eq!(t.jobs_in_database().await, 0);
}
on_both!(
    bad_sweeps_are_refused_whole,
    a_bad_sweep_stores_nothing_and_points_at_every_problem
);

async fn a_plain_batch_tables_the_fields_that_vary(t: &TestApp) {
    let body = json!({"jobs": [
        {"runs": 5000, "exercise": 25}, {"runs": 5000, "exercise": 35},
        {"runs": 5000, "exercise": 35, "option": "put"}
    ]});
    let accepted = t.post_json("/v1/batches", &body).await;
    let batch = accepted.body["id"].as_str().unwrap().to_owned();
    let (status, _, csv) = get_text(t, &format!("/v1/batches/{batch}/results"), "text/csv").await;
    assert_eq!(status, 200);
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].starts_with("job_id,state,exercise,option,price,"),
        "{}",
        lines[0]
    );
    assert!(lines[3].contains(",queued,35.0,put,,"), "{}", lines[3]);
    let job = t
        .get(&format!(
            "/v1/jobs/{}",
            accepted.body["job_ids"][0].as_str().unwrap()
        ))
        .await;
    assert!(job.body.get("point").is_none(), "{:#?}", job.body);
    let summary = t.get(&format!("/v1/batches/{batch}/summary")).await;
    assert_eq!(summary.body["points"].as_array().unwrap().len(), 1);
    assert_eq!(summary.body["points"][0]["point"], json!({}));
    assert_eq!(summary.body["points"][0]["counts"]["queued"], 3);
    assert!(summary.body["points"][0]["price"].is_null());
    let missing = t
        .get("/v1/batches/0193a1b2-0000-7000-8000-000000000000/results")
        .await;
    missing.assert_problem(404, "/problems/not-found");
}
on_both!(
    plain_batches_as_tables,
    a_plain_batch_tables_the_fields_that_vary
);

async fn tables_carry_delta_when_the_batch_asked_for_it(t: &TestApp) {
    let body = json!({"spec": {"method": "exact", "periods": 12, "greeks": ["delta"]},
                      "sweep": {"exercise": [25, 35]}});
    let accepted = t.post_json("/v1/batches", &body).await;
    assert_eq!(accepted.status, 202, "{:#?}", accepted.body);
    let batch = accepted.body["id"].as_str().unwrap().to_owned();
    work_off(&t.store).await;
    let jobs = t.get(&format!("/v1/batches/{batch}/jobs")).await;
    let jobs = jobs.body["jobs"].as_array().unwrap().clone();
    let (status, _, csv) = get_text(t, &format!("/v1/batches/{batch}/results"), "text/csv").await;
    assert_eq!(status, 200);
    let lines: Vec<&str> = csv.lines().collect();
    let header: Vec<&str> = lines[0].split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).expect(name);
    // CSV leaves a missing value empty.
    let cell = |v: &Value| {
        if v.is_null() {
            String::new()
        } else {
            v.to_string()
        }
    };
    for (i, job) in jobs.iter().enumerate() {
        let row: Vec<&str> = lines[i + 1].split(',').collect();
        assert!(job["result"]["delta"].is_number(), "{job:#}");
        assert_eq!(row[at("delta")], cell(&job["result"]["delta"]));
        assert_eq!(
            row[at("delta_std_error")],
            cell(&job["result"]["delta_std_error"])
        );
    }
    let (_, _, lines) = get_text(
        t,
        &format!("/v1/batches/{batch}/results?fields=exercise,delta"),
        "application/x-ndjson",
    )
    .await;
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(
        first,
        json!({"exercise": 25, "delta": jobs[0]["result"]["delta"]})
    );
    // A deeper strike has a smaller delta.
    assert!(jobs[0]["result"]["delta"].as_f64() > jobs[1]["result"]["delta"].as_f64());

    // A plain batch in which one job asks for delta has the columns too,
    // empty for the others.
    let plain = t
        .post_json(
            "/v1/batches",
            &json!({"jobs": [{"runs": 5000}, {"runs": 5000, "greeks": ["delta"]}]}),
        )
        .await;
    let plain = plain.body["id"].as_str().unwrap().to_owned();
    let (_, _, csv) = get_text(t, &format!("/v1/batches/{plain}/results"), "text/csv").await;
    let header = csv.lines().next().unwrap();
    assert!(header.contains(",delta,delta_std_error,"), "{header}");
}
on_both!(
    delta_columns,
    tables_carry_delta_when_the_batch_asked_for_it
);
