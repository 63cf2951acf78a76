//! Tests of the `mcq` binary's command line, run as a real process.

use std::process::Command;

pub(crate) fn mcq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mcq"))
}

#[test]
fn help_lists_every_subcommand() {
    let out = mcq().arg("--help").output().expect("run mcq --help");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for sub in [
        "price", "serve", "worker", "migrate", "submit", "status", "demo", "bench",
    ] {
        assert!(text.contains(sub), "--help does not mention {sub}:\n{text}");
    }
}

#[test]
fn worker_refuses_an_out_of_range_completion_wait() {
    let out = mcq()
        .args(["worker", "--complete-wait-ms", "60000"])
        .output()
        .expect("run mcq worker");
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("--complete-wait-ms") && text.contains("0..=10000"),
        "the message names the flag and its range:\n{text}"
    );
}

mod bench_compare;
mod bench_kernel;
mod price;
