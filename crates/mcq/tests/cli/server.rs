//! A real `mcq serve` on a temporary SQLite file, for the client commands.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::mcq;

/// A running `mcq serve`, killed (and its directory removed) on drop.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
    dir: tempfile::TempDir,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
}

impl Server {
    /// Starts a server with one embedded worker on a free port.
    pub(crate) fn start() -> Server {
        Server::launch(mcq(), &[])
    }

    /// Like [`Server::start`] with `extra` flags, and the soft open-file
    /// limit first lowered to `soft` (as some systems start processes).
    pub(crate) fn start_with_open_files(soft: u64, extra: &[&str]) -> Server {
        let mut command = Command::new("bash");
        command.args([
            "-c",
            &format!("ulimit -S -n {soft} && exec \"$0\" \"$@\""),
            env!("CARGO_BIN_EXE_mcq"),
        ]);
        Server::launch(command, extra)
    }

    fn launch(mut command: Command, extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let database = format!("sqlite:{}", dir.path().join("mcq.sqlite").display());
        let mut child = command
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                &database,
            ])
            .args(["--embedded-workers", "1"])
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn mcq serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(url) = line.split("listening on ").nth(1) {
                    let _ = tx.send(url.trim().to_owned());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("mcq serve printed no 'listening on' line");
        Server { child, dir, url }
    }

    /// A client of this server, with a runtime to drive it.
    pub(crate) fn client(&self) -> (tokio::runtime::Runtime, mcq_client::Client) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        (runtime, mcq_client::Client::new(&self.url).expect("client"))
    }

    /// Runs `mcq` against this server; exit code, stdout, stderr.
    pub(crate) fn run(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let out = mcq()
            .args(args)
            .env("MCQ_SERVER", &self.url)
            .output()
            .expect("run mcq");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The directory of its database (for files the test writes).
    pub(crate) fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
