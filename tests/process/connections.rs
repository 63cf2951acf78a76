//! The connections `mcq serve` opens at start: under `max_connections`
//! pressure, workers take every connection the database allows their role
//! and the API goes on answering from them; and each is sent the reads of
//! a long poll before the first request.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use mcq_tests::{McqProcess, TempDir};

/// Connections the role may hold: the server's 4 and 2 more.
const LIMIT: i64 = 6;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_while_workers_take_every_connection() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-connections")?;
    // A role of its own with a connection limit (superusers have none),
    // owning the test database so that it can migrate it.
    let role = format!(
        "mcq_limited_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    mcq_testdb::execute(
        &db.url,
        &format!("CREATE ROLE {role} LOGIN CONNECTION LIMIT {LIMIT}"),
    )
    .await?;
    let _role = DropRole {
        url: db.url.clone(),
        role: role.clone(),
    };
    mcq_testdb::execute(
        &db.url,
        &format!("ALTER DATABASE {} OWNER TO {role}", db.name),
    )
    .await?;
    let url = db.url.replacen("postgres@", &format!("{role}@"), 1);
    anyhow::ensure!(url != db.url, "the test URL names its user: {}", db.url);

    let port = free_port()?;
    let listen = format!("127.0.0.1:{port}");
    let server = McqProcess::spawn(
        "server",
        &[
            "serve",
            "--listen",
            &listen,
            "--database-url",
            &url,
            "--db-pool-size",
            "4",
        ],
        &[("RUST_LOG", "info")],
        logs.path(),
    )?;
    let client = reqwest::Client::new();
    let base = format!("http://{listen}");
    wait_for(&server, "the server to be ready", || async {
        let answer = client.get(format!("{base}/readyz")).send().await;
        answer.is_ok_and(|a| a.status().is_success())
    })
    .await?;

    let workers: Vec<McqProcess> = (0..3)
        .map(|i| McqProcess::worker(&format!("worker{i}"), &url, &[], logs.path()))
        .collect::<anyhow::Result<_>>()?;
    let count = format!("SELECT count(*) FROM pg_stat_activity WHERE usename = '{role}'");
    wait_for(
        &workers[0],
        "the workers to take every connection",
        || async {
            mcq_testdb::query_i64(&db.url, &count)
                .await
                .is_ok_and(|n| n >= LIMIT)
        },
    )
    .await?;

    // More requests at once than the server has connections, repeatedly.
    for round in 0..5 {
        let mut answers = tokio::task::JoinSet::new();
        for _ in 0..12 {
            let (client, url) = (client.clone(), format!("{base}/v1/workers"));
            answers.spawn(async move { client.get(url).send().await });
        }
        while let Some(answer) = answers.join_next().await {
            let answer = answer?.context("GET /v1/workers")?;
            let status = answer.status();
            let body = answer.text().await.unwrap_or_default();
            assert!(
                status.is_success(),
                "round {round}: {status} {body}\n{}",
                server.logs()
            );
        }
    }
    let held = mcq_testdb::query_i64(&db.url, &count).await?;
    assert!(
        held >= LIMIT,
        "the role's connections stayed exhausted ({held})"
    );
    Ok(())
}

/// `mcq serve` sends a batch's read, the last of its warm-up, on each of
/// the 4 connections it keeps, before its first request: no request is
/// sent here, so nothing else would read a batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_reads_on_each_kept_connection_before_its_first_request() -> anyhow::Result<()> {
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-warm-reads")?;
    let listen = format!("127.0.0.1:{}", free_port()?);
    let server = McqProcess::spawn(
        "server",
        &["serve", "--listen", &listen, "--database-url", &db.url],
        &[("RUST_LOG", "info")],
        logs.path(),
    )?;
    let warmed = "SELECT count(DISTINCT pid) FROM pg_stat_activity
                  WHERE datname = current_database() AND pid <> pg_backend_pid()
                    AND query LIKE '%FROM batches b, LATERAL%'";
    wait_for(&server, "a batch's read on 4 backends", || async {
        mcq_testdb::query_i64(&db.url, warmed)
            .await
            .is_ok_and(|n| n == 4)
    })
    .await?;
    Ok(())
}

/// Drops the test's role when the test ends, passed or not (after the
/// processes, declared later, are gone), so the shared cluster keeps no
/// trace of it: the role's objects go back to `postgres` first.
struct DropRole {
    url: String,
    role: String,
}

impl Drop for DropRole {
    fn drop(&mut self) {
        let (url, role) = (&self.url, &self.role);
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                let _ = mcq_testdb::execute(url, &format!("REASSIGN OWNED BY {role} TO postgres"))
                    .await;
                let _ = mcq_testdb::execute(url, &format!("DROP ROLE {role}")).await;
            });
        });
    }
}

/// A port nothing listens on right now.
fn free_port() -> anyhow::Result<u16> {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").context("binding a probe")?;
    Ok(probe.local_addr()?.port())
}

/// Polls `done` until it holds, for up to a minute.
async fn wait_for<F, Fut>(process: &McqProcess, what: &str, done: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !done().await {
        if start.elapsed() > Duration::from_secs(60) {
            bail!("timed out waiting for {what}\n{}", process.logs());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// An operator reading `pg_stat_activity` tells the server's connections
/// from the workers' by their `application_name`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_process_names_its_connections() -> anyhow::Result<()> {
    use sqlx::Connection as _;
    let Some(db) = mcq_testdb::postgres().await else {
        return Ok(());
    };
    let logs = TempDir::new("mcq-process-names")?;
    let (server, _) = McqProcess::server("server", &db.url, &[], logs.path())?;
    let worker = McqProcess::worker("worker", &db.url, &["--concurrency", "1"], logs.path())?;
    let mut conn = sqlx::PgConnection::connect(&db.url).await?;
    let start = Instant::now();
    let names: Vec<String> = loop {
        // Client backends only: autovacuum's workers visit the fresh tables.
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT application_name FROM pg_stat_activity
             WHERE datname = current_database() AND pid <> pg_backend_pid()
               AND backend_type = 'client backend'
             ORDER BY 1",
        )
        .fetch_all(&mut conn)
        .await?;
        if names == ["mcq serve", "mcq worker"] || start.elapsed() > Duration::from_secs(30) {
            break names;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        names,
        ["mcq serve", "mcq worker"],
        "{}\n{}",
        server.logs(),
        worker.logs()
    );
    conn.close().await?;
    Ok(())
}
