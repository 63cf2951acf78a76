//! SQL run behind the store's back, for tests that inspect or damage the
//! tables themselves: one fresh connection per call, to either backend.

use anyhow::Context as _;
use sqlx::Connection as _;

/// Runs one statement on the database at `url` (`sqlite:` or
/// `postgres://`); returns the rows it affected.
pub async fn execute(url: &str, sql: &str) -> anyhow::Result<u64> {
    let affected = if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        sqlx::query(trusted(sql))
            .execute(&mut conn)
            .await?
            .rows_affected()
    } else {
        let mut conn = sqlx::PgConnection::connect(url)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        sqlx::query(trusted(sql))
            .execute(&mut conn)
            .await?
            .rows_affected()
    };
    Ok(affected)
}

/// The single integer that `sql` selects from the database at `url`,
/// e.g. `SELECT count(*) FROM jobs`.
pub async fn query_i64(url: &str, sql: &str) -> anyhow::Result<i64> {
    let value = if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(url)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        sqlx::query_scalar(trusted(sql))
            .fetch_one(&mut conn)
            .await?
    } else {
        let mut conn = sqlx::PgConnection::connect(url)
            .await
            .with_context(|| format!("connecting to {url}"))?;
        sqlx::query_scalar(trusted(sql))
            .fetch_one(&mut conn)
            .await?
    };
    Ok(value)
}

/// The tests write their SQL themselves; no user input reaches it.
fn trusted(sql: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(sql.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn statements_and_scalars_reach_a_sqlite_file() {
        let dir = std::env::temp_dir().join(format!("mcq-direct-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let url = format!("{}?mode=rwc", crate::sqlite_url(&dir));
        execute(&url, "CREATE TABLE t (x INTEGER)")
            .await
            .expect("create");
        assert_eq!(
            execute(&url, "INSERT INTO t VALUES (1), (2)")
                .await
                .expect("insert"),
            2
        );
        assert_eq!(
            query_i64(&url, "SELECT sum(x) FROM t").await.expect("sum"),
            3
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
