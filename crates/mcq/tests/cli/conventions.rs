//! What every command shares: counts written as people write them, one
//! table of exit codes, completions, the man page and `--color`.

use super::{exit_and_stderr, mcq};

/// `mcq price --json` with `runs` spelled as given: the paths it priced.
fn priced_paths(runs: &str) -> u64 {
    let out = mcq()
        .args(["price", "--json", "--seed", "3", "--runs", runs])
        .output()
        .expect("run mcq price");
    assert!(out.status.success(), "--runs {runs}: {out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    v["paths"].as_u64().expect("paths")
}

#[test]
fn counts_take_plain_separated_and_scientific_spellings() {
    for runs in ["100000", "100_000", "1e5"] {
        assert_eq!(priced_paths(runs), 100_000, "--runs {runs}");
    }
    // The same parser checks every count flag's range, in every command.
    for (args, flag, range) in [
        (
            &["demo", "--calls", "0"][..],
            "--calls",
            "0 is not in 1..=100000",
        ),
        (&["demo", "--runs", "1.5"], "--runs", "not a whole number"),
        (&["submit", "--count", "0"], "--count", "not in 1..="),
        (
            &[
                "bench",
                "queue",
                "--database-url",
                "sqlite:x",
                "--jobs",
                "2e6",
            ],
            "--jobs",
            "not in 1..=",
        ),
        (
            &["bench", "compare", "--calls", "1e9"],
            "--calls",
            "not in 1..=",
        ),
        (
            &["price", "--threads", "2e3"],
            "--threads",
            "not in 1..=1024",
        ),
    ] {
        let (code, text) = exit_and_stderr(args);
        assert_eq!(code, Some(2), "mcq {args:?} is a usage error:\n{text}");
        assert!(
            text.contains(flag) && text.contains(range),
            "mcq {args:?}:\n{text}"
        );
    }
}

#[test]
fn bad_input_exits_2_in_every_command() {
    for args in [
        &["price", "--down", "2"][..],
        &["price", "--periods", "0"],
        &["bench", "kernel", "--periods", "700"],
        &["status", "not-an-id"],
        &["submit", "--server", "ftp://example"],
        &["submit", "--file", "/nonexistent/specs.json"],
        &["bench", "compare", "--poll-ms", "0"],
        &["no-such-command"],
    ] {
        let (code, text) = exit_and_stderr(args);
        assert_eq!(code, Some(2), "mcq {args:?}:\n{text}");
        assert!(text.contains("error"), "mcq {args:?} says why:\n{text}");
    }
}

#[test]
fn serve_and_worker_take_the_queue_settings_with_their_defaults() {
    for command in ["serve", "worker"] {
        let out = mcq()
            .args([command, "--help"])
            .output()
            .expect("run --help");
        let help = String::from_utf8_lossy(&out.stdout);
        for (flag, default) in [
            ("--max-attempts", "[default: 3]"),
            ("--retention", "[default: 7d]"),
            ("--db-pool-size", "[default: 16]"),
            ("--db-unreachable-after", "[default: 0.9]"),
            ("--db-pool-mode", "[default: session]"),
        ] {
            let at = help
                .find(flag)
                .unwrap_or_else(|| panic!("{command} lacks {flag}"));
            assert!(help[at..].contains(default), "{command} {flag}: {help}");
        }
        for (args, range) in [
            (&["--max-attempts", "0"][..], "not in 1..=100"),
            (&["--max-attempts", "1e3"], "not in 1..=100"),
            (&["--retention", "10s"], "not in 1m..=3650d"),
            (&["--retention", "7w"], "s, m, h or d"),
            (&["--db-pool-size", "1"], "not in 2..=1000"),
            (
                &["--db-unreachable-after", "0"],
                "not from 0.1 to 5 seconds",
            ),
            (&["--db-pool-mode", "statement"], "not a pool mode"),
        ] {
            let (code, text) = exit_and_stderr(&[&[command][..], args].concat());
            assert_eq!(code, Some(2), "{command} {args:?}: {text}");
            assert!(text.contains(range), "{command} {args:?}: {text}");
        }
    }
}

#[test]
fn the_workers_poll_takes_a_duration_within_its_range() {
    for (args, expected) in [
        (&["worker", "--poll", "5ms"][..], "not from 10ms to 60s"),
        (&["worker", "--poll", "2m"], "not a duration"),
        (&["worker", "--poll", ""], "not a duration"),
    ] {
        let (code, text) = exit_and_stderr(args);
        assert_eq!(code, Some(2), "mcq {args:?}: {text}");
        assert!(text.contains(expected), "mcq {args:?}: {text}");
    }
    let out = mcq().args(["worker", "--help"]).output().expect("help");
    assert!(String::from_utf8_lossy(&out.stdout).contains("[default: 1s]"));
}

#[test]
fn a_transaction_pool_mode_on_sqlite_is_refused_with_what_to_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite:{}", dir.path().join("q.sqlite").display());
    let (code, text) = exit_and_stderr(&[
        "worker",
        "--database-url",
        &url,
        "--db-pool-mode",
        "transaction",
    ]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("leave the pool mode at session"), "{text}");
    let (code, text) = exit_and_stderr(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--database-url",
        &url,
        "--db-pool-mode",
        "transaction",
    ]);
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("leave the pool mode at session"), "{text}");
    assert!(
        !dir.path().join("q.sqlite").exists(),
        "nothing was created before refusing"
    );
}

#[test]
fn an_unreachable_server_exits_3() {
    // Nothing listens on port 1 of the loopback: the connection is refused.
    let id = "00000000-0000-0000-0000-000000000000";
    for args in [
        &["submit", "--server", "http://127.0.0.1:1", "--runs", "1e3"][..],
        &["status", "--server", "http://127.0.0.1:1", id],
    ] {
        let (code, text) = exit_and_stderr(args);
        assert_eq!(code, Some(3), "mcq {args:?}:\n{text}");
        assert!(text.contains("cannot reach the server"), "{text}");
    }
}

#[test]
fn completions_for_each_shell_name_the_commands() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = mcq().args(["completions", shell]).output().expect("run");
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8_lossy(&out.stdout);
        for word in ["submit", "quiet", "max-attempts"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    let (code, _) = exit_and_stderr(&["completions", "cmd.exe"]);
    assert_eq!(code, Some(2));
}

#[test]
fn the_man_page_documents_commands_and_exit_codes() {
    let out = mcq().arg("man").output().expect("run mcq man");
    assert!(out.status.success());
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH mcq 1"),
        "{page}"
    );
    for word in ["submit", "Exit codes", "server or the database"] {
        assert!(page.contains(word), "the man page lacks {word}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let out = mcq()
        .args(["man", "--dir"])
        .arg(dir.path())
        .output()
        .expect("run mcq man --dir");
    assert!(out.status.success(), "{out:?}");
    for page in ["mcq.1", "mcq-submit.1", "mcq-bench-compare.1"] {
        let text = std::fs::read_to_string(dir.path().join(page)).expect(page);
        assert!(text.contains(".TH"), "{page}: {text}");
    }
}

#[test]
fn colour_follows_the_flag_and_no_color() {
    let esc = |args: &[&str], no_color: bool| {
        let mut command = mcq();
        command.args(args);
        if no_color {
            command.env("NO_COLOR", "1");
        } else {
            command.env_remove("NO_COLOR");
        }
        let out = command.output().expect("run mcq");
        String::from_utf8_lossy(&out.stderr).contains('\u{1b}')
    };
    // The tests' stderr is a pipe: auto means no colour.
    assert!(!esc(&["status"], false));
    assert!(esc(&["--color", "always", "status"], false));
    assert!(
        esc(&["status", "--color=always"], true),
        "the flag wins over NO_COLOR"
    );
    assert!(!esc(&["--color", "never", "status"], false));
    // The logs (tracing) are plain in a file or a pipe, and coloured when asked.
    assert!(!first_log_line(&[], &[]).contains('\u{1b}'));
    assert!(first_log_line(&["--color", "always"], &[]).contains('\u{1b}'));
    let (code, text) = exit_and_stderr(&["--color", "sometimes", "status"]);
    assert_eq!(code, Some(2), "{text}");
}

#[test]
fn the_log_format_is_text_or_json_and_json_is_never_coloured() {
    let (code, text) = exit_and_stderr(&["worker", "--log-format", "xml"]);
    assert_eq!(code, Some(2), "{text}");
    let by_flag = first_log_line(&["--color", "always"], &["--log-format", "json"]);
    let by_env = first_log_line_with(&[], &[], &[("MCQ_LOG_FORMAT", "json")]);
    for line in [by_flag, by_env] {
        let event: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("not one JSON object ({err}): {line:?}"));
        assert_eq!(event["level"], "WARN", "{line}");
        assert_eq!(event["fields"]["message"], "database unreachable", "{line}");
        assert!(!line.contains('\u{1b}'), "{line:?}");
    }
}

/// The first log line of a worker whose database is unreachable (it warns
/// at once and keeps retrying, so it is killed after that line); `flags`
/// come before `worker`, `after` after its own.
fn first_log_line(flags: &[&str], after: &[&str]) -> String {
    first_log_line_with(flags, after, &[])
}

/// [`first_log_line`] with extra environment variables.
fn first_log_line_with(flags: &[&str], after: &[&str], envs: &[(&str, &str)]) -> String {
    use std::io::BufRead as _;
    let mut child = mcq()
        .args(flags)
        .args([
            "worker",
            "--database-url",
            "postgres://nobody@127.0.0.1:1/mcq",
        ])
        .args(after)
        .envs(envs.iter().copied())
        .env("RUST_LOG", "warn")
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn mcq worker");
    let mut line = String::new();
    let stderr = child.stderr.take().expect("stderr");
    std::io::BufReader::new(stderr)
        .read_line(&mut line)
        .expect("read the log");
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("database unreachable"), "{line}");
    line
}

/// Output piped into a reader that stops early (`mcq … | head -1`) ends
/// the command as it ends Unix tools, by `SIGPIPE`, never in a panic.
#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;

    for args in [
        &["completions", "bash"][..],
        &["man"],
        &["price", "--runs", "1000", "--seed", "1"],
    ] {
        let mut child = mcq()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mcq");
        // Close the read end before the command writes anything, so its
        // first write finds no reader.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        // Killed by SIGPIPE, or done already if it ignored the failed write.
        assert!(
            out.status.signal() == Some(13) || out.status.success(),
            "{args:?} should end by SIGPIPE: {:?} {stderr}",
            out.status
        );
    }
}
