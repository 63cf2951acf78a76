//! The API and workers through PgBouncer: in session mode a batch runs as
//! on a direct connection; in transaction mode every `mcq` process
//! refuses to start, saying why, instead of failing at random later (the
//! driver's prepared statements, `LISTEN` and the per-session bounds all
//! need a session of their own).
//!
//! Needs Debian's `pgbouncer` (`.ci/run` installs it): skipped loudly
//! without it, a failure under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};
use mcq_tests::{McqProcess, TempDir};

use super::{api, outcome};
use crate::process::batch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_and_the_api_run_through_pgbouncer_in_session_mode_only() -> anyhow::Result<()> {
    let Some(bin) = pgbouncer_binary() else {
        return Ok(());
    };
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-chaos-pooler")?;
    let store = batch::store(&db.url, 4).await?;

    let session = PgBouncer::start(&bin, &db.url, "session", IGNORED, logs.path())?;
    let via = session.url(&db.name);
    let (server, base) = McqProcess::server(
        "server",
        &via,
        &["--embedded-workers", "0", "--no-migrate"],
        logs.path(),
    )?;
    let args = ["--concurrency", "2"];
    let workers = [
        McqProcess::worker("worker0", &via, &args, logs.path())?,
        McqProcess::worker("worker1", &via, &args, logs.path())?,
    ];
    let specs: Vec<_> = (0..30).map(|i| batch::spec(8, 60_000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let client = reqwest::Client::new();
    let read = format!("{base}/v1/batches/{batch_id}?wait=20s");
    api::until_ok(&client, &read, Duration::from_secs(60), &server).await?;
    let everyone = [&workers[0], &workers[1], &server];
    outcome::assert_exactly_once(&db.url, &store, batch_id, &specs, specs.len(), &everyone).await?;

    let transaction = PgBouncer::start(&bin, &db.url, "transaction", IGNORED, logs.path())?;
    let via = transaction.url(&db.name);
    for (name, args) in [
        ("refused-worker", vec!["worker", "--database-url", &via]),
        (
            "refused-server",
            vec![
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--no-migrate",
                "--database-url",
                &via,
            ],
        ),
    ] {
        let mut refused = McqProcess::spawn(name, &args, &[], logs.path())?;
        let status = refused.wait_timeout(Duration::from_secs(60))?;
        assert!(!status.success(), "{name} started\n{}", refused.logs());
        assert!(
            refused.log_text().contains("pool in session mode"),
            "{name} says why\n{}",
            refused.logs()
        );
    }
    Ok(())
}

/// A PgBouncer that refuses the driver's startup parameters (no
/// `ignore_startup_parameters`) is a mistake of configuration: `mcq
/// worker` and `mcq serve` exit 1 at once, naming the setting to add,
/// rather than retrying a connection that will never be accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pgbouncer_refusing_startup_parameters_stops_mcq_with_the_fix() -> anyhow::Result<()> {
    let Some(bin) = pgbouncer_binary() else {
        return Ok(());
    };
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-chaos-pooler-startup")?;
    let strict = PgBouncer::start(&bin, &db.url, "session", "", logs.path())?;
    let via = strict.url(&db.name);
    for (name, args) in [
        ("strict-worker", vec!["worker", "--database-url", &via]),
        (
            "strict-server",
            vec!["serve", "--listen", "127.0.0.1:0", "--database-url", &via],
        ),
    ] {
        let mut refused = McqProcess::spawn(name, &args, &[], logs.path())?;
        let status = refused.wait_timeout(Duration::from_secs(60))?;
        assert_eq!(status.code(), Some(1), "{name}\n{}", refused.logs());
        let said = refused.log_text();
        assert!(
            said.contains("unsupported startup parameter")
                && said.contains("ignore_startup_parameters = extra_float_digits"),
            "{name} says what to fix\n{}",
            refused.logs()
        );
    }
    Ok(())
}

/// The startup parameter the driver sends that PgBouncer does not know.
const IGNORED: &str = "extra_float_digits";

/// `pgbouncer` on PATH or where Debian puts it; `None` (after saying so
/// loudly) when missing, except under `CI=true`, where that fails.
fn pgbouncer_binary() -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("pgbouncer"))
        .find(|bin| bin.is_file());
    if found.is_none() {
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("pgbouncer is required under CI (Debian: apt-get install pgbouncer)");
        }
        eprintln!(
            "\n*** SKIPPING the PgBouncer test: no pgbouncer binary \
             (Debian: apt-get install pgbouncer) ***\n"
        );
    }
    found
}

/// A PgBouncer in front of the test server, in one pool mode, letting the
/// startup parameters `ignore` pass (none when empty); stopped when
/// dropped.
struct PgBouncer {
    child: Child,
    port: u16,
}

impl PgBouncer {
    fn start(
        bin: &Path,
        upstream: &str,
        mode: &str,
        ignore: &str,
        dir: &Path,
    ) -> anyhow::Result<PgBouncer> {
        let (host, port) = host_and_port(upstream)?;
        let listen = free_port()?;
        let own = dir.join(format!("pgbouncer-{mode}"));
        std::fs::create_dir_all(&own)?;
        let users = own.join("users.txt");
        std::fs::write(&users, "\"postgres\" \"\"\n")?;
        let ini = own.join("pgbouncer.ini");
        // The driver sends extra_float_digits at start-up; PgBouncer
        // refuses parameters it does not know unless told to let it pass.
        let ignore = if ignore.is_empty() {
            String::new()
        } else {
            format!("ignore_startup_parameters = {ignore}\n")
        };
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={host} port={port}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\n\
                 unix_socket_dir =\nauth_type = trust\nauth_file = {}\n\
                 pool_mode = {mode}\ndefault_pool_size = 40\nmax_client_conn = 400\n\
                 {ignore}logfile = {}\n",
                users.display(),
                own.join("pgbouncer.log").display()
            ),
        )?;
        let mut command = Command::new(bin);
        // PgBouncer refuses to run as root; -u switches to another user.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        if root {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&own)
                .status()?;
            anyhow::ensure!(status.success(), "chown of {} failed", own.display());
            command.args(["-u", "postgres"]);
        }
        let child = command
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting pgbouncer")?;
        let mut bouncer = PgBouncer {
            child,
            port: listen,
        };
        let start = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", listen)).is_err() {
            if let Some(status) = bouncer.child.try_wait()? {
                let log = std::fs::read_to_string(own.join("pgbouncer.log")).unwrap_or_default();
                bail!("pgbouncer exited with {status}:\n{log}");
            }
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(30),
                "pgbouncer did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(bouncer)
    }

    fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Host and port of a `postgres://user@host:port/db` URL.
fn host_and_port(url: &str) -> anyhow::Result<(String, u16)> {
    let authority = url
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .context("a URL with an authority")?;
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "5432"));
    Ok((host.to_owned(), port.parse()?))
}

/// A port nothing listens on right now.
fn free_port() -> anyhow::Result<u16> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").context("binding a probe")?;
    Ok(probe.local_addr()?.port())
}
