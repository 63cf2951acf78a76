//! The schema check behind readiness: an empty database is not ready, a
//! migrated one is, and one missing or half-applying a migration this
//! binary embeds is not.

use mcq_queue::{QueueConfig, SchemaStatus, Store};
use sqlx::Connection as _;

use crate::harness::Db;

/// Runs one statement on the test database, outside the store.
async fn execute(db: &Db, sql: &str) {
    let url = db.url();
    if url.starts_with("sqlite:") {
        let mut conn = sqlx::SqliteConnection::connect(&url)
            .await
            .expect("connect");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .expect(sql);
    } else {
        let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut conn)
            .await
            .expect(sql);
    }
}

pub(crate) async fn schema_status_follows_the_migrations(db: &Db) {
    let store = Store::connect(&db.url(), QueueConfig::default())
        .await
        .expect("connect");
    assert_eq!(
        store.schema_status().await.expect("status"),
        SchemaStatus::Missing
    );

    store.migrate().await.expect("migrate");
    assert_eq!(
        store.schema_status().await.expect("status"),
        SchemaStatus::Ready
    );

    let latest = "(SELECT max(version) FROM _sqlx_migrations)";
    execute(
        db,
        &format!("UPDATE _sqlx_migrations SET success = false WHERE version = {latest}"),
    )
    .await;
    let status = store.schema_status().await.expect("status");
    let SchemaStatus::Dirty { version } = status else {
        panic!("a failed migration is dirty, got {status:?}");
    };

    // As if an older binary had migrated: its last migration is applied,
    // this one's newest is not (renumbered to 0, there may be no other row).
    execute(
        db,
        &format!(
            "UPDATE _sqlx_migrations SET version = 0, success = true WHERE version = {version}"
        ),
    )
    .await;
    assert_eq!(
        store.schema_status().await.expect("status"),
        SchemaStatus::Behind {
            missing: vec![version]
        }
    );
    assert!(!store.schema_status().await.expect("status").is_ready());
}
