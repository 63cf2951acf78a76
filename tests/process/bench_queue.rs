//! `mcq bench queue` as a user runs it: a small configuration against a
//! real PostgreSQL and real worker processes. Its lines must report every
//! job succeeded, and a run must leave no directory behind unless asked to
//! keep the workers' logs.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mcq_tests::{TempDir, mcq_bin};

/// Runs `mcq bench queue` with `TMPDIR` set to `tmp`; returns stdout.
fn bench_queue(url: &str, tmp: &Path, extra: &[&str]) -> String {
    let out = Command::new(mcq_bin())
        .args(["bench", "queue", "--database-url", url])
        .args(["--jobs", "300", "--latency-samples", "5", "--no-recovery"])
        .args(extra)
        .env("TMPDIR", tmp)
        .output()
        .expect("run mcq bench queue");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "mcq bench queue failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The number just before `unit` on the line starting with `label`.
fn number_before(out: &str, label: &str, unit: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no `{label}` line in:\n{out}"));
    let head = &line[..line
        .find(unit)
        .unwrap_or_else(|| panic!("no `{unit}` in {line}"))];
    head.split_whitespace()
        .last()
        .and_then(|n| n.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no number before `{unit}` in {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_queue_reports_every_job_and_cleans_up() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let tmp = TempDir::new("mcq-process-bench-queue")?;
    let out = bench_queue(&db.url, tmp.path(), &[]);
    assert!(number_before(&out, "enqueue:", "jobs/s") > 0.0, "{out}");
    assert!(number_before(&out, "burn-down:", "jobs/s") > 0.0, "{out}");
    assert_eq!(
        number_before(&out, "burn-down:", ", failed"),
        300.0,
        "{out}"
    );
    assert!(out.contains("failed 0"), "{out}");
    let p50 = number_before(&out, "pickup:", "ms, p90");
    assert!(p50 > 0.0, "{out}");
    let left: Vec<_> = std::fs::read_dir(tmp.path())?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    assert!(left.is_empty(), "a successful run left {left:?} behind");

    // Asked to keep them, the workers' logs stay where the user said.
    let kept = tmp.path().join("logs");
    let kept_arg = kept.to_str().expect("a UTF-8 path");
    bench_queue(&db.url, tmp.path(), &["--logs", kept_arg]);
    for worker in ["worker0.log", "worker1.log"] {
        assert!(
            kept.join(worker).is_file(),
            "{worker} missing in {kept_arg}"
        );
    }
    Ok(())
}

/// Processes whose parent is `parent`, from `/proc`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat_fields(pid).is_some_and(|(_, ppid)| ppid == parent))
        .collect()
}

/// State and parent of a process, from `/proc/PID/stat` (the fields after
/// the command's closing parenthesis).
fn stat_fields(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?.chars().next()?;
    let ppid = rest.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Running, not ended (an ended child nobody reaped yet is a zombie).
fn alive(pid: u32) -> bool {
    stat_fields(pid).is_some_and(|(state, _)| state != 'Z' && state != 'X')
}

/// A benchmark killed outright, so that none of its own code runs, leaves
/// no worker behind to join a later run on the same database: each worker
/// reads a pipe the benchmark held, and stops when it closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_bench_leaves_no_worker_behind() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let tmp = TempDir::new("mcq-process-bench-queue-kill")?;
    let mut bench = Command::new(mcq_bin())
        .args(["bench", "queue", "--database-url", &db.url])
        .args([
            "--jobs",
            "200000",
            "--latency-samples",
            "5",
            "--no-recovery",
        ])
        .env("TMPDIR", tmp.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let workers = loop {
        let workers = children_of(bench.id());
        if workers.len() >= 2 {
            break workers;
        }
        if let Some(status) = bench.try_wait()? {
            anyhow::bail!("the benchmark exited ({status}) before it started its workers");
        }
        if Instant::now() > deadline {
            let _ = bench.kill();
            anyhow::bail!("the benchmark started no workers within two minutes");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    bench.kill()?;
    bench.wait()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while workers.iter().any(|&pid| alive(pid)) {
        if Instant::now() > deadline {
            for pid in &workers {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
            }
            panic!("workers {workers:?} still ran a minute after their benchmark was killed");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
