//! Announcements sent after the commit that made them true.
//!
//! A `NOTIFY` takes one lock for the whole database when its transaction
//! commits and keeps it until the commit is on disk. A transaction that
//! both wrote durable rows and notified therefore held that lock through
//! its own flush, and every other notifying commit queued behind it: the
//! fleet's completions once did, and so did submissions, hand-backs and
//! idle marks, each holding the lock for a flush of the write-ahead log
//! (at 64 workers, announcements waited up to 100 ms behind a submission's
//! flush; docs/results.md). So no transaction that writes durable rows
//! notifies. A completion only returns the announcement key of each job
//! it finished (`mcq_complete`); a submission, a retry, a hand-back or a
//! reaped lease only counts the tasks it queued. The store hands either to
//! its herald, which notifies in a transaction of its own that does not
//! wait for the disk. Jobs that end otherwise (a last failed attempt, one
//! the reaper fails, a cancellation) are announced the same way. An
//! announcement is a hint (`crate::finished`, `crate::work`): one lost in a
//! crash costs a waiter a re-read, or a worker a poll, on its own schedule,
//! never a result or a job.
//!
//! Finished jobs pass `holding.rs` first, which keeps a batch's counts
//! while the store holds another task of that batch.
//!
//! The herald is one task per store. While one notification is in flight,
//! later announcements gather and go out together, so a busy store sends
//! at most one notifying transaction per round trip, and the work queued
//! by several submissions wakes workers for their sum. A completion sent
//! on its own (`complete`: a job's result recorded as soon as it is
//! computed, or results that waited their longest) does not go through the
//! herald: it notifies in the same way right after its answer, on the
//! connection it just gave back, before its caller learns that its results
//! are recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::checkout::{Conn, Connections};
use super::{CHANNEL, FINISHED_CHANNEL, PgQueue};

/// Notifies per key how many of its jobs finished, and announces `$5`
/// queued tasks on the work channel (`mcq_wake` names the idle workers
/// they need), in a transaction that commits without waiting for the disk
/// (`set_config(…, true)` lasts to its commit).
const NOTIFY: &str = "
SELECT set_config('synchronous_commit', 'off', true),
       (SELECT count(pg_notify($1, t.k::text || ':' || t.n))
        FROM unnest($2::uuid[], $3::int8[]) AS t(k, n)),
       CASE WHEN $5 > 0 THEN pg_notify($4, mcq_wake($5)) END";

/// Where a store's completions leave the keys of the jobs they finished.
#[derive(Debug, Clone, Default)]
pub(super) struct Herald {
    tx: Arc<OnceLock<mpsc::UnboundedSender<Notice>>>,
}

/// What the herald is handed.
#[derive(Debug)]
enum Notice {
    /// How many jobs finished under each key, and the connection of the
    /// call that finished them, if it gave it to the announcement.
    Finished(BTreeMap<Uuid, i64>, Option<Conn>),
    /// How many tasks were queued, and the connection of the call that
    /// queued them, if it gave it to the announcement.
    Work(i64, Option<Conn>),
    /// Answered once everything handed before it has been sent.
    Flush(oneshot::Sender<()>),
}

impl PgQueue {
    /// Announces, after the commit that finished them, how many jobs
    /// finished under each key. Returns at once; the notification follows.
    pub(super) fn announce_finished(&self, finished: BTreeMap<Uuid, i64>) {
        let finished = self.hold_back(finished);
        if !finished.is_empty() {
            self.tell_herald(Notice::Finished(finished, None));
        }
    }

    /// Announces as [`PgQueue::announce_finished`] does, on `conn`, the
    /// connection of the call that finished the jobs, which the
    /// announcement gives back once it is sent. Taken from the store's
    /// connections, it went to whichever call asked first: after a busy
    /// worker's recording call, often a write-out of staged jobs or a
    /// heartbeat, which kept the announcement waiting for a connection
    /// (up to 130 ms at 64 workers on vm-i; docs/results.md).
    pub(super) fn announce_finished_on(&self, finished: BTreeMap<Uuid, i64>, conn: Conn) {
        let finished = self.hold_back(finished);
        if !finished.is_empty() {
            self.tell_herald(Notice::Finished(finished, Some(conn)));
        }
    }

    /// Announces on the work channel, after the commit that queued them,
    /// that `tasks` tasks wait. Returns at once; the notification follows.
    pub(super) fn announce_work(&self, tasks: usize) {
        if tasks > 0 {
            self.tell_herald(Notice::Work(i64::try_from(tasks).unwrap_or(i64::MAX), None));
        }
    }

    /// Announces as [`PgQueue::announce_work`] does, on `conn`, the
    /// connection of the call that queued the tasks (a submission), which
    /// the announcement gives back once it is sent.
    pub(super) fn announce_work_on(&self, tasks: usize, conn: Conn) {
        if tasks > 0 {
            let tasks = i64::try_from(tasks).unwrap_or(i64::MAX);
            self.tell_herald(Notice::Work(tasks, Some(conn)));
        }
    }

    /// Announces now, on `conn`, the connection of the call that finished
    /// the jobs: for a completion sent on its own (`complete`), whose
    /// caller waits for its answer anyway. A connection taken from the
    /// store's went to whichever call asked first, and a busy worker's
    /// other call (a heartbeat, a write-out of staged jobs, a claim) held
    /// the announcement back (up to 130 ms at 64 workers on vm-i).
    pub(super) async fn announce_now(
        &self,
        finished: BTreeMap<Uuid, i64>,
        conn: Result<Conn, sqlx::Error>,
    ) {
        let finished = self.hold_back(finished);
        if finished.is_empty() {
            return;
        }
        let (keys, counts): (Vec<Uuid>, Vec<i64>) = finished.into_iter().unzip();
        if let Err(err) = notify(conn, &keys, &counts, 0).await {
            tracing::debug!(error = %err, keys = keys.len(), "could not announce");
        }
    }

    /// Waits until every announcement handed to the herald so far has
    /// been sent (or has failed): before the pool closes, so that the
    /// last results of a worker that stops are announced too.
    pub(super) async fn announced(&self) {
        let waiting = self.holding.drain();
        if !waiting.is_empty() {
            self.tell_herald(Notice::Finished(waiting, None));
        }
        self.herald_sent().await;
    }

    /// Waits until the herald has sent everything handed to it so far,
    /// leaving the counts that wait for held tasks where they are.
    async fn herald_sent(&self) {
        if self.herald.tx.get().is_none() {
            return;
        }
        let (done, sent) = oneshot::channel();
        self.tell_herald(Notice::Flush(done));
        // A herald that ended has nothing left to send.
        let _ = sent.await;
    }

    fn tell_herald(&self, notice: Notice) {
        // The herald ends only with the last sender, so this cannot fail.
        let _ = self.herald_tx().send(notice);
    }

    fn herald_tx(&self) -> &mpsc::UnboundedSender<Notice> {
        self.herald.tx.get_or_init(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(proclaim(self.connections(), rx));
            tx
        })
    }

    /// Notes the tasks of batches among `tasks`, which this store's
    /// claims now hold (`holding.rs`).
    pub(super) fn hold(&self, tasks: &[crate::types::ClaimedTask]) {
        self.holding.hold(tasks);
    }

    /// Forgets the tasks `ids`, which this store's claims no longer hold,
    /// and announces what waited for them (`holding.rs`).
    pub(super) fn let_go(&self, ids: impl IntoIterator<Item = i64>) {
        let free = self.holding.let_go(ids);
        if !free.is_empty() {
            self.tell_herald(Notice::Finished(free, None));
        }
    }

    /// Forgets the tasks `ids` as [`PgQueue::let_go`] does, adding what
    /// waited for them to `finished`, which is about to be announced.
    pub(super) fn let_go_into(
        &self,
        ids: impl IntoIterator<Item = i64>,
        finished: &mut BTreeMap<Uuid, i64>,
    ) {
        for (key, count) in self.holding.let_go(ids) {
            *finished.entry(key).or_insert(0) += count;
        }
    }

    /// What of `finished` to announce now; the rest waits for a task of
    /// its batch that this store holds, or for a timer (`holding.rs`).
    fn hold_back(&self, finished: BTreeMap<Uuid, i64>) -> BTreeMap<Uuid, i64> {
        if finished.is_empty() {
            return finished;
        }
        let sorted = self.holding.sort(finished, tokio::time::Instant::now());
        if let Some(first) = sorted.start_timer {
            let holding = self.holding.clone();
            let tx = self.herald_tx().clone();
            tokio::spawn(async move {
                let mut at = first;
                loop {
                    tokio::time::sleep_until(at).await;
                    let (due, next) = holding.overdue(tokio::time::Instant::now());
                    if !due.is_empty() {
                        let _ = tx.send(Notice::Finished(due, None));
                    }
                    match next {
                        Some(next) => at = next,
                        None => break,
                    }
                }
            });
        }
        sorted.now
    }
}

/// The herald's loop: one notifying transaction for whatever gathered
/// since the last. Ends when the store is dropped.
async fn proclaim(connections: Connections, mut rx: mpsc::UnboundedReceiver<Notice>) {
    while let Some(first) = rx.recv().await {
        let mut gathered = Gathered::default();
        let mut next = Some(first);
        while let Some(notice) = next {
            gathered.add(notice);
            next = rx.try_recv().ok();
        }
        if !gathered.pending.is_empty() || gathered.work > 0 {
            let conn = match gathered.given.take() {
                Some(conn) => Ok(conn),
                None => connection(&connections, &mut rx, &mut gathered).await,
            };
            gathered.send(conn).await;
        }
        for done in gathered.flushes {
            let _ = done.send(());
        }
    }
}

/// What the herald gathered for one notifying transaction.
#[derive(Default)]
struct Gathered {
    /// How many jobs finished under each key.
    pending: BTreeMap<Uuid, i64>,
    /// How many tasks were queued.
    work: i64,
    /// A connection given with the finished jobs.
    given: Option<Conn>,
    /// Answered once the transaction is sent.
    flushes: Vec<oneshot::Sender<()>>,
}

impl Gathered {
    fn add(&mut self, notice: Notice) {
        match notice {
            Notice::Finished(more, conn) => {
                for (key, n) in more {
                    *self.pending.entry(key).or_insert(0) += n;
                }
                self.give(conn);
            }
            Notice::Work(tasks, conn) => {
                self.work = self.work.saturating_add(tasks);
                self.give(conn);
            }
            Notice::Flush(done) => self.flushes.push(done),
        }
    }

    /// Keeps a connection given with a notice: one is enough, and the
    /// others go back at once.
    fn give(&mut self, conn: Option<Conn>) {
        if self.given.is_none() {
            self.given = conn;
        }
    }

    /// One notifying transaction on `conn`: the finished jobs per key, and
    /// the queued tasks. A failure is only logged: waiters re-read and
    /// idle workers poll on their own schedule, and nothing is lost.
    async fn send(&mut self, conn: Result<Conn, sqlx::Error>) {
        let (keys, counts): (Vec<Uuid>, Vec<i64>) =
            std::mem::take(&mut self.pending).into_iter().unzip();
        if let Err(err) = notify(conn, &keys, &counts, self.work).await {
            tracing::debug!(error = %err, keys = keys.len(), work = self.work, "could not announce");
        }
    }
}

/// A connection of the store's for the herald, or the one a notice brings
/// meanwhile: waiting for the pool while a call's connection sat in the
/// channel would keep that call's store short of it (a store of one
/// connection until the pool's timeout). The wait given up is safe
/// (`checkout.rs`): the pool's acquire finishes on its own.
async fn connection(
    connections: &Connections,
    rx: &mut mpsc::UnboundedReceiver<Notice>,
    gathered: &mut Gathered,
) -> Result<Conn, sqlx::Error> {
    loop {
        tokio::select! {
            conn = connections.get() => return conn,
            Some(notice) = rx.recv() => {
                gathered.add(notice);
                if let Some(conn) = gathered.given.take() {
                    return Ok(conn);
                }
            }
        }
    }
}

/// Notifies on `conn` how many jobs finished under each key (`counts[i]`
/// under `keys[i]`) and announces `work` queued tasks.
async fn notify(
    conn: Result<Conn, sqlx::Error>,
    keys: &[Uuid],
    counts: &[i64],
    work: i64,
) -> Result<(), sqlx::Error> {
    sqlx::query(NOTIFY)
        .bind(FINISHED_CHANNEL)
        .bind(keys)
        .bind(counts)
        .bind(CHANNEL)
        .bind(work)
        .execute(&mut *conn?)
        .await?;
    Ok(())
}

/// PostgreSQL only: a completion's own transaction notifies only for the
/// jobs of their own it records, and the store announces the rest of what
/// it finished right after.
#[cfg(test)]
mod on_postgres {
    use std::collections::BTreeMap;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    use mcq_kernel::{Spec, VarianceReduction};
    use sqlx::Connection as _;
    use sqlx::postgres::PgListener;
    use uuid::Uuid;

    use super::{CHANNEL, FINISHED_CHANNEL};
    use crate::postgres::{PgQueue, migrated, registered_worker};
    use crate::store::QueueConfig;
    use crate::types::{ClaimedTask, Submission, TaskDone, TaskOutput};

    const PATIENCE: Duration = Duration::from_secs(30);

    fn done(task: &ClaimedTask) -> TaskDone {
        let valid = task.spec.validate().expect("claimed spec is valid");
        let result = valid.price(&AtomicBool::new(false)).expect("not cancelled");
        TaskDone {
            task_id: task.task_id,
            lease_token: task.lease_token,
            output: TaskOutput::Result(result),
            compute_ms: 0.5,
            compute_span: None,
        }
    }

    /// A connection listening to the finished-work announcements.
    async fn finished_listener(url: &str) -> PgListener {
        let mut listener = PgListener::connect(url).await.expect("listener");
        listener.listen(FINISHED_CHANNEL).await.expect("LISTEN");
        listener
    }

    async fn next(listener: &mut PgListener) -> String {
        let note = tokio::time::timeout(PATIENCE, listener.recv())
            .await
            .expect("a notification within the patience")
            .expect("the listener's connection");
        note.payload().to_owned()
    }

    /// Notifies `marker` from `pool` and returns what `listener` heard
    /// before it: everything announced by then, in order.
    async fn heard_before(
        listener: &mut PgListener,
        pool: &sqlx::PgPool,
        marker: &str,
    ) -> Vec<String> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(FINISHED_CHANNEL)
            .bind(marker)
            .execute(pool)
            .await
            .expect("marker");
        let mut heard = Vec::new();
        loop {
            let note = next(listener).await;
            if note == marker {
                return heard;
            }
            heard.push(note);
        }
    }

    /// A batch of `n` small jobs; its id.
    async fn submit_batch(q: &PgQueue, n: u64) -> Uuid {
        submit(q, n, true).await.batch_id.expect("a batch")
    }

    /// `n` small jobs, as a batch or each on its own.
    async fn submit(q: &PgQueue, n: u64, as_batch: bool) -> crate::types::Submitted {
        let jobs = (1..=n)
            .map(|seed| {
                Spec {
                    runs: Some(1000),
                    seed: Some(seed),
                    variance_reduction: VarianceReduction::None,
                    ..Spec::default()
                }
                .validate()
                .expect("valid")
            })
            .collect();
        let submission = Submission {
            as_batch,
            label: None,
            grid: None,
            jobs,
            idempotency: None,
            tenant: crate::DEFAULT_TENANT,
            priority: 0,
        };
        q.submit(submission, None).await.expect("submit")
    }

    /// Jobs that end without a result are announced by the herald too: a
    /// last failed attempt, and a batch's cancellation. Nothing else hands
    /// this store's herald anything, so it has been started only if they
    /// went through it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_and_cancellations_are_announced_after_their_commit() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let config = QueueConfig {
            max_attempts: 1,
            ..QueueConfig::default()
        };
        let q = migrated(&db.url, config).await;
        let mut listener = finished_listener(&db.url).await;
        // Submitted by another store, whose herald announces the work.
        let other = PgQueue::connect(&db.url, Arc::new(QueueConfig::default()))
            .await
            .expect("connect");
        let batch = submit_batch(&other, 3).await;
        let w = registered_worker(&q).await;
        let claimed = q.claim(w, 1, 0).await.expect("claim").tasks;
        assert_eq!(claimed.len(), 1);
        assert!(
            q.herald.tx.get().is_none(),
            "a claim hands the herald nothing"
        );

        let task = &claimed[0];
        let failed = q
            .fail(w, task.task_id, task.lease_token, "boom")
            .await
            .expect("fail");
        assert!(failed, "the lease was held");
        assert!(
            q.herald.tx.get().is_some(),
            "the failure went to the herald"
        );
        assert_eq!(next(&mut listener).await, format!("{batch}:1"));

        let cancelled = other
            .cancel_batch(batch, crate::Scope::All)
            .await
            .expect("cancel");
        assert_eq!(cancelled, Some(2));
        assert!(
            other.herald.tx.get().is_some(),
            "the submission and the cancellation went to the herald"
        );
        assert_eq!(next(&mut listener).await, format!("{batch}:2"));
        other.close().await;
        q.close().await;
    }

    /// A store on a fresh database that claimed the 3 tasks of a batch, a
    /// listener to the finished-work channel, the batch and the worker;
    /// the first task completed and its job heard of at once (the first
    /// after a quiet).
    async fn three_held() -> Option<(
        mcq_testdb::TestDatabase,
        PgQueue,
        PgListener,
        Uuid,
        Uuid,
        Vec<ClaimedTask>,
    )> {
        let db = mcq_testdb::postgres().await?;
        let q = migrated(&db.url, QueueConfig::default()).await;
        let mut listener = finished_listener(&db.url).await;
        let batch = submit_batch(&q, 3).await;
        let w = registered_worker(&q).await;
        let claimed = q.claim(w, 3, 0).await.expect("claim").tasks;
        assert_eq!(claimed.len(), 3);
        complete_one(&q, w, &claimed[0]).await;
        assert_eq!(
            next(&mut listener).await,
            format!("{batch}:1"),
            "the first at once"
        );
        Some((db, q, listener, batch, w, claimed))
    }

    /// Completes `task` on its own; none of it is refused.
    async fn complete_one(q: &PgQueue, worker: Uuid, task: &ClaimedTask) {
        let refused = q
            .complete(worker, vec![done(task)])
            .await
            .expect("complete");
        assert!(refused.is_empty(), "refused {refused:?}");
    }

    /// A store holding three tasks of a batch announces the first job it
    /// finishes at once, keeps the second while it holds the third, and
    /// sends both with the third: a reader waiting for the whole batch
    /// hears two announcements, not three.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_batch_is_announced_once_its_store_holds_none_of_its_tasks() {
        let Some((_db, q, mut listener, batch, w, claimed)) = three_held().await else {
            return;
        };
        complete_one(&q, w, &claimed[1]).await;
        q.herald_sent().await;
        assert_eq!(
            heard_before(&mut listener, &q.pool, "second").await,
            Vec::<String>::new(),
            "the third task of the batch is held: the second job waits"
        );
        complete_one(&q, w, &claimed[2]).await;
        assert_eq!(next(&mut listener).await, format!("{batch}:2"));
        q.close().await;
    }

    /// A count held back goes out after its longest wait while the store
    /// still holds a task of its batch, and a task handed back lets the
    /// batch go without announcing a job twice.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_held_back_count_goes_out_after_its_longest_wait() {
        let Some((_db, q, mut listener, batch, w, claimed)) = three_held().await else {
            return;
        };
        let held_back = tokio::time::Instant::now();
        complete_one(&q, w, &claimed[1]).await;
        assert_eq!(next(&mut listener).await, format!("{batch}:1"));
        assert!(
            held_back.elapsed() >= super::super::holding::LONGEST_WAIT / 2,
            "sent by the timer, not at once"
        );
        let kept = &claimed[2];
        assert_eq!(
            q.release(w, &[(kept.task_id, kept.lease_token)])
                .await
                .expect("release"),
            1
        );
        q.herald_sent().await;
        assert_eq!(
            heard_before(&mut listener, &q.pool, "after").await,
            Vec::<String>::new(),
            "the job announced by the timer is not announced again"
        );
        q.close().await;
    }

    /// A completion sent on its own has announced what it finished by the
    /// time it answers, without the herald: nothing else here hands the
    /// herald anything, so it has not been started.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_completion_of_its_own_announces_before_it_answers() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = migrated(&db.url, QueueConfig::default()).await;
        let mut listener = finished_listener(&db.url).await;
        // Submitted by another store, whose herald announces the work.
        let submitter = PgQueue::connect(&db.url, Arc::new(QueueConfig::default()))
            .await
            .expect("connect");
        let batch = submit_batch(&submitter, 2).await;
        let w = registered_worker(&q).await;
        let claimed = q.claim(w, 2, 0).await.expect("claim").tasks;
        assert_eq!(claimed.len(), 2);
        let refused = q
            .complete(w, claimed.iter().map(done).collect())
            .await
            .expect("complete");
        assert!(refused.is_empty(), "refused {refused:?}");
        assert!(
            q.herald.tx.get().is_none(),
            "the completion went through the herald"
        );
        // Sent before the marker, which goes out only now.
        sqlx::query("SELECT pg_notify($1, 'marker')")
            .bind(FINISHED_CHANNEL)
            .execute(&q.pool)
            .await
            .expect("marker");
        assert_eq!(next(&mut listener).await, format!("{batch}:2"));
        assert_eq!(next(&mut listener).await, "marker");
        submitter.close().await;
        q.close().await;
    }

    /// A completion's announcement goes out on the backend the completion
    /// used: a busy one-slot worker keeps one backend at work, not two.
    /// The store's pool holds two idle connections and hands out the
    /// older first, so an announcement that took its connection from the
    /// pool would reach the other backend.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_announcement_leaves_on_the_completion_s_backend() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = migrated(&db.url, QueueConfig::default()).await;
        crate::postgres::checkout::open_both(&q).await;
        let mut listener = finished_listener(&db.url).await;
        // Jobs of their own: a batch's would wait while the next claim
        // holds another of its tasks.
        submit(&q, 40, false).await;
        // The submission's wake-up leaves on the submission's connection
        // through the herald: done before the first round, which would
        // otherwise find that connection out.
        q.announced().await;
        let w = registered_worker(&q).await;
        let mut claimed = q.claim(w, 1, 0).await.expect("claim").tasks;
        // Other tests break connections, and a break sends the kept
        // connection back through the pool's check: only rounds during
        // which none broke show which backend announced.
        let mut checked = 0;
        for round in 0..30 {
            let before = crate::outage::dropped();
            let task = claimed.pop().expect("a task");
            let next_claim = q
                .complete_and_claim(w, vec![done(&task)], 1, 0)
                .await
                .expect("complete and claim");
            claimed = next_claim.claimed.expect("a claim");
            let note = tokio::time::timeout(PATIENCE, listener.recv())
                .await
                .expect("a notification within the patience")
                .expect("the listener's connection");
            assert_eq!(note.payload(), format!("{}:1", task.job_id));
            // The herald gives its connection back once the statement has
            // answered, a moment after the listener heard it.
            q.announced().await;
            let completion =
                crate::postgres::pooler::backend_pid(&mut q.conn().await.expect("a connection"))
                    .await
                    .expect("pg_backend_pid");
            if crate::outage::dropped() != before {
                continue;
            }
            assert_eq!(
                i64::from(note.process_id()),
                i64::from(completion),
                "round {round}: announced from another backend than the completion's"
            );
            checked += 1;
            if checked == 3 {
                break;
            }
        }
        assert_eq!(checked, 3, "rounds without a broken connection");
        q.close().await;
    }

    /// A worker going idle right after recording its last results lets
    /// the herald announce them first. Here the store has one connection,
    /// and the idle mark, once it runs, waits on it for the worker's row,
    /// which another session holds: the announcement is heard meanwhile,
    /// since the mark waited for it before taking the connection. (On one
    /// thread the mark, polled first, took the connection before the
    /// herald ran, and nothing was heard until the row was let go.)
    #[tokio::test(flavor = "current_thread")]
    async fn an_idle_mark_lets_the_announcements_before_it_go_first() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let config = QueueConfig {
            pool_size: 1,
            ..QueueConfig::default()
        };
        let q = migrated(&db.url, config).await;
        let mut listener = finished_listener(&db.url).await;
        let w = registered_worker(&q).await;
        let mut holder = sqlx::PgConnection::connect(&db.url).await.expect("connect");
        let mut tx = holder.begin().await.expect("begin");
        sqlx::query("SELECT 1 FROM workers WHERE id = $1 FOR UPDATE")
            .bind(w)
            .execute(&mut *tx)
            .await
            .expect("hold the worker's row");
        let key = Uuid::now_v7();
        q.announce_finished(BTreeMap::from([(key, 1)]));
        let marked = std::cell::Cell::new(false);
        let mark = async {
            let done = q.announce_idle(w).await;
            marked.set(true);
            done
        };
        let (done, heard) = tokio::join!(mark, async {
            let heard = tokio::time::timeout(PATIENCE, listener.recv()).await;
            let waiting = !marked.get();
            tx.rollback().await.expect("let the row go");
            (heard, waiting)
        });
        let (heard, mark_waiting) = heard;
        let note = heard
            .expect("the announcement within the patience")
            .expect("the listener's connection");
        assert_eq!(note.payload(), format!("{key}:1"));
        assert!(
            mark_waiting,
            "the announcement was heard only once the idle mark had ended ({done:?})"
        );
        done.expect("the idle mark");
        q.close().await;
    }

    /// No call that writes rows notifies in its own transaction, whose
    /// commit would take the database's notification lock and hold it
    /// through the flush. Here another transaction holds that lock: it
    /// notified and waits at its commit for a synchronous standby that
    /// never answers (`synchronous_standby_names` of a private cluster).
    /// A submission, a hand-back, a failure with attempts left and an
    /// idle mark each still commit and answer; their announcements, sent
    /// apart, are heard once the holder lets the lock go.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_commit_while_another_transaction_holds_the_notification_lock() {
        let Some(cluster) = mcq_testdb::private() else {
            return;
        };
        let url = cluster.create_database("notify_lock").expect("a database");
        for sql in [
            "ALTER SYSTEM SET synchronous_standby_names = 'nobody'",
            "SELECT pg_reload_conf()",
        ] {
            mcq_testdb::execute(&url, sql).await.expect(sql);
        }
        // A lease long enough that the announcements wait for the lock
        // (a quarter of it) instead of giving up.
        let config = QueueConfig {
            lease: Duration::from_secs(240),
            ..QueueConfig::default()
        };
        let q = migrated(&url, config).await;
        let mut work = PgListener::connect(&url).await.expect("listener");
        work.listen(CHANNEL).await.expect("LISTEN");

        mcq_testdb::execute(&url, "CREATE TABLE held (x int)")
            .await
            .expect("a table");
        let mut holder = sqlx::PgConnection::connect(&url).await.expect("connect");
        let pid: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut holder)
            .await
            .expect("pid");
        let held = tokio::spawn(async move {
            sqlx::query("SET synchronous_commit = on")
                .execute(&mut holder)
                .await
                .expect("synchronous commit");
            // A commit that wrote a row waits for the standby, holding
            // the lock.
            sqlx::query(
                "WITH w AS (INSERT INTO held VALUES (1)) SELECT pg_notify('elsewhere', 'held')",
            )
            .execute(&mut holder)
            .await
        });
        let waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'";
        let deadline = tokio::time::Instant::now() + PATIENCE;
        while mcq_testdb::query_i64(&url, waiting)
            .await
            .expect("activity")
            == 0
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the holder never waited"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let calls = async {
            let batch = submit_batch(&q, 6).await;
            let w = registered_worker(&q).await;
            let peer = registered_worker(&q).await;
            let mut claimed = q.claim(w, 2, 0).await.expect("claim").tasks;
            let handed_back = claimed.pop().expect("a task");
            let released = q
                .release(w, &[(handed_back.task_id, handed_back.lease_token)])
                .await
                .expect("release");
            let failed = claimed.pop().expect("a task");
            let retried = q
                .fail(w, failed.task_id, failed.lease_token, "boom")
                .await
                .expect("fail");
            // Two tasks running elsewhere: the idle mark announces itself.
            assert_eq!(q.claim(peer, 2, 0).await.expect("claim").tasks.len(), 2);
            (batch, released, retried, w)
        };
        let (batch, released, retried, w) = tokio::time::timeout(PATIENCE, calls)
            .await
            .expect("the calls waited for the notification lock");
        assert_eq!((released, retried), (1, true));
        let queued = mcq_testdb::query_i64(
            &url,
            &format!(
                "SELECT count(*) FROM tasks t JOIN jobs j ON j.id = t.job_id \
                 WHERE j.batch_id = '{batch}' AND t.state = 'queued'"
            ),
        )
        .await
        .expect("queued tasks");
        assert_eq!(
            queued,
            6 - 2,
            "the hand-back and the retry are queued again"
        );

        // The idle mark first waits for its store's announcements, so it
        // goes through a store that has none; its announcement then waits
        // for the lock, but the mark has committed.
        let other = migrated(&url, QueueConfig::default()).await;
        let idle = tokio::spawn(async move {
            let marked = other.announce_idle(w).await;
            other.close().await;
            marked
        });
        let marked =
            format!("SELECT count(*) FROM workers WHERE id = '{w}' AND idle_since IS NOT NULL");
        while mcq_testdb::query_i64(&url, &marked).await.expect("mark") == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the idle mark waited for the lock"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            tokio::time::timeout(Duration::from_millis(300), work.recv())
                .await
                .is_err(),
            "an announcement went out while the lock was held"
        );

        // Cancelled, the holder's wait ends (its commit stands) and the
        // lock goes: the announcements follow.
        mcq_testdb::execute(&url, &format!("SELECT pg_cancel_backend({pid})"))
            .await
            .expect("cancel");
        held.await
            .expect("the holder")
            .expect("the holder's commit");
        idle.await.expect("the idle mark").expect("the idle mark");
        let idle_note = format!("idle:{w}");
        let mut heard = Vec::new();
        while !(heard.contains(&idle_note) && heard.iter().any(|p| p != &idle_note)) {
            let note = tokio::time::timeout(PATIENCE, work.recv())
                .await
                .unwrap_or_else(|_| panic!("the announcements once the lock went; heard {heard:?}"))
                .expect("the listener's connection");
            heard.push(note.payload().to_owned());
        }
        q.close().await;
    }

    /// A job of its own is announced by the commit that records its
    /// result, in the recording statement (its reader hears of it without
    /// waiting for the worker to send anything more); a batch's job is
    /// left to the store, which announces it after the commit, and the
    /// store does not announce again what the statement announced. The
    /// signature of earlier workers announces nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_of_its_own_is_announced_by_the_commit_of_its_record() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = migrated(&db.url, QueueConfig::default()).await;
        let mut listener = finished_listener(&db.url).await;
        // Submitted by another store, whose herald announces the work.
        let other = PgQueue::connect(&db.url, Arc::new(QueueConfig::default()))
            .await
            .expect("connect");
        let w = registered_worker(&q).await;
        let record = "SELECT accepted, job_id, announced \
                      FROM mcq_record($1, $2, $3, $4, $5, $6, $7, $8, $9)";
        let mut rounds = Vec::new();
        for channel in [Some(FINISHED_CHANNEL), None] {
            let lone = submit(&other, 1, false).await.job_ids[0];
            let batch = submit_batch(&other, 1).await;
            let mut claimed = q.claim(w, 2, 0).await.expect("claim").tasks;
            assert_eq!(claimed.len(), 2);
            claimed.sort_unstable_by_key(|t| t.task_id);
            let results: Vec<_> = claimed
                .iter()
                .map(|t| match done(t).output {
                    TaskOutput::Result(r) => r,
                    TaskOutput::Partial(_) => unreachable!("whole jobs"),
                })
                .collect();
            let mut tx = q.pool.begin().await.expect("begin");
            let rows: Vec<(i64, Option<Uuid>, bool)> = sqlx::query_as(record)
                .bind(w)
                .bind(claimed.iter().map(|t| t.task_id).collect::<Vec<_>>())
                .bind(claimed.iter().map(|t| t.lease_token).collect::<Vec<_>>())
                .bind(vec![0.5_f64; 2])
                .bind(vec![None::<chrono::DateTime<chrono::Utc>>; 2])
                .bind(vec![None::<chrono::DateTime<chrono::Utc>>; 2])
                .bind(
                    results
                        .iter()
                        .map(|r| crate::plan::result_json(r).expect("json"))
                        .collect::<Vec<_>>(),
                )
                .bind(results.iter().map(|r| r.price).collect::<Vec<_>>())
                .bind(channel)
                .fetch_all(&mut *tx)
                .await
                .expect("mcq_record");
            // Nothing is heard before the commit: a marker sent meanwhile
            // comes first.
            let early = heard_before(&mut listener, &q.pool, "before the commit").await;
            assert!(early.is_empty(), "heard before the commit: {early:?}");
            tx.commit().await.expect("commit");
            let heard = heard_before(&mut listener, &q.pool, "after the commit").await;
            rounds.push((lone, batch, rows, heard));
        }
        let (lone, batch, rows, heard) = &rounds[0];
        let announced: BTreeMap<Option<Uuid>, bool> = rows.iter().map(|r| (r.1, r.2)).collect();
        assert_eq!(
            announced,
            BTreeMap::from([(Some(*lone), true), (Some(*batch), false)])
        );
        assert_eq!(heard, &[format!("{lone}:1")], "only the job of its own");
        let (_, _, rows, heard) = &rounds[1];
        assert!(rows.iter().all(|r| r.1.is_some() && !r.2), "{rows:?}");
        assert!(heard.is_empty(), "announced without a channel: {heard:?}");
        // The eight arguments of earlier workers: the same rows without
        // `announced`, and nothing sent.
        let lone = submit(&other, 1, false).await.job_ids[0];
        let task = q.claim(w, 1, 0).await.expect("claim").tasks.remove(0);
        let TaskOutput::Result(result) = done(&task).output else {
            unreachable!("a whole job")
        };
        let (accepted, key): (i64, Option<Uuid>) =
            sqlx::query_as("SELECT * FROM mcq_record($1, $2, $3, $4, $5, $6, $7, $8)")
                .bind(w)
                .bind(vec![task.task_id])
                .bind(vec![task.lease_token])
                .bind(vec![0.5_f64])
                .bind(vec![None::<chrono::DateTime<chrono::Utc>>])
                .bind(vec![None::<chrono::DateTime<chrono::Utc>>])
                .bind(vec![crate::plan::result_json(&result).expect("json")])
                .bind(vec![result.price])
                .fetch_one(&q.pool)
                .await
                .expect("the eight-argument mcq_record");
        assert_eq!((accepted, key), (task.task_id, Some(lone)));
        let heard = heard_before(&mut listener, &q.pool, "after the old record").await;
        assert!(heard.is_empty(), "the old signature announced: {heard:?}");

        // The store: each job announced once, the job of its own by the
        // record, the batch's job right after.
        let lone = submit(&other, 1, false).await.job_ids[0];
        let batch = submit_batch(&other, 1).await;
        let claimed = q.claim(w, 2, 0).await.expect("claim").tasks;
        let refused = q
            .complete(w, claimed.iter().map(done).collect())
            .await
            .expect("complete");
        assert!(refused.is_empty(), "refused {refused:?}");
        let mut heard = heard_before(&mut listener, &q.pool, "after the store's record").await;
        heard.sort();
        let mut expected = vec![format!("{lone}:1"), format!("{batch}:1")];
        expected.sort();
        assert_eq!(heard, expected, "each job once");
        other.close().await;
        q.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_completion_notifies_after_its_commit_not_within_it() {
        let Some(db) = mcq_testdb::postgres().await else {
            return;
        };
        let q = migrated(&db.url, QueueConfig::default()).await;
        let mut listener = finished_listener(&db.url).await;
        let batch = submit_batch(&q, 3).await;
        let w = registered_worker(&q).await;
        let claimed = q.claim(w, 2, 0).await.expect("claim").tasks;
        assert_eq!(claimed.len(), 2);

        // The function, called without a channel, returns the finished job's
        // key and sends nothing: a marker notified after its commit is the
        // first thing the listener hears.
        let first = done(&claimed[0]);
        let TaskOutput::Result(result) = &first.output else {
            unreachable!("a result")
        };
        let mut conn = q.pool.acquire().await.expect("connection");
        let (accepted, key): (Option<i64>, Option<Uuid>) = sqlx::query_as(
            "SELECT accepted, job_id FROM mcq_complete($1, $2, $3, $4, NULL, NULL, $5, $6, NULL, \
             NULL)",
        )
        .bind(w)
        .bind(vec![first.task_id])
        .bind(vec![first.lease_token])
        .bind(vec![first.compute_ms])
        .bind(vec![crate::plan::result_json(result).expect("json")])
        .bind(vec![result.price])
        .fetch_one(&mut *conn)
        .await
        .expect("mcq_complete");
        assert_eq!((accepted, key), (Some(first.task_id), Some(batch)));
        sqlx::query("SELECT pg_notify($1, 'marker')")
            .bind(FINISHED_CHANNEL)
            .execute(&mut *conn)
            .await
            .expect("marker");
        assert_eq!(next(&mut listener).await, "marker");
        // Back to the pool, which waits for its connections when it closes.
        drop(conn);

        // The store's two completions announce what they finished.
        let claimed_more = q
            .complete_and_claim(w, vec![done(&claimed[1])], 1, 0)
            .await
            .expect("complete and claim");
        assert!(claimed_more.refused.is_empty());
        assert_eq!(next(&mut listener).await, format!("{batch}:1"));
        let last = claimed_more.claimed.expect("a claim");
        assert_eq!(last.len(), 1);
        assert!(
            q.complete(w, vec![done(&last[0])])
                .await
                .expect("complete")
                .is_empty()
        );
        // Closed at once, as a stopping worker's store is: the last
        // announcement still goes out before the pool closes.
        q.close().await;
        assert_eq!(next(&mut listener).await, format!("{batch}:1"));
    }
}
