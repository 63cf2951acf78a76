//! Talking to `mcq serve` over HTTP during a fault: one answer with its
//! status, type, body and how long it took, and waiting until it is good.

use std::time::{Duration, Instant};

use anyhow::bail;
use mcq_tests::McqProcess;
use serde_json::Value;

/// One answer of the API.
#[derive(Debug)]
pub(crate) struct Answer {
    /// HTTP status; 0 when no answer came (connection refused, timeout).
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) body: Value,
    pub(crate) took: Duration,
}

/// `GET url`, never failing: a transport error is an answer of status 0.
pub(crate) async fn get(client: &reqwest::Client, url: &str) -> Answer {
    let start = Instant::now();
    let Ok(response) = client
        .get(url)
        .timeout(Duration::from_secs(60))
        .send()
        .await
    else {
        return Answer {
            status: 0,
            content_type: String::new(),
            body: Value::Null,
            took: start.elapsed(),
        };
    };
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = response.json().await.unwrap_or(Value::Null);
    Answer {
        status,
        content_type,
        body,
        took: start.elapsed(),
    }
}

/// Asserts a 503 problem document of type `unavailable`.
pub(crate) fn assert_unavailable(answer: &Answer, server: &McqProcess) {
    assert_eq!(
        (answer.status, answer.content_type.as_str()),
        (503, "application/problem+json"),
        "{answer:?}\n{}",
        server.logs()
    );
    assert_eq!(answer.body["type"], "/problems/unavailable", "{answer:?}");
}

/// Polls `GET url` until it answers 200, for up to `bound`; returns how
/// long that took.
pub(crate) async fn until_ok(
    client: &reqwest::Client,
    url: &str,
    bound: Duration,
    server: &McqProcess,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        let answer = get(client, url).await;
        if answer.status == 200 {
            return Ok(start.elapsed());
        }
        if start.elapsed() > bound {
            bail!(
                "GET {url} did not answer 200 within {bound:?}: last {answer:?}\n{}",
                server.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
