//! The logs as an operator reads them: JSON lines that tie each event to
//! its request (the id the client saw in `x-request-id`) and to its task's
//! job and batch; plain text in a file; the worker's counters while it
//! runs; and never a key or a database password, in either format.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use mcq_tests::{McqProcess, TempDir};
use serde_json::Value;

/// The process's log as JSON objects, one per line; every line must be one.
fn json_lines(process: &McqProcess) -> Vec<Value> {
    process
        .log_text()
        .lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|err| panic!("not a JSON line ({err}): {line:?}"))
        })
        .collect()
}

/// Field `field` of the span `name` an event happened in, as text.
fn span_field(event: &Value, name: &str, field: &str) -> Option<String> {
    let span = event["spans"]
        .as_array()?
        .iter()
        .find(|span| span["name"] == name)?;
    match &span[field] {
        Value::String(text) => Some(text.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

fn message(event: &Value) -> &str {
    event["fields"]["message"].as_str().unwrap_or("")
}

/// Stops `process` with SIGTERM and waits for a clean exit, so that its
/// log is complete (no line half-written) when it is read.
fn stop(process: &mut McqProcess) -> anyhow::Result<()> {
    process.terminate()?;
    let status = process.wait_timeout(Duration::from_secs(60))?;
    if !status.success() {
        bail!("exited with {status}\n{}", process.logs());
    }
    Ok(())
}

/// Polls `done` every 50 ms for up to a minute.
fn eventually(what: &str, mut done: impl FnMut() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        if Instant::now() > deadline {
            bail!("{what}: not within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// A small batch submitted over HTTP with `request_id` (and `key`, if
/// any); the response's echoed id, the batch id and the job ids.
async fn submit(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
    request_id: &str,
) -> anyhow::Result<(String, String, Vec<String>)> {
    let mut request = http
        .post(format!("{base}/v1/batches"))
        .header("x-request-id", request_id)
        .header("content-type", "application/json")
        .body(r#"{"jobs": [{"runs": 2000, "seed": 1}, {"runs": 2000, "seed": 2}]}"#);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.context("POST /v1/batches")?;
    if response.status() != reqwest::StatusCode::ACCEPTED {
        bail!("submit: {}", response.status());
    }
    let echoed = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body: Value = response.json().await.context("the accepted batch")?;
    let batch = body["id"].as_str().context("a batch id")?.to_owned();
    let jobs = body["job_ids"]
        .as_array()
        .context("job ids")?
        .iter()
        .filter_map(|id| id.as_str().map(str::to_owned))
        .collect();
    Ok((echoed, batch, jobs))
}

/// Waits (long polls) until batch `id` is done.
async fn wait_done(
    http: &reqwest::Client,
    base: &str,
    key: Option<&str>,
    id: &str,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let mut request = http.get(format!("{base}/v1/batches/{id}?wait=10s"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let view: Value = request.send().await?.json().await?;
        if view["done"] == true {
            return Ok(());
        }
    }
    bail!("batch {id} not done within two minutes")
}

/// Every job's task was claimed, computed and recorded inside a span
/// naming the job and its batch.
fn assert_tasks_traced(events: &[Value], batch: &str, jobs: &[String], log: &str) {
    for job in jobs {
        for step in ["claimed", "computed", "recorded"] {
            assert!(
                events.iter().any(|e| message(e) == step
                    && span_field(e, "task", "job").as_deref() == Some(job.as_str())
                    && span_field(e, "task", "batch").as_deref() == Some(batch)
                    && span_field(e, "task", "attempt").as_deref() == Some("1")
                    && span_field(e, "worker", "worker").is_some()),
                "no {step:?} event of job {job} in batch {batch}:\n{log}"
            );
        }
    }
}

#[test]
fn json_lines_carry_the_request_id_and_each_tasks_job_and_batch() -> anyhow::Result<()> {
    let dir = TempDir::new("mcq-logs-json")?;
    let url = mcq_testdb::sqlite_url(dir.path());
    let (mut server, base) = McqProcess::server_with(
        "serve-json",
        &url,
        &["--log-format", "json", "--embedded-workers", "1"],
        &[("RUST_LOG", "info,mcq_worker=trace")],
        dir.path(),
    )?;
    let runtime = tokio::runtime::Runtime::new()?;
    let http = reqwest::Client::new();
    let (echoed, batch, jobs) = runtime.block_on(submit(&http, &base, None, "logs-test-submit"))?;
    assert_eq!(echoed, "logs-test-submit", "the client's id is echoed");
    runtime.block_on(wait_done(&http, &base, None, &batch))?;
    // A cancel logs its record from inside the handler.
    let cancelled = runtime.block_on(
        http.post(format!("{base}/v1/batches/{batch}/cancel"))
            .header("x-request-id", "logs-test-cancel")
            .header("content-type", "application/json")
            .send(),
    )?;
    assert!(cancelled.status().is_success(), "{}", cancelled.status());
    // Without an id of its own, a request gets one, echoed and logged.
    let health = runtime.block_on(http.get(format!("{base}/healthz")).send())?;
    let generated = health
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .context("an id for a request that sent none")?
        .to_owned();
    assert!(uuid::Uuid::parse_str(&generated).is_ok(), "{generated}");
    // A task's "recorded" line follows the store's answer, which the batch
    // may show as done first: wait for the lines before stopping.
    eventually("the tasks' records in the log", || {
        server.log_text().matches("\"recorded\"").count() >= jobs.len()
    })?;
    stop(&mut server)?;

    let log = server.log_text();
    let events = json_lines(&server);
    for event in &events {
        for key in ["timestamp", "level", "target", "fields"] {
            assert!(!event[key].is_null(), "no {key} in {event}");
        }
    }
    let of_request = |id: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|e| span_field(e, "request", "request_id").as_deref() == Some(id))
            .collect()
    };
    for (id, route) in [
        ("logs-test-submit", "/v1/batches"),
        ("logs-test-cancel", "/v1/batches/{id}/cancel"),
        (generated.as_str(), "/healthz"),
    ] {
        assert!(
            of_request(id)
                .iter()
                .any(|e| e["target"] == "mcq::access" && e["fields"]["route"] == route),
            "no access line of {route} with request id {id}:\n{log}"
        );
    }
    assert!(
        of_request("logs-test-cancel")
            .iter()
            .any(|e| e["target"] == "mcq::audit" && e["fields"]["id"] == batch.as_str()),
        "the cancel record carries its request's id:\n{log}"
    );
    assert_tasks_traced(&events, &batch, &jobs, &log);
    Ok(())
}

#[test]
fn a_worker_logs_its_counters_as_fields_while_it_runs_and_at_exit() -> anyhow::Result<()> {
    let dir = TempDir::new("mcq-logs-counters")?;
    let url = mcq_testdb::sqlite_url(dir.path());
    let (mut server, base) = McqProcess::server_with(
        "serve",
        &url,
        &["--embedded-workers", "0"],
        &[("RUST_LOG", "info"), ("MCQ_LOG_FORMAT", "text")],
        dir.path(),
    )?;
    let mut worker = McqProcess::spawn(
        "worker",
        &[
            "worker",
            "--database-url",
            &url,
            "--concurrency",
            "1",
            "--threads",
            "1",
            "--counters-interval",
            "1",
        ],
        &[("RUST_LOG", "info"), ("MCQ_LOG_FORMAT", "json")],
        dir.path(),
    )?;
    let runtime = tokio::runtime::Runtime::new()?;
    let http = reqwest::Client::new();
    let (_, batch, jobs) = runtime.block_on(submit(&http, &base, None, "counters"))?;
    runtime.block_on(wait_done(&http, &base, None, &batch))?;
    // The first line written after both completions counts them.
    let counted = |events: &[Value], message_is: &str| -> Option<Value> {
        events
            .iter()
            .filter(|e| message(e) == message_is)
            .find(|e| e["fields"]["completed"] == jobs.len())
            .cloned()
    };
    eventually("a counters line with both completions", || {
        let events: Vec<Value> = worker
            .log_text()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        counted(&events, "worker counters").is_some()
    })?;
    stop(&mut worker)?;
    stop(&mut server)?;

    let events = json_lines(&worker);
    let log = worker.log_text();
    let periodic = counted(&events, "worker counters").expect("seen above");
    let exit = counted(&events, "worker exited")
        .unwrap_or_else(|| panic!("no exit line counting both jobs:\n{log}"));
    for line in [&periodic, &exit] {
        let fields = &line["fields"];
        assert_eq!(fields["claimed"], jobs.len(), "{line}");
        assert_eq!(fields["failed"], 0, "{line}");
        assert_eq!(fields["retried"], 0, "{line}");
        assert!(fields["paths"].as_u64() >= Some(4000), "{line}");
        for rate in ["tasks_per_s", "paths_per_s"] {
            assert!(fields[rate].as_f64().is_some_and(|r| r >= 0.0), "{line}");
        }
        assert!(span_field(line, "worker", "worker").is_some(), "{line}");
    }
    assert!(
        !log.contains("WorkerReport"),
        "fields, not a Debug dump:\n{log}"
    );
    // The server's text log went to a file: no colour codes.
    let text = server.log_text();
    assert!(text.contains("mcq::access"), "{text}");
    assert!(!text.contains("\u{1b}["), "colour codes in a file:\n{text}");
    Ok(())
}

/// The secret part of a wrong key the server is sent.
const WRONG_SECRET: &str = "wrongwrongwrongwrongwrongwrong42";

#[test]
fn no_key_or_database_password_reaches_the_log_in_either_format() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Runtime::new()?;
    let Some(db) = runtime.block_on(mcq_testdb::postgres()) else {
        return Ok(());
    };
    const PASSWORD: &str = "pw-7f3a9c-never-logged";
    // The test cluster trusts local connections, so any password is
    // accepted: the URL carries one exactly as a deployment's would.
    let url = db
        .url
        .replacen("://postgres@", &format!("://postgres:{PASSWORD}@"), 1);
    assert!(url.contains(PASSWORD), "{url}");
    let dir = TempDir::new("mcq-logs-secrets")?;
    let mut created = McqProcess::spawn(
        "keys",
        &[
            "keys",
            "create",
            "--tenant",
            "alice",
            "--quiet",
            "--database-url",
            &url,
        ],
        &[("RUST_LOG", "debug")],
        dir.path(),
    )?;
    let status = created.wait_timeout(Duration::from_secs(60))?;
    assert!(status.success(), "{}", created.logs());
    let key = std::fs::read_to_string(dir.path().join("keys.out"))?
        .trim()
        .to_owned();
    let secret = key.rsplit('_').next().context("a key")?.to_owned();
    assert!(secret.len() >= 16, "{key}");
    let mut logs = vec![created];

    for format in ["text", "json"] {
        let envs = [
            // Everything the dependencies say too (sqlx's statements, hyper).
            ("RUST_LOG", "debug,mcq_worker=trace"),
            ("MCQ_LOG_FORMAT", format),
        ];
        let (mut server, base) =
            McqProcess::server_with(&format!("serve-{format}"), &url, &[], &envs, dir.path())?;
        let mut worker = McqProcess::spawn(
            &format!("worker-{format}"),
            &["worker", "--database-url", &url, "--concurrency", "1"],
            &envs,
            dir.path(),
        )?;
        let http = reqwest::Client::new();
        let (_, batch, jobs) = runtime.block_on(submit(
            &http,
            &base,
            Some(&key),
            &format!("secret-{format}"),
        ))?;
        runtime.block_on(wait_done(&http, &base, Some(&key), &batch))?;
        // A wrong key and a missing one are refused, and logged as such.
        let wrong = format!(
            "{}_{WRONG_SECRET}",
            key.rsplit_once('_').context("a key")?.0
        );
        for bearer in [Some(wrong.as_str()), None] {
            let mut request = http.get(format!("{base}/v1/batches/{batch}"));
            if let Some(bearer) = bearer {
                request = request.bearer_auth(bearer);
            }
            let status = runtime.block_on(request.send())?.status();
            assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED);
        }
        eventually("the worker's records in the log", || {
            worker.log_text().matches("recorded").count() >= jobs.len()
        })?;
        stop(&mut worker)?;
        stop(&mut server)?;
        if format == "json" {
            let events = json_lines(&worker);
            assert_tasks_traced(&events, &batch, &jobs, &worker.log_text());
            json_lines(&server);
        } else {
            for process in [&server, &worker] {
                let text = process.log_text();
                assert!(!text.contains("\u{1b}["), "colour codes:\n{text}");
            }
        }
        logs.push(server);
        logs.push(worker);
    }

    // Where a URL is shown, its password is masked: an unreachable
    // database (waited for by a worker, an error for a server) and a
    // malformed URL.
    let unreachable = format!("postgres://postgres:{PASSWORD}@127.0.0.1:1/mcq");
    let malformed = format!("postgres://postgres:{PASSWORD}@127.0.0.1:notaport/mcq");
    let mut waiting = McqProcess::spawn(
        "worker-unreachable",
        &["worker", "--database-url", &unreachable],
        &[("RUST_LOG", "info")],
        dir.path(),
    )?;
    eventually("a worker waiting for its database", || {
        waiting.log_text().contains("database unreachable")
    })?;
    stop(&mut waiting)?;
    assert!(
        waiting
            .log_text()
            .contains("postgres://postgres:***@127.0.0.1:1/mcq"),
        "{}",
        waiting.logs()
    );
    logs.push(waiting);
    for (name, bad) in [
        ("serve-unreachable", &unreachable),
        ("serve-malformed", &malformed),
    ] {
        let mut refused = McqProcess::spawn(
            name,
            &["serve", "--listen", "127.0.0.1:0", "--database-url", bad],
            &[("RUST_LOG", "debug")],
            dir.path(),
        )?;
        let status = refused.wait_timeout(Duration::from_secs(60))?;
        assert!(!status.success(), "{}", refused.logs());
        assert!(
            refused.log_text().contains("postgres:***@"),
            "{}",
            refused.logs()
        );
        logs.push(refused);
    }

    for process in &logs {
        let text = process.log_text();
        for hidden in [PASSWORD, secret.as_str(), key.as_str(), WRONG_SECRET] {
            assert!(
                !text.contains(hidden),
                "{hidden:?} reached a log\n{}",
                process.logs()
            );
        }
    }
    Ok(())
}
