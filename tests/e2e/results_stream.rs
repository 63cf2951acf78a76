//! A large batch's results table read through a real `mcq serve`: the
//! server streams it a page of jobs at a time, so its memory grows by a
//! bounded amount however large the batch, measured from /proc.
//!
//! The batch is a sweep of tiny jobs (2 paths each) computed by the
//! server's embedded workers. `MCQ_STREAM_JOBS` sets its size (default
//! [`JOBS`]; docs/api.md gives the figure for 100,000 jobs).

use std::time::{Duration, Instant};

use mcq_client::{Axis, BatchRequest, Client, Sweep};
use mcq_kernel::Spec;
use serde_json::Value;

use super::server::{Server, TempDir};

/// Jobs in the batch by default (about 11 MiB of CSV, 25 s here); at
/// 100,000 jobs (28 MiB) the table alone is larger than [`GROWTH_BOUND`].
const JOBS: u64 = 40_000;

/// Most the server's resident memory may grow while it streams the
/// table: a page of 1,000 jobs read and written out (a few MiB), plus
/// what the database connections cache and the allocator keeps per
/// thread, which depends on how many connections and threads the reads
/// happen to use, not on the batch's size.
const GROWTH_BOUND: u64 = 24 * 1024 * 1024;

/// From this size on, the table's text alone would break the bound.
const LARGER_THAN_BOUND: u64 = 100_000;

/// Strikes in the sweep; each is repeated to make up the batch.
const STRIKES: u64 = 100;

/// Resident and peak resident memory (`VmRSS`, `VmHWM`) of process `pid`,
/// in bytes.
fn memory(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    let field = |name: &str| {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| panic!("{name} missing from /proc/{pid}/status"))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Resets the peak resident memory of `pid` to its current value, so that
/// `VmHWM` afterwards is the peak since now.
fn reset_peak(pid: u32) {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").expect("reset the peak RSS");
}

/// Streams `url` and counts its bytes and lines, keeping none of it.
async fn stream(http: &reqwest::Client, url: &str) -> (String, u64, u64) {
    let mut response = http
        .get(url)
        .header("accept", "text/csv")
        .send()
        .await
        .expect("request");
    assert_eq!(response.status(), 200);
    let (mut bytes, mut lines) = (0u64, 0u64);
    let mut header = Vec::new();
    while let Some(chunk) = response.chunk().await.expect("chunk") {
        if lines == 0 {
            header.extend(chunk.iter().take_while(|&&b| b != b'\r'));
        }
        bytes += chunk.len() as u64;
        lines += chunk.iter().filter(|&&b| b == b'\n').count() as u64;
    }
    (String::from_utf8(header).expect("utf-8"), bytes, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_tables_stream_keeps_the_servers_memory_bounded() {
    let jobs: u64 = std::env::var("MCQ_STREAM_JOBS")
        .ok()
        .map(|n| n.parse().expect("MCQ_STREAM_JOBS is a number"))
        .unwrap_or(JOBS);
    let dir = TempDir::new();
    let server = Server::start(&dir.sqlite_url(), &["--embedded-workers", "2"]);
    let client = Client::new(&server.base_url).expect("client");
    let strikes: Vec<Value> = (0..STRIKES)
        .map(|i| Value::from(20.0 + i as f64 * 0.125))
        .collect();
    let request = BatchRequest {
        spec: Some(Spec {
            runs: Some(2),
            ..Spec::default()
        }),
        sweep: Some(Sweep {
            axes: vec![Axis {
                field: "exercise".into(),
                values: strikes,
            }],
        }),
        repeat: Some(u32::try_from(jobs / STRIKES).expect("repeat")),
        ..BatchRequest::default()
    };
    let accepted = client.submit_batch(&request, None).await.expect("submit");
    let started = Instant::now();
    let view = tokio::time::timeout(
        Duration::from_secs(600),
        client.wait_for_batch(accepted.id, Duration::from_secs(5), |_| {}),
    )
    .await
    .expect("the batch finishes within 10 minutes")
    .expect("poll");
    assert_eq!(view.counts.succeeded, jobs, "{view:#?}");
    eprintln!(
        "results stream: {jobs} jobs computed in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // Warm the server's pools and caches on a small read first, so that
    // what grows afterwards is the stream's own memory.
    let http = reqwest::Client::new();
    let base = format!("{}/v1/batches/{}/results", server.base_url, accepted.id);
    let page = http
        .get(format!("{base}?format=json&limit=10"))
        .send()
        .await
        .expect("page");
    assert_eq!(page.status(), 200);
    let pid = server.pid();
    reset_peak(pid);
    let (before, _) = memory(pid);
    let started = Instant::now();
    let (header, bytes, lines) = stream(&http, &base).await;
    let (_, peak) = memory(pid);
    let growth = peak.saturating_sub(before);
    eprintln!(
        "results stream: {bytes} bytes of CSV ({lines} lines) in {:.2} s; \
         server RSS {:.1} MiB before, peak {:.1} MiB (growth {:.1} MiB, bound {:.0} MiB)",
        started.elapsed().as_secs_f64(),
        before as f64 / 1048576.0,
        peak as f64 / 1048576.0,
        growth as f64 / 1048576.0,
        GROWTH_BOUND as f64 / 1048576.0,
    );
    assert!(
        header.starts_with("job_id,state,exercise,price,std_error,"),
        "{header}"
    );
    assert_eq!(lines, jobs + 1, "a header and one line per job");
    if jobs >= LARGER_THAN_BOUND {
        assert!(
            bytes > GROWTH_BOUND,
            "the table ({bytes} bytes) must be larger than the bound for the test to mean anything"
        );
    }
    assert!(
        growth < GROWTH_BOUND,
        "the server's memory grew by {growth} bytes while streaming {bytes} bytes of CSV"
    );
}
