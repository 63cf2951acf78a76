//! `mcq` child processes that are killed when dropped, and temp directories.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `mcq` binary next to this test executable (`target/<profile>/mcq`).
pub(crate) fn mcq_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/e2e-<hash> → target/<profile>/mcq
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let binary = profile_dir.join(format!("mcq{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} not found: build it first (cargo build -p mcq, or run cargo test --workspace)",
        binary.display()
    );
    binary
}

/// A command running the `mcq` binary.
pub(crate) fn mcq() -> Command {
    let mut command = Command::new(mcq_binary());
    command
        .env("RUST_LOG", "warn")
        .env_remove("DATABASE_URL")
        .env_remove("MCQ_SERVER")
        .env_remove("MCQ_LISTEN");
    command
}

/// A child process killed on drop.
#[derive(Debug)]
pub(crate) struct Process(pub(crate) Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A running `mcq serve`.
#[derive(Debug)]
pub(crate) struct Server {
    pub(crate) process: Process,
    pub(crate) base_url: String,
}

impl Server {
    /// Starts `mcq serve --listen 127.0.0.1:0` with `args` and waits for
    /// its "listening on" line.
    pub(crate) fn start(database_url: &str, args: &[&str]) -> Server {
        let mut child = mcq()
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                database_url,
            ])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn mcq serve");
        let stdout = child.stdout.take().expect("stdout");
        let process = Process(child);
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.split("listening on ").nth(1) {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let base_url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("mcq serve printed no 'listening on' line");
        Server { process, base_url }
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.process.0.id()
    }
}

/// Starts `mcq worker` processes on `database_url`.
pub(crate) fn workers(database_url: &str, count: usize) -> Vec<Process> {
    (0..count)
        .map(|_| {
            let child = mcq()
                .args([
                    "worker",
                    "--database-url",
                    database_url,
                    "--concurrency",
                    "1",
                    "--threads",
                    "1",
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::inherit())
                .spawn()
                .expect("spawn mcq worker");
            Process(child)
        })
        .collect()
}

/// A directory removed on drop.
#[derive(Debug)]
pub(crate) struct TempDir(pub(crate) PathBuf);

impl TempDir {
    pub(crate) fn new() -> TempDir {
        let path = std::env::temp_dir().join(format!("mcq-e2e-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    pub(crate) fn sqlite_url(&self) -> String {
        format!("sqlite:{}", self.0.join("mcq.sqlite").display())
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
