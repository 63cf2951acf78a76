//! `mcq worker` against a database URL it can never use exits non-zero at
//! once with the reason, while an unreachable server is waited for.

use std::time::Duration;

use mcq_tests::{McqProcess, TempDir};

#[test]
fn a_worker_exits_on_errors_that_waiting_cannot_heal() -> anyhow::Result<()> {
    let logs = TempDir::new("mcq-process-misconfigured")?;
    let missing_dir = logs.path().join("no-such-dir").join("queue.sqlite");
    let sqlite = format!("sqlite:{}", missing_dir.display());
    for (name, url, code, says) in [
        (
            "bad-port",
            "postgres://mcq@127.0.0.1:notaport/mcq",
            2,
            "invalid port number",
        ),
        (
            "scheme",
            "mysql://mcq@127.0.0.1/mcq",
            2,
            "unsupported database URL",
        ),
        (
            "sqlite-dir",
            sqlite.as_str(),
            1,
            "unable to open database file",
        ),
    ] {
        let mut worker = McqProcess::worker(name, url, &[], logs.path())?;
        let status = worker.wait_timeout(Duration::from_secs(30))?;
        assert_eq!(status.code(), Some(code), "{name}\n{}", worker.logs());
        assert!(
            worker.log_text().contains(says),
            "{name}\n{}",
            worker.logs()
        );
    }
    Ok(())
}

#[test]
fn a_worker_waits_for_a_database_that_is_not_up() -> anyhow::Result<()> {
    let logs = TempDir::new("mcq-process-unreachable")?;
    // Nothing listens on port 1 of the loopback: the connection is refused.
    let mut worker = McqProcess::worker(
        "refused",
        "postgres://mcq@127.0.0.1:1/mcq",
        &[],
        logs.path(),
    )?;
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        worker.try_status()?.is_none(),
        "a refused connection is retried\n{}",
        worker.logs()
    );
    worker.terminate()?;
    let status = worker.wait_timeout(Duration::from_secs(30))?;
    assert!(status.success(), "stopped cleanly\n{}", worker.logs());
    assert!(
        worker.log_text().contains("database unreachable"),
        "{}",
        worker.logs()
    );
    Ok(())
}
