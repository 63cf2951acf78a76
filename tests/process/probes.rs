//! `mcq worker --http-listen`: the worker answers `/healthz` as soon as it
//! runs, and `/readyz` only once the schema is there and it is registered;
//! on both backends.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use mcq_queue::{QueueConfig, Store};
use mcq_tests::{McqProcess, TempDir};
use serde_json::{Value, json};

/// Waits for the worker's log to name the probes' address.
fn probes_url(worker: &McqProcess) -> anyhow::Result<String> {
    let start = Instant::now();
    loop {
        let log = worker.log_text();
        if let Some(rest) = log.split("probes listening on ").nth(1) {
            let url: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
            return Ok(url);
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!(
                "the worker never logged its probes' address\n{}",
                worker.logs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Status, content type and JSON body of `GET url`.
async fn get(client: &reqwest::Client, url: &str) -> anyhow::Result<(u16, String, Value)> {
    let response = client
        .get(url)
        .send()
        .await
        .with_context(|| format!("GET {url}"))?;
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response
        .json()
        .await
        .with_context(|| format!("JSON of GET {url}"))?;
    Ok((status, content_type, body))
}

/// Polls `GET url` until `done` holds for an answer, checking each answer
/// before that with `meanwhile`.
async fn poll(
    client: &reqwest::Client,
    url: &str,
    worker: &McqProcess,
    what: &str,
    done: impl Fn(u16, &Value) -> bool,
    meanwhile: impl Fn(u16, &str, &Value),
) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        let (status, content_type, body) = get(client, url).await?;
        if done(status, &body) {
            return Ok(());
        }
        meanwhile(status, &content_type, &body);
        if start.elapsed() > Duration::from_secs(60) {
            bail!(
                "waited in vain for {what}: last {status} {body}\n{}",
                worker.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn probes_follow_the_schema_and_the_registration(url: &str) -> anyhow::Result<()> {
    let logs = TempDir::new("mcq-process-probes")?;
    // Nobody has migrated the database: the worker waits to register.
    let mut worker = McqProcess::worker(
        "worker",
        url,
        &["--concurrency", "1", "--http-listen", "127.0.0.1:0"],
        logs.path(),
    )?;
    let base = probes_url(&worker)?;
    let client = reqwest::Client::new();

    let (status, _, body) = get(&client, &format!("{base}/healthz")).await?;
    assert_eq!(
        (status, body),
        (200, json!({"status": "ok"})),
        "{}",
        worker.logs()
    );
    let not_ready = |status: u16, content_type: &str, body: &Value| {
        assert_eq!(status, 503, "{body}");
        assert_eq!(content_type, "application/problem+json", "{body}");
        assert_eq!(body["type"], "/problems/unavailable", "{body}");
    };
    poll(
        &client,
        &format!("{base}/readyz"),
        &worker,
        "a 503 naming the missing schema",
        |status, body| {
            status == 503
                && body["detail"]
                    .as_str()
                    .is_some_and(|d| d.contains("mcq migrate"))
        },
        not_ready,
    )
    .await?;

    let store = Store::connect(url, QueueConfig::default()).await?;
    store.migrate().await?;
    poll(
        &client,
        &format!("{base}/readyz"),
        &worker,
        "readiness after the migration",
        |status, body| status == 200 && body == &json!({"status": "ready"}),
        not_ready,
    )
    .await?;
    assert_eq!(store.workers().await?.len(), 1, "ready means registered");

    worker.terminate()?;
    let status = worker.wait_timeout(Duration::from_secs(30))?;
    assert!(
        status.success(),
        "exit status {status:?}\n{}",
        worker.logs()
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_probes_on_postgres() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    probes_follow_the_schema_and_the_registration(&db.url).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_probes_on_sqlite() -> anyhow::Result<()> {
    let dir = TempDir::new("mcq-process-probes-db")?;
    let url = format!("sqlite:{}", dir.path().join("queue.sqlite").display());
    probes_follow_the_schema_and_the_registration(&url).await
}
