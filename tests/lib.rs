//! Shared plumbing of the process tests: finding the `mcq` binary and
//! running it as a child process that is killed when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// Path of the `mcq` binary built alongside this test executable.
///
/// Test executables live in `target/<profile>/deps/`; the binary is
/// `target/<profile>/mcq`. `cargo test --workspace` builds it because the
/// `mcq` package has an integration test; a lone `cargo test -p mcq-tests`
/// does not, hence the message.
pub fn mcq_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable inside target/<profile>/deps");
    let bin = profile_dir.join(format!("mcq{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "the mcq binary is missing at {}: run `cargo build -p mcq` (same profile) first",
        bin.display()
    );
    bin
}

/// A running `mcq` child process; SIGKILLed when dropped if still running.
/// Its stderr (the logs) goes to a file, shown by [`McqProcess::logs`];
/// its stdout to another beside it.
#[derive(Debug)]
pub struct McqProcess {
    child: Child,
    name: String,
    log: PathBuf,
    out: PathBuf,
}

impl McqProcess {
    /// Starts `mcq <args>` with extra environment variables; `name` labels it
    /// in messages and names its log file in `log_dir`.
    pub fn spawn(
        name: &str,
        args: &[&str],
        envs: &[(&str, &str)],
        log_dir: &Path,
    ) -> anyhow::Result<McqProcess> {
        let log = log_dir.join(format!("{name}.log"));
        let out = log_dir.join(format!("{name}.out"));
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let stdout =
            std::fs::File::create(&out).with_context(|| format!("creating {}", out.display()))?;
        let mut command = Command::new(mcq_bin());
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(file);
        for (key, value) in envs {
            command.env(key, value);
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting mcq {}", args.join(" ")))?;
        Ok(McqProcess {
            child,
            name: name.to_owned(),
            log,
            out,
        })
    }

    /// Starts `mcq serve --listen 127.0.0.1:0 --database-url <url> <extra>`
    /// and waits up to a minute for the address it prints; returns the
    /// process and its base URL (`http://127.0.0.1:PORT`).
    pub fn server(
        name: &str,
        url: &str,
        extra: &[&str],
        log_dir: &Path,
    ) -> anyhow::Result<(McqProcess, String)> {
        McqProcess::server_with(name, url, extra, &[("RUST_LOG", "info")], log_dir)
    }

    /// [`McqProcess::server`] with these environment variables instead of
    /// `RUST_LOG=info`.
    pub fn server_with(
        name: &str,
        url: &str,
        extra: &[&str],
        envs: &[(&str, &str)],
        log_dir: &Path,
    ) -> anyhow::Result<(McqProcess, String)> {
        let mut args = vec!["serve", "--listen", "127.0.0.1:0", "--database-url", url];
        args.extend_from_slice(extra);
        let mut server = McqProcess::spawn(name, &args, envs, log_dir)?;
        let start = Instant::now();
        loop {
            let printed = std::fs::read_to_string(&server.out).unwrap_or_default();
            if let Some(rest) = printed.split("listening on ").nth(1) {
                let base: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
                return Ok((server, base));
            }
            if let Some(status) = server.try_status()? {
                bail!(
                    "{name} exited with {status} before listening\n{}",
                    server.logs()
                );
            }
            if start.elapsed() > Duration::from_secs(60) {
                bail!(
                    "{name} printed no address within a minute\n{}",
                    server.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts `mcq worker --database-url <url> <extra>` logging at debug level.
    pub fn worker(
        name: &str,
        url: &str,
        extra: &[&str],
        log_dir: &Path,
    ) -> anyhow::Result<McqProcess> {
        let mut args = vec!["worker", "--database-url", url];
        args.extend_from_slice(extra);
        McqProcess::spawn(
            name,
            &args,
            &[("RUST_LOG", "info,mcq_worker=debug")],
            log_dir,
        )
    }

    /// Starts `count` workers named `worker0`, `worker1`, … as [`Self::worker`].
    pub fn workers(
        count: usize,
        url: &str,
        extra: &[&str],
        log_dir: &Path,
    ) -> anyhow::Result<Vec<McqProcess>> {
        (0..count)
            .map(|i| McqProcess::worker(&format!("worker{i}"), url, extra, log_dir))
            .collect()
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM (a graceful stop request).
    pub fn terminate(&self) -> anyhow::Result<()> {
        self.signal("TERM")
    }

    /// Sends SIGSTOP: the process freezes where it is, connections open.
    pub fn freeze(&self) -> anyhow::Result<()> {
        self.signal("STOP")
    }

    /// Sends SIGCONT: a frozen process carries on.
    pub fn thaw(&self) -> anyhow::Result<()> {
        self.signal("CONT")
    }

    /// Sends `SIG<name>`.
    fn signal(&self, name: &str) -> anyhow::Result<()> {
        // std only knows SIGKILL, and this workspace forbids unsafe libc
        // calls, so `kill(1)` sends the signal.
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .with_context(|| format!("running kill -{name}"))?;
        if !status.success() {
            bail!("kill -{name} {} failed", self.pid());
        }
        Ok(())
    }

    /// Sends SIGKILL and reaps the process.
    pub fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().context("SIGKILL")?;
        self.child.wait().context("reaping the killed process")?;
        Ok(())
    }

    /// Exit status if the process has ended.
    pub fn try_status(&mut self) -> anyhow::Result<Option<ExitStatus>> {
        self.child.try_wait().context("polling the child process")
    }

    /// Waits up to `timeout` for the process to exit.
    pub fn wait_timeout(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.try_status()? {
                return Ok(status);
            }
            if start.elapsed() > timeout {
                bail!(
                    "{} did not exit within {timeout:?}\n{}",
                    self.name,
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process's whole log so far, unlabelled, to search.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The number a field of the worker's exit line (`worker exited
    /// claimed=… refused=…`) holds, once the worker has exited.
    pub fn exit_count(&self, field: &str) -> Option<u64> {
        let log = self.log_text();
        let line = log.lines().rev().find(|l| l.contains("worker exited"))?;
        let value = line.split(&format!(" {field}=")).nth(1)?;
        value.split_whitespace().next()?.parse().ok()
    }

    /// The process's log so far, labelled, for failure messages.
    pub fn logs(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        // The tail is what explains a failure; whole logs drown it.
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(60)..].join("\n");
        format!(
            "--- {} log ({}) ---\n{tail}\n--- end of {} log ---",
            self.name,
            self.log.display(),
            self.name
        )
    }
}

impl Drop for McqProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A temporary directory removed when dropped (logs are kept on panic so a
/// failure can be inspected).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates a fresh directory under the system temp dir.
    pub fn new(prefix: &str) -> anyhow::Result<TempDir> {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(TempDir(dir))
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
