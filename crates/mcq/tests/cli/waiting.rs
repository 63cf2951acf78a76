//! `submit` and `status` against a real server: ids for scripts, the id
//! before the wait, and exit codes that say whether the work succeeded.

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;

use uuid::Uuid;

use super::mcq;
use super::server::Server;

#[test]
fn quiet_prints_only_the_id_that_status_takes() {
    let server = Server::start();
    let (code, out, err) = server.run(&["submit", "--quiet", "--count", "2", "--runs", "1e4"]);
    assert_eq!(code, Some(0), "{err}");
    let id = out.trim();
    assert!(Uuid::parse_str(id).is_ok(), "only the batch id: {out:?}");
    let (code, out, err) = server.run(&["status", id, "--wait"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("2 succeeded"), "{out}");
    // Every duration of the table in the same unit.
    for row in ["makespan", "compute total"] {
        let line = out.lines().find(|l| l.contains(row)).expect(row);
        assert!(line.trim_end().ends_with(" s"), "{line}");
    }

    let (code, out, err) = server.run(&["submit", "-q", "--runs", "1_000", "--wait"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        Uuid::parse_str(out.trim()).is_ok(),
        "a job's id alone: {out:?}"
    );
    let (code, out, _) = server.run(&["status", out.trim()]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("succeeded") && out.contains("compute"),
        "{out}"
    );
}

#[test]
fn wait_prints_the_id_first_and_cancelled_work_exits_1() {
    let server = Server::start();
    // Long jobs: the batch is still running when it is cancelled.
    let mut child = mcq()
        .args(["submit", "--count", "2", "--runs", "1e10", "--wait"])
        .env("MCQ_SERVER", &server.url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mcq submit --wait");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("read the first line");
    let (id, rest) = first.split_once(':').expect("ID: what was queued");
    assert_eq!(rest.trim(), "2 jobs queued", "{first}");
    let id = Uuid::parse_str(id).expect("the batch id comes first");

    let (runtime, client) = server.client();
    runtime
        .block_on(client.cancel_batch(id))
        .expect("cancel the batch");
    let mut summary = String::new();
    std::io::Read::read_to_string(&mut stdout, &mut summary).expect("read the summary");
    let status = child.wait().expect("wait for mcq submit");
    assert_eq!(
        status.code(),
        Some(1),
        "cancelled work fails the wait:\n{summary}"
    );
    assert!(summary.contains("2 cancelled"), "{summary}");

    let id = id.to_string();
    let (code, out, err) = server.run(&["status", &id, "--wait"]);
    assert_eq!(
        code,
        Some(1),
        "status --wait exits as submit --wait:\n{out}\n{err}"
    );
    assert!(out.contains("2 cancelled"), "{out}");
    // Without --wait, status only shows: it succeeds.
    let (code, _, _) = server.run(&["status", &id]);
    assert_eq!(code, Some(0));
    let (code, _, err) = server.run(&["status", "00000000-0000-0000-0000-000000000000"]);
    assert_eq!(code, Some(2), "an unknown id is bad input: {err}");
    // A spec the server rejects is bad input too.
    let (code, _, err) = server.run(&["submit", "--down", "2"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/down"), "{err}");
}

#[test]
fn json_with_wait_keeps_stdout_one_document() {
    let server = Server::start();
    let (code, out, err) = server.run(&[
        "submit", "--count", "2", "--runs", "1e4", "--wait", "--json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let view: serde_json::Value = serde_json::from_str(&out).expect("stdout is the JSON");
    let id = view["id"].as_str().expect("id");
    assert!(err.starts_with(id), "the id first, on stderr: {err}");
    let csv = server.dir().join("specs.csv");
    std::fs::write(&csv, "runs,colour\n100,red\n").expect("write");
    let (code, _, err) = server.run(&["submit", "--file", csv.to_str().expect("path")]);
    assert_eq!(code, Some(2), "an unusable file is bad input: {err}");
}

/// A job asking for delta reports it from the server, bit for bit as
/// `mcq price` computes it locally.
#[test]
fn submit_greeks_delta_reports_the_local_delta() {
    let server = Server::start();
    let flags = ["--runs", "1e5", "--seed", "8", "--greeks", "delta"];
    let (code, out, err) = server.run(&[&["submit", "--wait", "--json"][..], &flags].concat());
    assert_eq!(code, Some(0), "{err}");
    let job: serde_json::Value = serde_json::from_str(&out).expect("the job's JSON");
    assert_eq!(job["spec"]["greeks"], serde_json::json!(["delta"]), "{job}");
    let (code, local, err) = server.run(&[&["price", "--json"][..], &flags].concat());
    assert_eq!(code, Some(0), "{err}");
    let local: serde_json::Value = serde_json::from_str(&local).expect("JSON");
    for key in ["price", "delta", "delta_std_error"] {
        assert!(local[key].is_number(), "{local}");
        assert_eq!(job["result"][key], local[key], "{key}");
    }
    let id = job["id"].as_str().expect("id");
    let (code, out, _) = server.run(&["status", id]);
    assert_eq!(code, Some(0));
    assert!(out.contains("delta"), "{out}");
}
