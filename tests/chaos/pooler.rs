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
    let workers = McqProcess::workers(2, &via, &args, logs.path())?;
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
        let said = exits_1(name, &args, logs.path())?;
        assert!(
            said.contains("unsupported startup parameter")
                && said.contains("ignore_startup_parameters = extra_float_digits"),
            "{name} says what to fix\n{said}"
        );
    }
    Ok(())
}

/// Through PgBouncer 1.21 or later in transaction mode, every process
/// started with `--db-pool-mode transaction`: the API and three workers
/// hold more client connections than the role may open at PostgreSQL (its
/// `CONNECTION LIMIT` is the pool's 4 server connections), a batch
/// finishes exactly once and its long poll is answered, so does another
/// with the pooler SIGKILLed under it and back a second later, every
/// server connection carries the bounds from the pooler's `connect_query`,
/// and
/// `mcq bench scale` runs a fleet through the same pool. A pooler that
/// does not keep prepared statements apart is refused at start, naming the
/// setting; so is a migration through the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_pool_carries_the_api_workers_and_a_scale_fleet_on_few_connections()
-> anyhow::Result<()> {
    let Some(bin) = pgbouncer_binary_with(true) else {
        return Ok(());
    };
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-chaos-transaction-pool")?;
    let store = batch::store(&db.url, 4).await?;
    // A role that may open only as many connections as the pool has.
    let role = format!("fleet_{}", db.name);
    let grants = format!(
        "CREATE ROLE \"{role}\" LOGIN CONNECTION LIMIT {SERVERS};
         GRANT USAGE ON SCHEMA public TO \"{role}\";
         GRANT ALL ON ALL TABLES IN SCHEMA public TO \"{role}\";
         GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO \"{role}\";
         GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO \"{role}\";"
    );
    let direct = sqlx::PgPool::connect(&db.url).await?;
    // The role name is the test database's, made of safe characters.
    sqlx::raw_sql(sqlx::AssertSqlSafe(grants))
        .execute(&direct)
        .await?;
    let servers_of_role = || {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM pg_stat_activity WHERE usename = $1")
            .bind(&role)
            .fetch_one(&direct)
    };

    let connect_query = format!(
        "connect_query='{}'",
        "SET idle_in_transaction_session_timeout = 5000; SET lock_timeout = 2500; \
         SET statement_timeout = 5000"
    );
    let tracked = Pool {
        mode: "transaction",
        server_connections: SERVERS,
        database: &connect_query,
        settings: "max_prepared_statements = 200\n",
        user: &role,
        ..Pool::default()
    };
    let mut bouncer = PgBouncer::start_with(&bin, &db.url, &tracked, logs.path())?;
    let via = bouncer.url_as(&role, &db.name);
    let pooled = ["--db-pool-mode", "transaction"];
    let (server, base) = McqProcess::server(
        "server",
        &via,
        &[&pooled[..], &["--embedded-workers", "0", "--no-migrate"]].concat(),
        logs.path(),
    )?;
    let args = [&pooled[..], &["--concurrency", "2", "--poll", "100ms"]].concat();
    let workers = McqProcess::workers(3, &via, &args, logs.path())?;
    let specs: Vec<_> = (0..30).map(|i| batch::spec(8, 70_000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let client = reqwest::Client::new();
    let read = format!("{base}/v1/batches/{batch_id}?wait=20s");
    api::until_ok(&client, &read, Duration::from_secs(60), &server).await?;
    let clients = bouncer.clients(&db.name)?;
    let servers = servers_of_role().await?;
    assert!(
        clients > SERVERS as usize && servers <= i64::from(SERVERS),
        "{clients} client connections on {servers} server connections (at most {SERVERS})"
    );
    // A second batch, with the pooler killed under it and back after 1 s:
    // every process rides it out, nothing is lost or done twice.
    let again: Vec<_> = (0..120).map(|i| batch::spec(8, 71_000 + i)).collect();
    let again_id = batch::submit(&store, again.clone()).await?;
    let started = std::time::Instant::now();
    let at_kill = loop {
        let view = store
            .batch(again_id, mcq_queue::Scope::All)
            .await?
            .context("the batch")?;
        if view.counts.succeeded > 0 {
            break view;
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(60),
            "no job finished"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    bouncer.kill_and_restart(Duration::from_secs(1))?;
    eprintln!(
        "pooler killed with {} of {} jobs done",
        at_kill.counts.succeeded, at_kill.total
    );
    assert!(
        !at_kill.done,
        "the batch ended before the pooler was killed"
    );
    let read_again = format!("{base}/v1/batches/{again_id}?wait=20s");
    api::until_ok(&client, &read_again, Duration::from_secs(90), &server).await?;
    let everyone = [&workers[0], &workers[1], &workers[2], &server];
    let jobs = specs.len() + again.len();
    outcome::assert_exactly_once(&db.url, &store, batch_id, &specs, jobs, &everyone).await?;
    outcome::assert_exactly_once(&db.url, &store, again_id, &again, jobs, &everyone).await?;
    for process in everyone {
        let said = process.log_text();
        assert!(
            !said.contains("connect_query"),
            "no bound is missing\n{said}"
        );
    }
    // Every server connection the pool opened has the bounds.
    let through = sqlx::PgPool::connect(&via).await?;
    let shown: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(&through)
        .await?;
    assert_eq!(shown, "5s");
    through.close().await;
    drop(workers);
    drop(server);

    // A fleet of 6 workers × 2 connections through the same 4.
    let out = logs.path().join("scale");
    let scale_logs = logs.path().join("bench");
    std::fs::create_dir_all(&scale_logs)?;
    let mut bench = McqProcess::spawn(
        "bench-scale",
        &[
            "bench",
            "scale",
            "--database-url",
            &db.url,
            "--fleet-url",
            &via,
            "--db-pool-mode",
            "transaction",
            "--poll",
            "50ms",
            "--workers",
            "6",
            "--task-ms",
            "20",
            "--rounds",
            "5",
            "--out",
            out.to_str().context("a UTF-8 path")?,
        ],
        &[],
        &scale_logs,
    )?;
    let mut most_servers = 0;
    let status = loop {
        if let Some(status) = bench.try_status()? {
            break status;
        }
        most_servers = most_servers.max(servers_of_role().await?);
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "bench scale failed\n{}", bench.logs());
    assert!(
        (1..=i64::from(SERVERS)).contains(&most_servers),
        "the fleet of 12 connections used {most_servers} server connections"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("scale.json"))?)?;
    assert_eq!(summary["settings"]["pool_mode"], "transaction");
    assert_eq!(summary["settings"]["through_pooler"], true);
    let row = &summary["sizes"][0];
    assert_eq!(row["workers"], 6);
    assert_eq!(row["tasks"], 30);
    assert_eq!(row["refused"], 0);

    // Migrations need a session of their own.
    let said = exits_1(
        "migrating-server",
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &via,
            "--db-pool-mode",
            "transaction",
        ],
        logs.path(),
    )?;
    assert!(
        said.contains("migrations need a PostgreSQL session"),
        "{said}"
    );
    drop(bouncer);

    // A pool that does not keep prepared statements apart, without bounds.
    let untracked = Pool {
        mode: "transaction",
        server_connections: SERVERS,
        settings: "max_prepared_statements = 0\n",
        ..Pool::default()
    };
    let bouncer = PgBouncer::start_with(&bin, &db.url, &untracked, logs.path())?;
    let via = bouncer.url(&db.name);
    let said = exits_1(
        "untracked-worker",
        &[
            "worker",
            "--database-url",
            &via,
            "--db-pool-mode",
            "transaction",
        ],
        logs.path(),
    )?;
    assert!(
        said.contains("max_prepared_statements"),
        "names the setting\n{said}"
    );
    assert!(
        said.contains("connect_query='SET idle_in_transaction_session_timeout = 5000"),
        "warns of the missing bounds with the line to add\n{said}"
    );
    Ok(())
}

/// Runs `mcq` with `args`, which must exit 1 within a minute; returns
/// what it logged.
fn exits_1(name: &str, args: &[&str], logs: &Path) -> anyhow::Result<String> {
    let mut process = McqProcess::spawn(name, args, &[], logs)?;
    let status = process.wait_timeout(Duration::from_secs(60))?;
    assert_eq!(status.code(), Some(1), "{name}\n{}", process.logs());
    Ok(process.log_text())
}

/// Server connections of the transaction-mode test's pool.
const SERVERS: u32 = 4;

/// The startup parameter the driver sends that PgBouncer does not know.
const IGNORED: &str = "extra_float_digits";

/// Where `deploy/pgbouncer-build.sh` installs PgBouncer by default.
const BUILT: &str = "/opt/pgbouncer-1.24/bin/pgbouncer";

/// The PgBouncer to test with: `MCQ_PGBOUNCER`, the one
/// `deploy/pgbouncer-build.sh` built, or one on PATH or where Debian puts
/// it, the first that is 1.21 or later (it carries prepared statements
/// across server connections, which transaction mode needs) or else the
/// first found. `None` (after saying so loudly) when there is none or, with
/// `tracking`, none new enough; under `CI=true` that fails instead.
fn pgbouncer_binary_with(tracking: bool) -> Option<PathBuf> {
    let found: Vec<PathBuf> = std::env::var_os("MCQ_PGBOUNCER")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(BUILT)])
        .chain(
            std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .unwrap_or_default()
                .into_iter()
                .chain([PathBuf::from("/usr/sbin")])
                .map(|dir| dir.join("pgbouncer")),
        )
        .filter(|bin| bin.is_file())
        .collect();
    let chosen = found
        .iter()
        .find(|bin| tracks_prepared_statements(bin))
        .or(if tracking { None } else { found.first() })
        .cloned();
    if chosen.is_none() {
        let what = if tracking {
            "no PgBouncer 1.21 or later (deploy/pgbouncer-build.sh builds one)"
        } else {
            "no pgbouncer binary (deploy/pgbouncer-build.sh, or Debian: apt-get install pgbouncer)"
        };
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("the PgBouncer tests need a PgBouncer under CI: {what}");
        }
        eprintln!("\n*** SKIPPING a PgBouncer test: {what} ***\n");
    }
    chosen
}

fn pgbouncer_binary() -> Option<PathBuf> {
    pgbouncer_binary_with(false)
}

/// True when `bin --version` says PgBouncer 1.21 or later.
fn tracks_prepared_statements(bin: &Path) -> bool {
    let Ok(out) = Command::new(bin).arg("--version").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .find_map(|line| line.strip_prefix("PgBouncer "))
        .unwrap_or("");
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (1, 21)
}

/// A PgBouncer in front of the test server, in one pool mode, letting the
/// startup parameters `ignore` pass (none when empty); stopped when
/// dropped.
struct PgBouncer {
    child: Child,
    port: u16,
    /// How it was started, to start it again.
    command: Command,
    log: PathBuf,
}

impl PgBouncer {
    fn start(
        bin: &Path,
        upstream: &str,
        mode: &str,
        ignore: &str,
        dir: &Path,
    ) -> anyhow::Result<PgBouncer> {
        let pool = Pool {
            mode,
            ignore,
            ..Pool::default()
        };
        PgBouncer::start_with(bin, upstream, &pool, dir)
    }

    fn start_with(
        bin: &Path,
        upstream: &str,
        pool: &Pool<'_>,
        dir: &Path,
    ) -> anyhow::Result<PgBouncer> {
        let Pool {
            mode,
            ignore,
            server_connections,
            database,
            settings,
            user,
        } = *pool;
        let (host, port) = host_and_port(upstream)?;
        let listen = free_port()?;
        let own = dir.join(format!("pgbouncer-{mode}-{listen}"));
        std::fs::create_dir_all(&own)?;
        let users = own.join("users.txt");
        // Trust: a user listed here passes without a password.
        let mut listed = String::from("\"postgres\" \"\"\n");
        if !user.is_empty() {
            listed.push_str(&format!("\"{user}\" \"\"\n"));
        }
        std::fs::write(&users, listed)?;
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
                "[databases]\n* = host={host} port={port} {database}\n\
                 [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\n\
                 unix_socket_dir =\nauth_type = trust\nauth_file = {}\n\
                 admin_users = postgres\n\
                 pool_mode = {mode}\ndefault_pool_size = {server_connections}\n\
                 max_client_conn = 400\n{ignore}{settings}logfile = {}\n",
                users.display(),
                own.join("pgbouncer.log").display()
            ),
        )?;
        // PgBouncer refuses to run as root; -u switches to another user.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let mut command = Command::new(bin);
        if root {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&own)
                .status()?;
            anyhow::ensure!(status.success(), "chown of {} failed", own.display());
            command.args(["-u", "postgres"]);
        }
        command
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut bouncer = PgBouncer {
            child: command.spawn().context("starting pgbouncer")?,
            port: listen,
            command,
            log: own.join("pgbouncer.log"),
        };
        bouncer.until_listening()?;
        Ok(bouncer)
    }

    /// Waits until the pooler accepts connections.
    fn until_listening(&mut self) -> anyhow::Result<()> {
        let start = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.try_wait()? {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                bail!("pgbouncer exited with {status}:\n{log}");
            }
            anyhow::ensure!(
                start.elapsed() < Duration::from_secs(30),
                "pgbouncer did not listen within 30 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// SIGKILLs the pooler (every client and server connection through it
    /// drops at once), leaves it down for `down`, and starts it again on
    /// the same port.
    fn kill_and_restart(&mut self, down: Duration) -> anyhow::Result<()> {
        self.child.kill()?;
        self.child.wait()?;
        std::thread::sleep(down);
        self.child = self.command.spawn().context("restarting pgbouncer")?;
        self.until_listening()
    }

    fn url(&self, database: &str) -> String {
        self.url_as("postgres", database)
    }

    fn url_as(&self, user: &str, database: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/{database}", self.port)
    }

    /// Client connections PgBouncer holds for `database` now, from its
    /// admin console (`SHOW CLIENTS`, one line per client).
    fn clients(&self, database: &str) -> anyhow::Result<usize> {
        let out = Command::new("psql")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "postgres", "-d", "pgbouncer", "-At", "-F", "|"])
            .args(["-c", "SHOW CLIENTS"])
            .output()
            .context("running psql against the admin console")?;
        anyhow::ensure!(
            out.status.success(),
            "SHOW CLIENTS failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // type|user|database|…
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|line| line.split('|').nth(2) == Some(database))
            .count())
    }
}

/// How a test's PgBouncer pools.
#[derive(Debug, Clone, Copy)]
struct Pool<'a> {
    /// `session` or `transaction`.
    mode: &'a str,
    /// Startup parameters let through (none when empty).
    ignore: &'a str,
    /// Server connections per database and user.
    server_connections: u32,
    /// More settings of the `[databases]` line (`connect_query=…`).
    database: &'a str,
    /// More lines of the `[pgbouncer]` section, each ending in a newline.
    settings: &'a str,
    /// A user besides `postgres` (none when empty).
    user: &'a str,
}

impl Default for Pool<'_> {
    fn default() -> Self {
        Pool {
            mode: "session",
            ignore: IGNORED,
            server_connections: 40,
            database: "",
            settings: "",
            user: "",
        }
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
