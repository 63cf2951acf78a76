//! Seeds: every seed the server draws or derives lies in the range the
//! served OpenAPI document declares for `seed`, and a batch's base seed
//! gives each job its own stream, the same one on every submission.

use mcq_kernel::{Spec, job_seed};
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::harness::{TestApp, test_config};
use crate::on_both;
use crate::sweeps::work_off;

/// Every schema the document declares for a property named `seed` (for a
/// sweep's `seed` axis, the schema of its values), with where it is.
fn seed_schemas(node: &Value, at: &str, out: &mut Vec<(String, Value)>) {
    match node {
        Value::Object(map) => {
            if let Some(seed) = map.get("properties").and_then(|p| p.get("seed")) {
                let schema = seed.get("items").unwrap_or(seed);
                out.push((at.to_owned(), schema.clone()));
            }
            for (key, child) in map {
                seed_schemas(child, &format!("{at}/{key}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                seed_schemas(child, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The seed range the served document declares: the bounds of `Spec`'s
/// `seed`, after checking that every other `seed` declares the same.
async fn declared_range(t: &TestApp) -> (u64, u64) {
    let doc = t.get("/openapi.json").await;
    assert_eq!(doc.status, 200);
    let mut schemas = Vec::new();
    seed_schemas(&doc.body, "", &mut schemas);
    let bounds = |schema: &Value| {
        (
            schema["minimum"]
                .as_u64()
                .expect("a seed declares its minimum"),
            schema["maximum"]
                .as_u64()
                .expect("a seed declares its maximum"),
        )
    };
    let spec = &doc.body["components"]["schemas"]["Spec"]["properties"]["seed"];
    let range = bounds(spec);
    // The spec, the result, both batch shapes and the sweep axis at least.
    assert!(schemas.len() >= 5, "{schemas:#?}");
    for (at, schema) in &schemas {
        assert_eq!(bounds(schema), range, "seed at {at}: {schema}");
    }
    range
}

/// The stored spec of every job of a batch, in submission order.
async fn stored_jobs(t: &TestApp, batch: &str) -> Vec<Value> {
    let mut jobs = Vec::new();
    let mut after = String::new();
    loop {
        let page = t
            .get(&format!("/v1/batches/{batch}/jobs?limit=200{after}"))
            .await;
        assert_eq!(page.status, 200, "{:?}", page.body);
        jobs.extend(page.body["jobs"].as_array().unwrap().iter().cloned());
        match page.body["next"].as_str() {
            Some(next) => after = format!("&after={next}"),
            None => return jobs,
        }
    }
}

fn seeds_of(jobs: &[Value]) -> Vec<u64> {
    jobs.iter()
        .map(|job| job["spec"]["seed"].as_u64().expect("a stored seed"))
        .collect()
}

async fn drawn_seeds_lie_in_the_declared_range(t: &TestApp) {
    let (min, max) = declared_range(t).await;
    let limit = test_config().max_batch_jobs;
    let listed = t
        .post_json(
            "/v1/batches",
            &json!({"jobs": vec![json!({"runs": 1000}); limit]}),
        )
        .await;
    let swept = t
        .post_json(
            "/v1/batches",
            &json!({"spec": {"runs": 1000}, "sweep": {"exercise": [25, 30]}, "repeat": limit / 2}),
        )
        .await;
    let single = t.post_json("/v1/jobs", &json!({"runs": 1000})).await;
    assert_eq!(single.status, 202, "{:?}", single.body);
    let mut seeds = vec![single.body["spec"]["seed"].as_u64().unwrap()];
    for batch in [listed, swept] {
        assert_eq!(batch.status, 202, "{:?}", batch.body);
        let jobs = stored_jobs(t, batch.body["id"].as_str().unwrap()).await;
        assert_eq!(jobs.len(), limit);
        seeds.extend(seeds_of(&jobs));
    }
    for seed in &seeds {
        assert!(
            (min..=max).contains(seed),
            "seed {seed} outside {min}..={max}"
        );
    }
    // 2^53 possible seeds: if the top bits were cut off, the largest of
    // 1,001 draws would lie far below the top of the range.
    let top = seeds.iter().max().unwrap();
    assert!(*top > max / 2, "largest drawn seed {top} of {max}");

    // Many more draws, through the kernel the server validates with.
    for _ in 0..100_000 {
        let valid = Spec::default()
            .with_defaults()
            .validate()
            .expect("the defaults are valid");
        let seed = valid.spec().seed.expect("a drawn seed");
        assert!(
            (min..=max).contains(&seed),
            "seed {seed} outside {min}..={max}"
        );
    }
    let mut runner = proptest::test_runner::TestRunner::default();
    runner
        .run(&(min..=max, 0..u64::from(u32::MAX)), |(base, index)| {
            let seed = job_seed(base, index);
            prop_assert!(
                (min..=max).contains(&seed),
                "job_seed({base}, {index}) = {seed}"
            );
            Ok(())
        })
        .expect("derived seeds lie in the declared range");
}
on_both!(drawn_seeds, drawn_seeds_lie_in_the_declared_range);

/// Submits `body` as a batch, computes it, and returns its jobs.
async fn priced(t: &TestApp, body: &Value) -> Vec<Value> {
    let answer = t.post_json("/v1/batches", body).await;
    assert_eq!(answer.status, 202, "{:?}", answer.body);
    work_off(&t.store).await;
    let jobs = stored_jobs(t, answer.body["id"].as_str().unwrap()).await;
    for job in &jobs {
        assert_eq!(job["state"], "succeeded", "{job:#}");
    }
    jobs
}

/// Each job's price as its exact bits, and its seed.
fn outcome(jobs: &[Value]) -> Vec<(u64, u64)> {
    jobs.iter()
        .map(|job| {
            let price = job["result"]["price"].as_f64().expect("a price");
            (job["spec"]["seed"].as_u64().unwrap(), price.to_bits())
        })
        .collect()
}

async fn a_base_seed_gives_every_job_its_own_reproducible_stream(t: &TestApp) {
    let base = 2010;
    let listed = json!({"seed": base, "jobs": [{"runs": 4000}, {"runs": 4000}, {"runs": 4000, "seed": 7}, {"runs": 4000}]});
    let first = priced(t, &listed).await;
    let seeds = seeds_of(&first);
    let expected = [job_seed(base, 0), job_seed(base, 1), 7, job_seed(base, 3)];
    assert_eq!(
        seeds, expected,
        "job i gets job_seed(base, i); its own seed wins"
    );
    let again = priced(t, &listed).await;
    assert_eq!(
        outcome(&again),
        outcome(&first),
        "the same base, the same bits"
    );
    // The stored seed is all a client needs to price the job itself.
    let local = Spec {
        runs: Some(4000),
        seed: Some(seeds[1]),
        ..Spec::default()
    }
    .validate()
    .unwrap()
    .price(&std::sync::atomic::AtomicBool::new(false))
    .unwrap();
    assert_eq!(local.price.to_bits(), outcome(&first)[1].1);

    // A repeated grid point: distinct streams, reproduced on resubmission.
    let sweep =
        json!({"seed": base, "spec": {"runs": 4000}, "sweep": {"exercise": [25, 35]}, "repeat": 3});
    let first = priced(t, &sweep).await;
    let outcomes = outcome(&first);
    let expected: Vec<u64> = (0..6).map(|i| job_seed(base, i)).collect();
    assert_eq!(seeds_of(&first), expected);
    for point in outcomes.chunks(3) {
        assert!(
            point[0].1 != point[1].1 && point[1].1 != point[2].1 && point[0].1 != point[2].1,
            "a point's repeats price different paths: {point:?}"
        );
    }
    let again = priced(t, &sweep).await;
    assert_eq!(outcome(&again), outcomes);
    let other = priced(t, &json!({"seed": base + 1, "spec": {"runs": 4000}, "sweep": {"exercise": [25, 35]}, "repeat": 3})).await;
    let shared = seeds_of(&other)
        .iter()
        .filter(|s| expected.contains(s))
        .count();
    assert_eq!(shared, 0, "the next base shares no seed");
}
on_both!(
    base_seed,
    a_base_seed_gives_every_job_its_own_reproducible_stream
);

async fn base_seeds_that_cannot_apply_are_refused(t: &TestApp) {
    let max = mcq_kernel::MAX_SEED;
    let cases = [
        (json!({"seed": max + 1, "jobs": [{}]}), "/seed"),
        (
            json!({"seed": 1, "spec": {"seed": 2}, "sweep": {"exercise": [25]}}),
            "/seed",
        ),
        (json!({"seed": 1, "sweep": {"seed": [2, 3]}}), "/seed"),
        (
            json!({"spec": {"seed": 2}, "sweep": {"exercise": [25]}, "repeat": 2}),
            "/spec/seed",
        ),
        (
            json!({"sweep": {"seed": [2, 3]}, "repeat": 2}),
            "/sweep/seed",
        ),
    ];
    for (body, pointer) in cases {
        let answer = t.post_json("/v1/batches", &body).await;
        answer.assert_problem(422, "/problems/invalid-spec");
        assert_eq!(answer.pointers(), [pointer], "{body}");
    }
    let answer = t
        .post_json("/v1/batches", &json!({"seed": 1.5, "jobs": [{}]}))
        .await;
    answer.assert_problem(400, "/problems/malformed-request");
    // The largest seed is a base like any other.
    let answer = t
        .post_json("/v1/batches", &json!({"seed": max, "jobs": [{}, {}]}))
        .await;
    assert_eq!(answer.status, 202, "{:?}", answer.body);
    assert_eq!(t.jobs_in_database().await, 2);
}
on_both!(base_seed_refusals, base_seeds_that_cannot_apply_are_refused);
