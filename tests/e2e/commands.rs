//! The client commands as a user runs them: `submit`, `status`, `demo`, and
//! `serve`'s graceful shutdown.

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::server::{Server, TempDir, mcq};

fn run(args: &[&str]) -> (bool, String, String) {
    let out = mcq().args(args).output().expect("run mcq");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn submit_wait_status_and_server_errors() {
    let dir = TempDir::new();
    let server = Server::start(&dir.sqlite_url(), &["--embedded-workers", "1"]);
    let url = server.base_url.as_str();

    let (ok, out, err) = run(&[
        "submit", "--server", url, "--runs", "100000", "--count", "3", "--wait", "--json",
    ]);
    assert!(ok, "{out}\n{err}");
    let view: serde_json::Value = serde_json::from_str(&out).expect("--json prints the batch");
    assert_eq!(view["counts"]["succeeded"], 3, "{view:#}");
    let id = view["id"].as_str().unwrap().to_owned();

    let (ok, out, err) = run(&["status", "--server", url, &id]);
    assert!(ok, "{err}");
    for word in ["mean", "stddev", "std error", "makespan", "compute total"] {
        assert!(out.contains(word), "status table lacks {word}:\n{out}");
    }

    // The server's problem reaches the user with its pointer.
    let (ok, out, err) = run(&["submit", "--server", url, "--down", "2"]);
    assert!(!ok, "an invalid spec must fail: {out}");
    assert!(err.contains("/down"), "{err}");

    let csv = dir.0.join("specs.csv");
    std::fs::write(&csv, "runs,option,seed\n100000,call,1\n100000,put,2\n").unwrap();
    let (ok, out, err) = run(&[
        "submit",
        "--server",
        url,
        "--file",
        csv.to_str().unwrap(),
        "--wait",
    ]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("2 succeeded"), "{out}");

    let (ok, _, err) = run(&[
        "status",
        "--server",
        url,
        "00000000-0000-0000-0000-000000000000",
    ]);
    assert!(!ok && err.contains("no job or batch"), "{err}");
}

#[test]
fn serve_stops_gracefully_on_sigterm() {
    let dir = TempDir::new();
    let mut server = Server::start(&dir.sqlite_url(), &["--embedded-workers", "1"]);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .stdout(Stdio::null())
        .status()
        .expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(exit) = server.process.0.try_wait().expect("wait") {
            assert!(exit.success(), "mcq serve exited with {exit}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "mcq serve did not stop after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn demo_runs_the_experiment_and_cleans_up() {
    let (ok, out, err) = run(&["demo", "--calls", "4", "--runs", "200000"]);
    assert!(ok, "{out}\n{err}");
    assert!(out.contains("bit for bit: 4 of 4"), "{out}");
    assert!(out.contains("local loop"), "{out}");
    let server_line = out
        .lines()
        .find(|l| l.contains("mcq demo: server on"))
        .expect("server line");
    assert!(server_line.contains("http://127.0.0.1:"), "{server_line}");
    let dir_line = out
        .lines()
        .find(|l| l.starts_with("mcq demo: database in "))
        .expect("database line");
    let dir = dir_line
        .trim_start_matches("mcq demo: database in ")
        .trim_end_matches(" (removed at the end)");
    assert!(
        !std::path::Path::new(dir).exists(),
        "the demo left {dir} behind"
    );
}
