//! Throwaway databases for mcq's tests.
//!
//! PostgreSQL tests run against a real server. [`postgres`] hands each test
//! a fresh database inside one shared cluster that this crate starts itself
//! (or inside the server named by `MCQ_TEST_DATABASE_URL`). [`PgCluster`]
//! starts a private cluster for tests that stop and restart the server.
//! [`execute`] and [`query_i64`] reach either backend's tables directly.
//!
//! When no server can be found or started, PostgreSQL tests are skipped
//! with a loud message — except under `CI=true`, where that is a failure.

mod cluster;
mod direct;

use std::path::{Path, PathBuf};

pub use cluster::{PgCluster, Shutdown};
pub use direct::{execute, query_i64};

/// A fresh, empty PostgreSQL database for one test.
#[derive(Debug, Clone)]
pub struct TestDatabase {
    /// Connection URL of the database.
    pub url: String,
    /// Database name.
    pub name: String,
}

/// Creates a fresh database in the shared test cluster.
///
/// Returns `None` (after printing why) when PostgreSQL is unavailable and
/// `CI` is not `true`; panics when it is unavailable under CI.
pub async fn postgres() -> Option<TestDatabase> {
    let admin_url = match admin_url() {
        Ok(url) => url,
        Err(err) => return skip_or_fail(&err),
    };
    match create_database(&admin_url).await {
        Ok(db) => Some(db),
        Err(err) => skip_or_fail(&err),
    }
}

/// Starts a private cluster ([`PgCluster::private`]) for a test that changes
/// the server's settings or stops it.
///
/// Returns `None` (after printing why) when none can be started and `CI`
/// is not `true`; panics when none can be started under CI.
pub fn private() -> Option<PgCluster> {
    match PgCluster::private() {
        Ok(cluster) => Some(cluster),
        Err(err) => {
            skip_or_fail(&err);
            None
        }
    }
}

/// A path for a fresh SQLite database file inside `dir`, as an `sqlite:` URL.
pub fn sqlite_url(dir: &Path) -> String {
    let file: PathBuf = dir.join(format!("mcq-test-{}.sqlite", uuid::Uuid::new_v4().simple()));
    format!("sqlite:{}", file.display())
}

fn skip_or_fail(err: &anyhow::Error) -> Option<TestDatabase> {
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("PostgreSQL is required under CI but unavailable: {err:#}");
    }
    eprintln!(
        "\n\
         ***************************************************************\n\
         *** SKIPPING PostgreSQL test: no server could be started.   ***\n\
         *** {err:#}\n\
         *** Install PostgreSQL server binaries (initdb, pg_ctl) or  ***\n\
         *** set MCQ_TEST_DATABASE_URL to a server you can use.      ***\n\
         ***************************************************************\n"
    );
    None
}

/// URL of a database on which we may `CREATE DATABASE`.
fn admin_url() -> anyhow::Result<String> {
    if let Ok(url) = std::env::var("MCQ_TEST_DATABASE_URL") {
        return Ok(url);
    }
    let cluster = PgCluster::shared()?;
    Ok(cluster.url("postgres"))
}

async fn create_database(admin_url: &str) -> anyhow::Result<TestDatabase> {
    use anyhow::Context as _;
    use sqlx::Connection as _;

    let name = format!("mcq_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .with_context(|| format!("connecting to {admin_url}"))?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .context("creating a test database")?;
    conn.close().await.ok();
    let url = replace_database(admin_url, &name);
    Ok(TestDatabase { url, name })
}

/// Swaps the database name at the end of a PostgreSQL URL.
fn replace_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    // The path starts at the first '/' after "scheme://authority".
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let base = match base[after_scheme..].find('/') {
        Some(slash) => &base[..after_scheme + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::replace_database;

    #[test]
    fn database_name_is_replaced_or_added() {
        assert_eq!(
            replace_database("postgres://u@h:5/postgres", "x"),
            "postgres://u@h:5/x"
        );
        assert_eq!(
            replace_database("postgres://u@h:5", "x"),
            "postgres://u@h:5/x"
        );
        assert_eq!(
            replace_database("postgres://u@h/db?sslmode=disable", "x"),
            "postgres://u@h/x?sslmode=disable"
        );
    }
}

#[cfg(test)]
mod live_tests {
    use sqlx::Connection as _;

    #[tokio::test]
    async fn fresh_database_accepts_connections_and_is_empty() {
        let Some(db) = super::postgres().await else {
            return;
        };
        let mut conn = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        let (name,): (String,) = sqlx::query_as("SELECT current_database()")
            .fetch_one(&mut conn)
            .await
            .expect("query");
        assert_eq!(name, db.name);
        let (tables,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
                .fetch_one(&mut conn)
                .await
                .expect("query");
        assert_eq!(tables, 0, "a fresh test database must be empty");
    }

    #[test]
    fn private_cluster_stops_and_starts_again() {
        let cluster = match super::PgCluster::private() {
            Ok(c) => c,
            Err(err) => {
                super::skip_or_fail(&err);
                return;
            }
        };
        let connect = || std::net::TcpStream::connect(("127.0.0.1", cluster.port()));
        assert!(connect().is_ok(), "server should accept TCP connections");
        cluster.stop().expect("stop");
        assert!(
            connect().is_err(),
            "a stopped server must refuse connections"
        );
        cluster.start().expect("start again");
        assert!(
            connect().is_ok(),
            "restarted server should accept connections"
        );
    }
}
