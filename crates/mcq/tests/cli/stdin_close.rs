//! `--stop-on-stdin-close`: a worker or a server whose standard input is a
//! pipe stops, as on SIGTERM, when the other end closes, which is what
//! happens to children whose parent dies in any way.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStderr, Stdio};
use std::time::{Duration, Instant};

use super::mcq;

/// Reads `stderr` until a line contains `needle`; everything read so far
/// otherwise (the process ended first).
fn read_until(stderr: &mut BufReader<ChildStderr>, needle: &str) -> Result<String, String> {
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        match stderr.read_line(&mut line) {
            Ok(0) | Err(_) => return Err(seen),
            Ok(_) => {
                seen.push_str(&line);
                if line.contains(needle) {
                    return Ok(seen);
                }
            }
        }
    }
}

/// Closes the child's standard input and waits up to a minute for its
/// exit; its status and the rest of its log.
fn close_and_wait(child: &mut Child, stderr: &mut BufReader<ChildStderr>) -> (bool, String) {
    drop(child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("polling the child") {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
            return (status.success(), rest);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running a minute after its standard input closed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_worker_stops_when_its_input_closes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite:{}", dir.path().join("q.sqlite").display());
    let mut child = mcq()
        .args(["worker", "--database-url", &url, "--migrate"])
        .arg("--stop-on-stdin-close")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcq worker");
    let mut stderr = BufReader::new(child.stderr.take().expect("the worker's stderr"));
    if let Err(log) = read_until(&mut stderr, "worker registered") {
        let _ = child.kill();
        panic!("the worker never registered:\n{log}");
    }
    // Still running while the input stays open.
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        child.try_wait().expect("polling the worker").is_none(),
        "the worker exited with its input open"
    );
    let (ok, log) = close_and_wait(&mut child, &mut stderr);
    assert!(ok, "the worker did not exit 0:\n{log}");
    assert!(log.contains("standard input closed"), "{log}");
    assert!(log.contains("worker exited"), "{log}");
}

#[test]
fn a_server_stops_when_its_input_closes() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let url = format!("sqlite:{}", dir.path().join("q.sqlite").display());
    let mut child = mcq()
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url", &url])
        .args(["--embedded-workers", "1", "--stop-on-stdin-close"])
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcq serve");
    let mut stdout = BufReader::new(child.stdout.take().expect("the server's stdout"));
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .expect("reading the server's stdout");
    assert!(line.contains("listening on"), "{line:?}");
    let mut stderr = BufReader::new(child.stderr.take().expect("the server's stderr"));
    let (ok, log) = close_and_wait(&mut child, &mut stderr);
    assert!(ok, "the server did not exit 0:\n{log}");
    assert!(log.contains("standard input closed"), "{log}");
}
