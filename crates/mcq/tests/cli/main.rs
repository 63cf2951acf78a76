//! Tests of the `mcq` binary's command line, run as a real process.

use std::process::Command;

pub(crate) fn mcq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcq"))
}

/// Runs `mcq` with `args`; its exit code and standard error.
pub(crate) fn exit_and_stderr(args: &[&str]) -> (Option<i32>, String) {
    let out = mcq().args(args).output().expect("run mcq");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_lists_every_subcommand() {
    let out = mcq().arg("--help").output().expect("run mcq --help");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in [
        "price",
        "serve",
        "worker",
        "migrate",
        "submit",
        "status",
        "results",
        "demo",
        "bench",
        "completions",
        "man",
    ] {
        assert!(text.contains(sub), "--help does not mention {sub}:\n{text}");
    }
}

#[test]
fn worker_refuses_an_out_of_range_completion_wait() {
    let (code, text) = exit_and_stderr(&["worker", "--complete-wait-ms", "60000"]);
    assert_eq!(code, Some(2), "a usage error");
    assert!(
        text.contains("--complete-wait-ms") && text.contains("0..=10000"),
        "the message names the flag and its range:\n{text}"
    );
}

#[test]
fn worker_refuses_an_out_of_range_prefetch_window() {
    for bad in ["10001", "-1", "200ms"] {
        let flag = format!("--prefetch-ms={bad}");
        let (code, text) = exit_and_stderr(&["worker", &flag]);
        assert_eq!(code, Some(2), "{bad}: a usage error");
        assert!(
            text.contains("--prefetch-ms"),
            "{bad}: the message names the flag:\n{text}"
        );
    }
}

#[test]
fn an_unreachable_database_is_reported_with_its_cause_once() {
    // Nothing listens on port 1 of the loopback: the connection is refused.
    let (code, text) = exit_and_stderr(&[
        "serve",
        "--database-url",
        "postgres://nobody@127.0.0.1:1/mcq",
    ]);
    assert_eq!(code, Some(3), "unreachable");
    assert!(
        text.contains("connecting to postgres://nobody") && text.contains("127.0.0.1:1/mcq"),
        "the message names the database:\n{text}"
    );
    assert_eq!(
        text.matches("Connection refused").count(),
        1,
        "the cause, said once:\n{text}"
    );
}

mod bench_compare;
mod bench_kernel;
mod bench_scale;
mod conventions;
mod open_files;
mod price;
mod seeds;
mod server;
mod stdin_close;
mod sweeps;
mod waiting;
