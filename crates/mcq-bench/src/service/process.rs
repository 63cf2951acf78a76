//! Starting a private service for the benchmark: `mcq serve` on the embedded
//! default, or `mcq serve` plus `mcq worker` processes on PostgreSQL, as
//! children of the current executable. They are killed when dropped.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::link::LinkProfile;

/// The embedded database file, in the service's working directory.
const SQLITE_FILE: &str = "bench.sqlite";

/// How long a server may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the service should keep its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// The server's embedded default (a SQLite file in its working
    /// directory) with this many workers inside the server process.
    Embedded {
        /// Embedded workers.
        workers: u32,
    },
    /// PostgreSQL at `url`, with this many `mcq worker` processes.
    Postgres {
        /// Database URL.
        url: String,
        /// Worker processes.
        workers: u32,
    },
}

/// A running server (and its worker processes); killed on drop.
#[derive(Debug)]
pub(crate) struct ServiceProcesses {
    children: Vec<Child>,
    url: String,
    /// Directory of an embedded database to delete when done.
    sqlite_dir: Option<PathBuf>,
    /// The relay of `--link-db`, between the workers and PostgreSQL.
    _db_relay: Option<crate::link::Relay>,
}

impl ServiceProcesses {
    /// Starts the service from the executable `exe` with `dir` as working
    /// directory and log directory, and waits until it prints its address.
    /// With a `link_db` other than loopback (PostgreSQL only), the workers
    /// reach the database through a relay applying it.
    pub(crate) fn start(
        exe: &Path,
        backend: &Backend,
        dir: &Path,
        link_db: &LinkProfile,
        seed: u64,
    ) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let sqlite_dir = matches!(backend, Backend::Embedded { .. }).then(|| dir.to_path_buf());
        let (db_relay, worker_url) = match backend {
            Backend::Embedded { .. } if !link_db.is_loopback() => bail!(
                "--link-db needs --database-url: the embedded SQLite database lives inside \
                 the server process, with no network between its workers and the database"
            ),
            Backend::Postgres { url, .. } if !link_db.is_loopback() => {
                let (relay, through) = crate::link::relay_url(url, link_db, seed)
                    .context("starting the database link's relay")?;
                (Some(relay), Some(through))
            }
            _ => (None, None),
        };
        let mut processes = Self {
            children: Vec::new(),
            url: String::new(),
            sqlite_dir,
            _db_relay: db_relay,
        };
        let mut serve = Command::new(exe);
        serve
            .current_dir(dir)
            .args(["serve", "--listen", "127.0.0.1:0", "--stop-on-stdin-close"]);
        match backend {
            Backend::Embedded { workers } => {
                // A fresh database file per run, so the first trial is cold
                // and earlier runs' rows do not weigh on this one.
                remove_sqlite(dir)?;
                serve.args([
                    "--database-url",
                    &format!("sqlite:{SQLITE_FILE}"),
                    "--embedded-workers",
                    &workers.to_string(),
                ]);
            }
            // The server applies the migrations before it prints its address,
            // so the workers started after that find the schema in place.
            Backend::Postgres { url, .. } => {
                serve.args(["--embedded-workers", "0", "--database-url", url]);
            }
        }
        // Every process reads a pipe this one holds, so that a benchmark
        // stopped in any way, SIGKILL included, leaves none of them behind.
        let mut server = serve
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file(dir, "server.log")?)
            .spawn()
            .context("starting `mcq serve`")?;
        let stdout = server.stdout.take().context("the server's stdout")?;
        processes.children.push(server);
        processes.url = read_address(stdout).with_context(|| {
            format!(
                "waiting for `mcq serve` to print its address; see {}",
                dir.join("server.log").display()
            )
        })?;
        if let Backend::Postgres { url, workers } = backend {
            let url = worker_url.as_ref().unwrap_or(url);
            for i in 0..*workers {
                let worker = Command::new(exe)
                    .current_dir(dir)
                    // One task at a time on one thread, like an embedded
                    // worker: N workers are N compute slots.
                    .args([
                        "worker",
                        "--database-url",
                        url,
                        "--concurrency",
                        "1",
                        "--threads",
                        "1",
                        "--stop-on-stdin-close",
                    ])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::null())
                    .stderr(log_file(dir, &format!("worker-{i}.log"))?)
                    .spawn()
                    .context("starting `mcq worker`")?;
                processes.children.push(worker);
            }
        }
        Ok(processes)
    }

    /// The server's base URL, e.g. `http://127.0.0.1:41234`.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Fails if a process we started has exited (a crashed worker would
    /// otherwise look like a slow service).
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        for child in &mut self.children {
            if let Some(status) = child.try_wait().context("checking a service process")? {
                bail!(
                    "a service process (pid {}) exited early: {status}",
                    child.id()
                );
            }
        }
        Ok(())
    }
}

impl Drop for ServiceProcesses {
    fn drop(&mut self) {
        // Workers first, so none is left polling a server that is gone.
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if let Some(dir) = &self.sqlite_dir {
            let _ = remove_sqlite(dir);
        }
    }
}

/// Deletes the embedded database and its WAL files, if present.
fn remove_sqlite(dir: &Path) -> anyhow::Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let path = dir.join(format!("{SQLITE_FILE}{suffix}"));
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("removing {}", path.display())),
        }
    }
    Ok(())
}

fn log_file(dir: &Path, name: &str) -> anyhow::Result<File> {
    let path: PathBuf = dir.join(name);
    File::create(&path).with_context(|| format!("creating {}", path.display()))
}

/// Reads the first line the server prints and turns it into a base URL.
/// Whatever it prints afterwards is drained so the pipe never fills up.
fn read_address(stdout: impl Read + Send + 'static) -> anyhow::Result<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next();
        let _ = tx.send(first);
        for _ in lines {}
    });
    let line = match rx.recv_timeout(START_TIMEOUT) {
        Ok(Some(Ok(line))) => line,
        Ok(Some(Err(err))) => return Err(err).context("reading the server's output"),
        Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            bail!("the server exited before printing its address")
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            bail!("the server printed nothing for {START_TIMEOUT:?}")
        }
    };
    address_to_url(&line)
}

/// Accepts `127.0.0.1:8080`, `http://127.0.0.1:8080` or a sentence ending
/// in either ("listening on http://127.0.0.1:8080").
pub(crate) fn address_to_url(line: &str) -> anyhow::Result<String> {
    let token = line
        .split_whitespace()
        .last()
        .with_context(|| "the server printed an empty line")?;
    let url = if token.starts_with("http://") || token.starts_with("https://") {
        token.trim_end_matches('/').to_owned()
    } else {
        format!("http://{token}")
    };
    let host_port = url.split("://").nth(1).unwrap_or_default();
    if host_port
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok())
        .is_none()
    {
        bail!("expected the server to print host:port, got {line:?}");
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn understands_the_ways_a_server_prints_its_address() {
        assert_eq!(
            address_to_url("127.0.0.1:4000").unwrap(),
            "http://127.0.0.1:4000"
        );
        assert_eq!(
            address_to_url("listening on http://127.0.0.1:4000/").unwrap(),
            "http://127.0.0.1:4000"
        );
        assert!(address_to_url("").is_err());
        assert!(address_to_url("starting up").is_err());
    }
}
