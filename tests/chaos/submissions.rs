//! The API SIGKILLed in the middle of large submissions: each batch is
//! stored whole or not at all, and the client's retry with the same
//! `Idempotency-Key` against a fresh server leaves exactly one batch.

use std::time::Duration;

use anyhow::Context as _;
use mcq_kernel::Spec;
use mcq_tests::{McqProcess, TempDir};
use serde_json::json;
use uuid::Uuid;

use super::outcome;
use crate::process::batch;

/// Jobs per submission: large enough that validating and storing it takes
/// a while, so that kills land before, during and after the insert.
const JOBS: usize = 5_000;
/// When each round's SIGKILL lands, as a fraction of the time a whole
/// submission took: while the body arrives or is validated, while the
/// batch is stored, and after the answer.
const KILL_AT: [f64; 5] = [0.1, 0.5, 0.8, 0.95, 1.5];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_api_stores_whole_batches_once() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-chaos-submissions")?;
    let store = batch::store(&db.url, 16).await?;
    let client = reqwest::Client::new();
    let mut batches = Vec::new();
    // A submission nobody kills, to time one.
    let (calibration, specs) = body(JOBS)?;
    let (_server, base) =
        McqProcess::server("server", &db.url, &["--embedded-workers", "0"], logs.path())?;
    let start = std::time::Instant::now();
    let id = post(
        client.clone(),
        base,
        "chaos-calibration".into(),
        calibration,
    )
    .await?
    .context("the calibration submission is accepted")?;
    let whole = start.elapsed();
    batches.push((id, specs));

    for (round, fraction) in KILL_AT.into_iter().enumerate() {
        let first_seed = 100_000 + u64::try_from(round * JOBS)?;
        let specs: Vec<Spec> = (first_seed..first_seed + JOBS as u64)
            .map(|seed| Spec {
                runs: Some(500),
                seed: Some(seed),
                ..Spec::default()
            })
            .collect();
        let label = format!("chaos round {round}");
        let body = serde_json::to_vec(&json!({ "label": label, "jobs": specs }))?;
        let key = format!("chaos-{round}-{}", Uuid::new_v4().simple());

        let (mut server, base) = McqProcess::server(
            &format!("server{round}"),
            &db.url,
            &["--embedded-workers", "0"],
            logs.path(),
        )?;
        let sent = tokio::spawn(post(client.clone(), base, key.clone(), body.clone()));
        let delay = whole.mul_f64(fraction);
        tokio::time::sleep(delay).await;
        server.kill()?;
        let first = sent.await?;

        // All or nothing, before any retry.
        let stored = stored_batches(&db.url, &label).await?;
        assert!(stored.len() <= 1, "round {round}: {stored:?}");
        if let Some(&id) = stored.first() {
            let view = batch::view(&store, id).await?;
            assert_eq!(view.total, JOBS as u64, "round {round}: {view:?}");
            assert_eq!(view.counts.queued, JOBS as u64, "round {round}: {view:?}");
        }
        if let Ok(Some(id)) = &first {
            assert_eq!(stored, [*id], "an accepted batch is stored");
        }

        let (_server, base) = McqProcess::server(
            &format!("server{round}-again"),
            &db.url,
            &["--embedded-workers", "0"],
            logs.path(),
        )?;
        let retried = post(client.clone(), base, key, body)
            .await?
            .context("the retry is accepted")?;
        let after = stored_batches(&db.url, &label).await?;
        assert_eq!(after, [retried], "round {round}: exactly one batch");
        if let Some(&id) = stored.first() {
            assert_eq!(id, retried, "the retry names the stored batch");
        }
        eprintln!(
            "chaos submissions round {round}: a whole submission took {} ms, killed {} ms \
             after sending; first attempt {}; stored before the retry: {}",
            whole.as_millis(),
            delay.as_millis(),
            match &first {
                Ok(Some(_)) => "accepted",
                Ok(None) => "answered without a batch",
                Err(_) => "cut off",
            },
            stored.len()
        );
        batches.push((retried, specs));
    }

    let worker = McqProcess::worker("worker", &db.url, &["--concurrency", "2"], logs.path())?;
    for (id, _) in &batches {
        batch::wait_until(
            &store,
            *id,
            Duration::from_secs(180),
            &[&worker],
            "the batches to finish",
            |v| v.done,
        )
        .await?;
    }
    // The database holds these batches and nothing else.
    outcome::assert_all_exactly_once(&db.url, &store, &batches, &[&worker]).await?;
    Ok(())
}

/// A batch request of `jobs` tiny jobs with seeds of their own, as JSON,
/// and its specs.
fn body(jobs: usize) -> anyhow::Result<(Vec<u8>, Vec<Spec>)> {
    let specs: Vec<Spec> = (0..jobs as u64)
        .map(|seed| Spec {
            runs: Some(500),
            seed: Some(90_000 + seed),
            ..Spec::default()
        })
        .collect();
    let body = serde_json::to_vec(&json!({ "label": "chaos calibration", "jobs": specs }))?;
    Ok((body, specs))
}

/// `POST /v1/batches` with the key: `Ok(Some(id))` when accepted,
/// `Ok(None)` for another answer, `Err` when the connection was cut.
async fn post(
    client: reqwest::Client,
    base: String,
    key: String,
    body: Vec<u8>,
) -> anyhow::Result<Option<Uuid>> {
    let response = client
        .post(format!("{base}/v1/batches"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .body(body)
        .timeout(Duration::from_secs(120))
        .send()
        .await?;
    if response.status() != reqwest::StatusCode::ACCEPTED {
        return Ok(None);
    }
    let accepted: serde_json::Value = response.json().await?;
    let id = accepted["id"]
        .as_str()
        .context("an accepted batch has an id")?;
    Ok(Some(id.parse()?))
}

/// Ids of the stored batches with this label.
async fn stored_batches(url: &str, label: &str) -> anyhow::Result<Vec<Uuid>> {
    let pool = sqlx::PgPool::connect(url).await?;
    let ids = sqlx::query_scalar("SELECT id FROM batches WHERE label = $1 ORDER BY id")
        .bind(label)
        .fetch_all(&pool)
        .await?;
    pool.close().await;
    Ok(ids)
}
