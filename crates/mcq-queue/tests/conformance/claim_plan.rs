//! PostgreSQL only: the claim walks the index of queued tasks in order,
//! and a completion reads through indexes, whatever the statistics say;
//! both keep one plan per session, and only the claim commits without
//! waiting for the disk.
//!
//! The planner is made to believe the queue is nearly empty (ANALYZE of a
//! five-task queue, then 20,000 more tasks, autovacuum off) — the state of
//! every queue right after a large submit. The claim's statement, planned
//! with the settings `mcq_claim` carries, must read `tasks_queued` with an
//! ordered index scan and sort nothing: a bitmap scan or a sort there
//! reads every queued task on every claim (110 ms a claim with 90,000
//! tasks queued).

use mcq_queue::{QueueConfig, Store};
use serde_json::Value;
use sqlx::{Connection as _, Row as _};
use uuid::Uuid;

use crate::harness::{Db, batch, submit, worker, written_out};

/// `mcq_complete` for tasks that bring results (no partials), as the store
/// calls it, compute times included; the accepted task ids.
const COMPLETE: &str = "SELECT accepted FROM mcq_complete($1, $2, $3, $4, $5, $6, $7, $8, NULL, \
                        'mcq_test')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_plan_is_an_ordered_index_walk_on_stale_statistics() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let (_store, pool) = stale_statistics(&db, &["tasks"], 20_000).await;

    let ClaimStatements {
        settings,
        claim: statement,
        tenants,
        low,
        ahead,
    } = claim_statements(&pool).await;

    // PL/pgSQL plans the statement for the values of the first calls, then
    // may keep a generic plan that does not know the claim size: both kinds
    // must walk the index.
    for mode in ["force_custom_plan", "force_generic_plan"] {
        let mut tx = pool.begin().await.expect("begin");
        apply(&mut tx, &settings).await;
        sqlx::query("SELECT set_config('plan_cache_mode', $1, true)")
            .bind(mode)
            .execute(&mut *tx)
            .await
            .expect("plan cache mode");
        // Test-only SQL: the function's own source, read from the catalog.
        let explain = format!("EXPLAIN (FORMAT JSON) {statement}");
        let plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .bind(500_i64)
            .fetch_one(&mut *tx)
            .await
            .expect("explain the claim");
        let explain = format!("EXPLAIN (FORMAT JSON) {low}");
        let low_plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .fetch_one(&mut *tx)
            .await
            .expect("explain the low-water probe");
        let explain = format!("EXPLAIN (FORMAT JSON) {ahead}");
        let ahead_plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .fetch_one(&mut *tx)
            .await
            .expect("explain the count of a claim ahead");
        let explain = format!("EXPLAIN (FORMAT JSON) {tenants}");
        let tenants_plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .fetch_one(&mut *tx)
            .await
            .expect("explain the tenants' skip scan");
        tx.rollback().await.expect("rollback");

        // Disabled plan nodes cost 10^10 each; the claim's plan must not
        // cross the JIT thresholds because of that.
        for plan in [&plan, &tenants_plan, &low_plan, &ahead_plan] {
            assert!(
                plan[0].get("JIT").is_none(),
                "{mode}: the claim would be JIT-compiled: {}",
                plan[0]["JIT"]
            );
        }
        for (what, plan) in [
            ("claim", &plan),
            ("low-water probe", &low_plan),
            ("count of a claim ahead", &ahead_plan),
        ] {
            let nodes = node_types(&plan[0]["Plan"]);
            assert!(
                nodes
                    .iter()
                    .any(|n| n.0.starts_with("Index") && n.1 == "tasks_queued"),
                "{mode}: the {what} must walk tasks_queued in order; plan: {nodes:?}"
            );
            assert!(
                !nodes
                    .iter()
                    .any(|n| n.0 == "Sort" || n.0 == "Seq Scan" || n.0.starts_with("Bitmap")),
                "{mode}: the {what} must not read the whole queue; plan: {nodes:?}"
            );
        }
        let skip = node_types(&tenants_plan[0]["Plan"]);
        assert!(
            skip.iter().any(|n| n.1 == "tasks_queued")
                && skip.iter().any(|n| n.1 == "staged_order"),
            "{mode}: the tenants are found through the indexes; plan: {skip:?}"
        );
        assert!(
            !skip
                .iter()
                .any(|n| n.0 == "Seq Scan" || n.0.starts_with("Bitmap")),
            "{mode}: finding the tenants must not read the whole queue; plan: {skip:?}"
        );
    }
}

/// `mcq_complete` on the same kind of stale statistics (the planner
/// thinks `jobs` holds five rows): no table is read by a sequential scan.
/// Without the settings the function carries, this plan reads `workers`
/// by a sequential scan, and in `mcq bench compare` the same job update
/// joined the results to a sequential scan of every job (`auto_explain`,
/// 2026-11-30).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completion_reads_through_indexes_on_stale_statistics() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let (store, pool) = stale_statistics(&db, &["tasks", "jobs", "results", "workers"], 3000).await;
    let me = worker(&store).await;
    let mut claimed = store.claim(me, 400).await.expect("claim");
    assert_eq!(claimed.len(), 400);
    claimed.sort_unstable_by_key(|t| t.task_id);

    let mut tx = pool.begin().await.expect("begin");
    let accepted: Vec<i64> = sqlx::query_scalar(COMPLETE)
        .bind(me)
        .bind(claimed.iter().map(|t| t.task_id).collect::<Vec<_>>())
        .bind(claimed.iter().map(|t| t.lease_token).collect::<Vec<_>>())
        .bind(vec![0.5_f64; claimed.len()])
        .bind(vec![chrono::Utc::now(); claimed.len()])
        .bind(vec![chrono::Utc::now(); claimed.len()])
        .bind(vec![r#"{"price": 1.0}"#.to_owned(); claimed.len()])
        .bind(vec![1.0_f64; claimed.len()])
        .fetch_all(&mut *tx)
        .await
        .expect("complete");
    assert_eq!(accepted.len(), claimed.len(), "every lease is live");
    let scans: Vec<(String, i64)> = sqlx::query_as(
        "SELECT relname::text, seq_scan FROM pg_stat_xact_user_tables
         WHERE relname IN ('tasks', 'jobs', 'results', 'workers') ORDER BY relname",
    )
    .fetch_all(&mut *tx)
    .await
    .expect("this transaction's table statistics");
    tx.rollback().await.expect("rollback");
    assert!(
        scans.iter().any(|(table, _)| table == "jobs"),
        "the completion touched jobs: {scans:?}"
    );
    assert!(
        scans.iter().all(|(_, seq)| *seq == 0),
        "a completion must not scan whole tables: {scans:?}"
    );

    // Both functions plan once per session: with custom plans the claim was
    // planned on every call, which cost more than running it. (The older
    // signature of the completion is an SQL wrapper around this one.)
    for function in ["mcq_claim", "mcq_complete", "mcq_record"] {
        let settings: Vec<String> = sqlx::query_scalar(
            "SELECT p.proconfig FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
             WHERE p.proname = $1 AND l.lanname = 'plpgsql'",
        )
        .bind(function)
        .fetch_one(&pool)
        .await
        .expect("function exists");
        assert!(
            settings
                .iter()
                .any(|s| s == "plan_cache_mode=force_generic_plan"),
            "{function} must keep one generic plan per session: {settings:?}"
        );
    }
}

/// `mcq_record`, the completion of a few results in one statement, on the
/// same stale statistics: it finds the tasks and jobs it changes through
/// their indexes, one row each, rather than walking an index beside the
/// presented rows. Planned as a join of the accepted rows to `jobs`, it
/// walked the whole primary key of `jobs` for every completion (3,000 rows
/// here, 256 rows more after every opening of a staged row in
/// `mcq bench scale`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_completion_reads_only_its_own_rows_on_stale_statistics() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let (store, pool) = stale_statistics(&db, &["tasks", "jobs", "results", "workers"], 3000).await;
    let me = worker(&store).await;
    let mut claimed = store.claim(me, 20).await.expect("claim");
    assert_eq!(claimed.len(), 20);
    claimed.sort_unstable_by_key(|t| t.task_id);
    let n = claimed.len();

    let mut tx = pool.begin().await.expect("begin");
    let rows =
        sqlx::query("SELECT accepted, job_id FROM mcq_record($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(me)
            .bind(claimed.iter().map(|t| t.task_id).collect::<Vec<_>>())
            .bind(claimed.iter().map(|t| t.lease_token).collect::<Vec<_>>())
            .bind(vec![0.5_f64; n])
            .bind(vec![chrono::Utc::now(); n])
            .bind(vec![chrono::Utc::now(); n])
            .bind(vec![r#"{"price": 1.0}"#.to_owned(); n])
            .bind(vec![1.0_f64; n])
            .fetch_all(&mut *tx)
            .await
            .expect("record");
    let mut accepted: Vec<i64> = rows.iter().map(|r| r.get("accepted")).collect();
    accepted.sort_unstable();
    assert_eq!(
        accepted,
        claimed.iter().map(|t| t.task_id).collect::<Vec<_>>(),
        "every lease is live"
    );
    assert!(
        rows.iter()
            .all(|r| r.get::<Option<Uuid>, _>("job_id").is_some()),
        "each task finished its job"
    );
    let read: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT relname::text, seq_scan, idx_tup_fetch FROM pg_stat_xact_user_tables
         WHERE relname IN ('tasks', 'jobs') ORDER BY relname",
    )
    .fetch_all(&mut *tx)
    .await
    .expect("this transaction's table statistics");
    tx.rollback().await.expect("rollback");
    assert_eq!(
        read.len(),
        2,
        "the completion touched tasks and jobs: {read:?}"
    );
    for (table, seq, fetched) in &read {
        assert_eq!(*seq, 0, "{table} was scanned whole: {read:?}");
        assert!(
            *fetched <= 2 * n as i64,
            "{table}: {fetched} rows fetched through indexes for {n} tasks: {read:?}"
        );
    }
}

/// A claim commits without waiting for its WAL flush (a claim lost in a
/// crash is only claimed again, and its late completion is fenced); the
/// completion that records a result still waits, and the setting does not
/// leak into the connection's later transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_claim_commits_asynchronously() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let (_store, me, mut conn) = queue_and_session(&db, 2).await;
    // The test cluster runs with `synchronous_commit = off` for speed;
    // this session runs with PostgreSQL's default.
    sqlx::query("SET synchronous_commit = on")
        .execute(&mut conn)
        .await
        .expect("the default commit mode");

    let mut tx = conn.begin().await.expect("begin");
    let (task, token): (i64, Uuid) =
        sqlx::query_as("SELECT id, lease_token FROM mcq_claim($1, 1, 30) WHERE id IS NOT NULL")
            .bind(me)
            .fetch_one(&mut *tx)
            .await
            .expect("claim one task");
    assert_eq!(commit_mode(&mut tx).await, "off", "the claim's own commit");
    tx.commit().await.expect("commit the claim");
    assert_eq!(
        commit_mode(&mut conn).await,
        "on",
        "after the claim's transaction"
    );

    let mut tx = conn.begin().await.expect("begin");
    let accepted: Vec<i64> = sqlx::query_scalar(COMPLETE)
        .bind(me)
        .bind(vec![task])
        .bind(vec![token])
        .bind(vec![0.5_f64])
        .bind(vec![chrono::Utc::now()])
        .bind(vec![chrono::Utc::now()])
        .bind(vec![r#"{"price": 1.0}"#.to_owned()])
        .bind(vec![1.0_f64])
        .fetch_all(&mut *tx)
        .await
        .expect("complete");
    assert_eq!(accepted, vec![task], "the claim's lease is live");
    assert_eq!(
        commit_mode(&mut tx).await,
        "on",
        "a completion waits for the disk"
    );
    tx.commit().await.expect("commit the completion");
}

/// A store with `jobs` queued, a registered worker, and a session of the
/// test's own for the statements it runs directly.
async fn queue_and_session(db: &Db, jobs: u64) -> (Store, Uuid, sqlx::PgConnection) {
    let store = db.default_store().await;
    let me = worker(&store).await;
    submit(&store, batch(jobs)).await;
    let conn = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    (store, me, conn)
}

/// The `synchronous_commit` in force on `conn` (in its transaction, if any).
async fn commit_mode(conn: &mut sqlx::PgConnection) -> String {
    sqlx::query_scalar("SELECT current_setting('synchronous_commit')")
        .fetch_one(conn)
        .await
        .expect("read synchronous_commit")
}

/// The claim's probes that need no order, which tenants have queued tasks
/// and whether one has more than 64 of them due, walk `tasks_queued` from
/// its end. Claims take tasks from the front of a tenant's range, and the
/// entry of a claimed task stays in the index while a snapshot older than
/// its claim is open, as the long statements of a busy fleet keep one: a
/// probe from the front stepped over every such entry, on every claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claims_probes_do_not_walk_the_tasks_claimed_before_them() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    let (store, me) = written_out(&db, 600).await;
    // A snapshot from before the claim keeps the claimed tasks' queued
    // versions, and so their entries.
    let mut older = sqlx::PgConnection::connect(&db.url())
        .await
        .expect("connect");
    let mut snapshot = older.begin().await.expect("begin");
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *snapshot)
        .await
        .expect("repeatable read");
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM tasks WHERE state = 'queued'")
        .fetch_one(&mut *snapshot)
        .await
        .expect("take the snapshot");
    assert_eq!(seen, 600);
    assert_eq!(store.claim(me, 500).await.expect("claim").len(), 500);

    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    let ClaimStatements {
        settings,
        tenants,
        low,
        ..
    } = claim_statements(&pool).await;
    let mut tx = pool.begin().await.expect("begin");
    apply(&mut tx, &settings).await;
    // 100 tasks are left, so the low-water probe finds its 65th; a walk
    // from the front read the 500 claimed ones first.
    for (what, statement, most) in [
        ("tenants' skip scan", &tenants, 4),
        ("low-water probe", &low, 70),
    ] {
        // Test-only SQL: the function's own source, read from the catalog.
        let explain = format!("EXPLAIN (ANALYZE, FORMAT JSON) {statement}");
        let plan: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(explain))
            .fetch_one(&mut *tx)
            .await
            .unwrap_or_else(|e| panic!("explain the {what}: {e}"));
        let nodes = node_types(&plan[0]["Plan"]);
        assert!(
            nodes
                .iter()
                .any(|n| n.0 == "Index Only Scan" && n.1 == "tasks_queued"),
            "the {what} reads tasks_queued alone; plan: {nodes:?}"
        );
        let read = heap_fetches(&plan[0]["Plan"]);
        assert!(
            read <= most,
            "the {what} read {read} tasks, at most {most} expected; plan: {plan}"
        );
    }
    tx.rollback().await.expect("rollback");
    snapshot.rollback().await.expect("end the snapshot");
}

/// The statements inside `mcq_claim`, as the tests run them apart (tenant
/// 0's), and the settings the function runs them with.
struct ClaimStatements {
    settings: Vec<String>,
    /// One tenant's part of the claim (its size is `$1`).
    claim: String,
    /// The tenants with work waiting: a skip scan.
    tenants: String,
    /// Whether the tenant's due queued tasks are running low.
    low: String,
    /// How many due tasks are queued, up to what a claim ahead's share needs.
    ahead: String,
}

async fn claim_statements(pool: &sqlx::PgPool) -> ClaimStatements {
    let row = sqlx::query("SELECT prosrc, proconfig FROM pg_proc WHERE proname = 'mcq_claim'")
        .fetch_one(pool)
        .await
        .expect("mcq_claim exists");
    let source: String = row.get("prosrc");
    let settings: Vec<String> = row
        .get::<Option<Vec<String>>, _>("proconfig")
        .unwrap_or_default();
    let statement = |from: &str, to: &str| {
        let start = source
            .find(from)
            .unwrap_or_else(|| panic!("{from:?} in mcq_claim"));
        let end = start
            + source[start..]
                .find(to)
                .unwrap_or_else(|| panic!("{to:?} after {from:?}"));
        source[start..end].to_owned()
    };
    let claim = statement("SELECT array_agg(f.id) INTO got", ";")
        .replace(" INTO got", "")
        .replace("t.tenant_id = tenant", "t.tenant_id = 0")
        .replace("LIMIT part", "LIMIT $1");
    let tenants = statement("WITH RECURSIVE q", ";").replace("\nINTO waiting, staged_for", "");
    let low = format!(
        "{}OFFSET 64 LIMIT 1",
        statement("SELECT 1 FROM tasks t", "OFFSET low_water LIMIT 1")
    )
    .replace("t.tenant_id = tenant", "t.tenant_id = 0");
    let ahead = statement("SELECT count(*) INTO seen", ";")
        .replace(" INTO seen", "")
        .replace("least(fair - behind, 1024)", "1000");
    ClaimStatements {
        settings,
        claim,
        tenants,
        low,
        ahead,
    }
}

/// Applies a function's `name=value` settings to the transaction `tx`.
async fn apply(tx: &mut sqlx::PgConnection, settings: &[String]) {
    for setting in settings {
        let (name, value) = setting.split_once('=').expect("name=value");
        sqlx::query("SELECT set_config($1, $2, true)")
            .bind(name)
            .bind(value)
            .execute(&mut *tx)
            .await
            .expect("apply the function's setting");
    }
}

/// Heap tuples an `EXPLAIN ANALYZE` plan's index-only scans fetched.
fn heap_fetches(plan: &Value) -> i64 {
    plan_nodes(plan)
        .iter()
        .map(|n| n["Heap Fetches"].as_i64().unwrap_or(0))
        .sum()
}

/// A migrated store whose `tables` the planner believes nearly empty: with
/// autovacuum off they are analyzed after a five-job batch, then `more`
/// jobs are submitted, as right after a large submit.
async fn stale_statistics(db: &Db, tables: &[&str], more: u64) -> (Store, sqlx::PgPool) {
    // Batches written out as queued tasks (none staged): the plans under
    // test are those of claims and completions of such tasks.
    let config = QueueConfig {
        stage_from: usize::MAX,
        ..QueueConfig::default()
    };
    let store = db.store(config).await;
    let pool = sqlx::PgPool::connect(&db.url()).await.expect("connect");
    for table in tables {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER TABLE {table} SET (autovacuum_enabled = false)"
        )))
        .execute(&pool)
        .await
        .expect("autovacuum off");
    }
    submit(&store, batch(5)).await;
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ANALYZE {}",
        tables.join(", ")
    )))
    .execute(&pool)
    .await
    .expect("analyze");
    submit(&store, batch(more)).await;
    (store, pool)
}

/// (node type, index name) of a node and everything under it.
fn node_types(plan: &Value) -> Vec<(String, String)> {
    plan_nodes(plan)
        .iter()
        .map(|n| {
            (
                n["Node Type"].as_str().unwrap_or_default().to_owned(),
                n["Index Name"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A plan node and every node under it.
fn plan_nodes(node: &Value) -> Vec<&Value> {
    let mut out = vec![node];
    for child in node["Plans"].as_array().into_iter().flatten() {
        out.extend(plan_nodes(child));
    }
    out
}

/// A completion sent with a claim (`mcq_record_and_claim`, and
/// `mcq_complete_and_claim` of older workers and large completions)
/// commits like any completion: `mcq_claim` turns the synchronous commit
/// off for its transaction, and the combined call must turn it back to
/// whatever the session had, here PostgreSQL's default and then `local`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_sent_with_a_claim_waits_for_the_disk() {
    let Some(db) = Db::postgres().await else {
        return;
    };
    for call in [
        "mcq_record_and_claim($1, $2, $3, $4, $5, $6, $7, $8, 1, 30)",
        "mcq_record_and_claim($1, $2, $3, $4, $5, $6, $7, $8, 1, 30, true)",
        "mcq_complete_and_claim($1, $2, $3, $4, $5, $6, $7, $8, 'mcq_test', 1, 30)",
    ] {
        sent_with_a_claim_waits_for_the_disk(&db, call).await;
    }
}

async fn sent_with_a_claim_waits_for_the_disk(db: &Db, call: &str) {
    let (_store, me, mut conn) = queue_and_session(db, 3).await;
    let mut claimed: Vec<(i64, Uuid)> = Vec::new();
    for (mode, expected_claims) in [("on", 1_usize), ("local", 1)] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SET synchronous_commit = {mode}"
        )))
        .execute(&mut conn)
        .await
        .expect("set the session's commit mode");
        let mut tx = conn.begin().await.expect("begin");
        let (ids, tokens): (Vec<i64>, Vec<Uuid>) = claimed.drain(..).unzip();
        let n = ids.len();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT accepted, id, lease_token FROM {call}"
        )))
        .bind(me)
        .bind(&ids)
        .bind(tokens)
        .bind(vec![0.5_f64; n])
        .bind(vec![chrono::Utc::now(); n])
        .bind(vec![chrono::Utc::now(); n])
        .bind(vec![r#"{"price": 1.0}"#.to_owned(); n])
        .bind(vec![1.0_f64; n])
        .fetch_all(&mut *tx)
        .await
        .expect("complete and claim");
        let accepted: Vec<i64> = rows
            .iter()
            .filter_map(|r| r.get::<Option<i64>, _>("accepted"))
            .collect();
        assert_eq!(accepted, ids, "{call}: every presented lease is live");
        claimed = rows
            .iter()
            .filter_map(|r| Some((r.get::<Option<i64>, _>("id")?, r.get("lease_token"))))
            .collect();
        assert_eq!(claimed.len(), expected_claims, "claimed one task");
        assert_eq!(
            commit_mode(&mut tx).await,
            mode,
            "{call}: the session's commit mode is back for the commit"
        );
        tx.commit().await.expect("commit");
    }
}
