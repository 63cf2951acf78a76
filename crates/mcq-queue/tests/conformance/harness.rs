//! Databases for the conformance tests and small helpers shared by them.

use std::path::PathBuf;
use std::time::Duration;

use mcq_kernel::{Spec, ValidSpec, VarianceReduction};
use mcq_queue::{
    ClaimedTask, ComputeSpan, QueueConfig, Store, Submission, Submitted, TaskDone, TaskOutput,
    WorkerInfo,
};
use uuid::Uuid;

/// A fresh, empty database of one backend.
#[derive(Debug)]
pub(crate) enum Db {
    /// A file in a directory removed on drop.
    Sqlite(PathBuf),
    /// A fresh database in the shared test cluster.
    Postgres(String),
    /// The same, with every batch of single-task jobs staged (written as
    /// staged rows that claims materialise), however small.
    PostgresStaged(String),
}

impl Db {
    /// A new SQLite file.
    pub(crate) fn sqlite() -> Db {
        let dir =
            std::env::temp_dir().join(format!("mcq-queue-conformance-{}", Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("creating a temp dir");
        Db::Sqlite(dir)
    }

    /// A new PostgreSQL database, or `None` (with a loud message) when no
    /// server is available outside CI.
    pub(crate) async fn postgres() -> Option<Db> {
        mcq_testdb::postgres().await.map(|db| Db::Postgres(db.url))
    }

    /// A new PostgreSQL database on which every batch is staged.
    pub(crate) async fn postgres_staged() -> Option<Db> {
        mcq_testdb::postgres()
            .await
            .map(|db| Db::PostgresStaged(db.url))
    }

    /// Its URL.
    pub(crate) fn url(&self) -> String {
        match self {
            Db::Sqlite(dir) => format!("sqlite:{}", dir.join("queue.sqlite").display()),
            Db::Postgres(url) | Db::PostgresStaged(url) => url.clone(),
        }
    }

    /// A migrated store on this database with `config`; several stores may
    /// share one database (like several processes).
    pub(crate) async fn store(&self, mut config: QueueConfig) -> Store {
        if let Db::PostgresStaged(_) = self {
            config.stage_from = 1;
        }
        let store = Store::connect(&self.url(), config).await.expect("connect");
        store.migrate().await.expect("migrate");
        store
    }

    /// A store with the default configuration.
    pub(crate) async fn default_store(&self) -> Store {
        self.store(QueueConfig::default()).await
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Db::Sqlite(dir) = self {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A cheap seeded Monte Carlo spec of `runs` paths.
pub(crate) fn spec(runs: u64, seed: u64) -> Spec {
    Spec {
        runs: Some(runs),
        seed: Some(seed),
        variance_reduction: VarianceReduction::None,
        ..Spec::default()
    }
}

/// [`spec`] validated, as a submission takes it.
pub(crate) fn job(runs: u64, seed: u64) -> ValidSpec {
    spec(runs, seed).validate().expect("test specs are valid")
}

/// A batch of `n` small jobs with seeds 1..=n.
pub(crate) fn batch(n: u64) -> Submission {
    Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: true,
        grid: None,
        label: Some("test".into()),
        jobs: (1..=n).map(|s| job(1000, s)).collect(),
        idempotency: None,
    }
}

/// One small job.
pub(crate) fn single(seed: u64) -> Submission {
    Submission {
        tenant: mcq_queue::DEFAULT_TENANT,
        priority: 0,
        as_batch: false,
        grid: None,
        label: None,
        jobs: vec![job(1000, seed)],
        idempotency: None,
    }
}

/// Submits and unwraps.
pub(crate) async fn submit(store: &Store, submission: Submission) -> Submitted {
    store.submit(submission).await.expect("submit")
}

/// Registers a worker with a made-up identity.
pub(crate) async fn worker(store: &Store) -> Uuid {
    let info = WorkerInfo {
        hostname: "test-host".into(),
        pid: std::process::id(),
        concurrency: 4,
    };
    store.register_worker(info).await.expect("register")
}

/// A store whose batches are written out as queued tasks (none staged),
/// holding `jobs` one-task jobs of one batch, and a registered worker.
pub(crate) async fn written_out(db: &Db, jobs: u64) -> (Store, Uuid) {
    let config = QueueConfig {
        stage_from: usize::MAX,
        ..QueueConfig::default()
    };
    let store = db.store(config).await;
    submit(&store, batch(jobs)).await;
    let me = worker(&store).await;
    (store, me)
}

/// Runs the kernel on a claimed task the way a worker would, timing it.
pub(crate) fn compute(task: &ClaimedTask) -> TaskDone {
    let (started, clock) = (std::time::SystemTime::now(), std::time::Instant::now());
    let valid = task.spec.validate().expect("claimed spec is valid");
    let cancel = std::sync::atomic::AtomicBool::new(false);
    let output = match &task.chunks {
        Some(chunks) => TaskOutput::Partial(
            valid
                .run_chunks(chunks.clone(), &cancel)
                .expect("not cancelled"),
        ),
        None => TaskOutput::Result(valid.price(&cancel).expect("not cancelled")),
    };
    TaskDone {
        task_id: task.task_id,
        lease_token: task.lease_token,
        output,
        compute_ms: 0.25,
        compute_span: Some(ComputeSpan::measured(started, clock.elapsed())),
    }
}

/// What a worker sends for a task that covers its whole job: the job's
/// result, not a partial (the completion a claim can carry in one call).
pub(crate) fn whole(task: &ClaimedTask) -> TaskDone {
    let mut done = compute(task);
    if let TaskOutput::Partial(partial) = &done.output {
        let valid = task.spec.validate().expect("claimed spec is valid");
        let range = task
            .chunks
            .clone()
            .expect("a partial comes from a chunk range");
        assert_eq!(
            (range.start, Some(range.end)),
            (0, valid.chunk_count()),
            "a small job is one task"
        );
        done.output = TaskOutput::Result(valid.finish(partial, done.compute_ms));
    }
    done
}

/// Claims until nothing is left, completing everything; returns the tasks claimed.
pub(crate) async fn drain(store: &Store, worker: Uuid) -> Vec<ClaimedTask> {
    let mut all = Vec::new();
    loop {
        let claimed = store.claim(worker, 50).await.expect("claim");
        if claimed.is_empty() {
            return all;
        }
        let done = claimed.iter().map(compute).collect();
        let refused = store.complete(worker, done).await.expect("complete");
        assert!(
            refused.is_empty(),
            "fresh leases must not be refused: {refused:?}"
        );
        all.extend(claimed);
    }
}

/// A configuration with short leases and backoff for timing tests.
pub(crate) fn quick(lease_ms: u64) -> QueueConfig {
    QueueConfig {
        lease: Duration::from_millis(lease_ms),
        retry_backoff: Duration::from_millis(lease_ms),
        ..QueueConfig::default()
    }
}

/// Tasks and results whose job no longer exists, and staged rows whose
/// batch no longer exists (none, if deletions keep the tables together),
/// read straight from the database.
pub(crate) async fn orphans(db: &Db) -> i64 {
    const ORPHANS: &str = "SELECT
        (SELECT count(*) FROM tasks t WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = t.job_id))
      + (SELECT count(*) FROM results r WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = r.job_id))";
    // Staged rows belong to their batch (PostgreSQL).
    const STAGED_ORPHANS: &str = "SELECT count(*) FROM staged s
        WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = s.batch_id)";
    match db {
        Db::Postgres(url) | Db::PostgresStaged(url) => {
            let pool = sqlx::PgPool::connect(url).await.expect("connect");
            let staged: i64 = sqlx::query_scalar(STAGED_ORPHANS)
                .fetch_one(&pool)
                .await
                .expect("count");
            staged
                + sqlx::query_scalar::<_, i64>(ORPHANS)
                    .fetch_one(&pool)
                    .await
                    .expect("count")
        }
        Db::Sqlite(..) => {
            let pool = sqlx::SqlitePool::connect(&db.url()).await.expect("connect");
            sqlx::query_scalar(ORPHANS)
                .fetch_one(&pool)
                .await
                .expect("count")
        }
    }
}

/// Tasks and jobs the worker list credits `worker` with after its next
/// heartbeat (which brings a PostgreSQL worker's counters up to date).
pub(crate) async fn done_by(store: &Store, worker: Uuid) -> (u64, u64) {
    store.heartbeat(worker, &[]).await.expect("heartbeat");
    let listed = store
        .workers()
        .await
        .expect("workers")
        .into_iter()
        .find(|w| w.id == worker)
        .expect("registered");
    (listed.tasks_done, listed.jobs_done)
}

/// A wait kept in progress on one of a store's signals until dropped.
///
/// On PostgreSQL a store holds its `LISTEN` only while something of it
/// waits, and every new subscription wakes every waiter once (with a
/// wildcard for long polls). A test that counts announcements between its
/// own waits keeps one of these, so the listener stays subscribed across
/// the gaps, however slow the machine.
pub(crate) struct KeptWait(tokio::task::JoinHandle<()>);

impl Drop for KeptWait {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Keeps a long poll open on `store` (the finished-work channel).
pub(crate) fn keep_long_poll(store: &Store) -> KeptWait {
    let mut events = store.finished_events();
    KeptWait(tokio::spawn(async move {
        loop {
            events
                .wait_for(Uuid::now_v7(), u64::MAX, Duration::from_secs(3600))
                .await;
        }
    }))
}

/// Keeps a worker of `store` waiting for work (the work channel).
pub(crate) fn keep_waiting_for_work(store: &Store) -> KeptWait {
    let mut events = store.work_events();
    KeptWait(tokio::spawn(async move {
        loop {
            events.wait(Duration::from_secs(3600)).await;
        }
    }))
}
