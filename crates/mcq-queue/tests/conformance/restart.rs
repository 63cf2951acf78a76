//! PostgreSQL only: a server restart under a live store. While the server
//! is down every call fails with a database error that the store calls
//! unavailable (never a panic or a hang); once it is back, the same store works again without reconnecting
//! by hand, and leases taken before the restart are still honoured.

use mcq_queue::Scope;
use std::time::Duration;

use mcq_queue::{QueueConfig, Store, StoreError};

use crate::harness::{batch, compute, drain, submit, worker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_survives_a_postgres_restart() {
    let cluster = match tokio::task::spawn_blocking(mcq_testdb::PgCluster::private)
        .await
        .expect("join")
    {
        Ok(cluster) => cluster,
        Err(err) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("PostgreSQL is required under CI: {err:#}")
        }
        Err(err) => {
            eprintln!("*** SKIPPING store_survives_a_postgres_restart: {err:#}");
            return;
        }
    };
    let url = cluster.create_database("mcq_restart").expect("createdb");
    let store = Store::connect(&url, QueueConfig::default())
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    let submitted = submit(&store, batch(5)).await;
    let w = worker(&store).await;
    let held = store.claim(w, 2).await.expect("claim");
    let mut events = store.work_events(); // starts the listener
    // The test cluster runs with synchronous_commit=off, and `stop` is an
    // immediate (crash) shutdown: give the WAL writer (every 200 ms) time to
    // hand our commits to the OS, as a default server would at commit.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let stopped = tokio::task::spawn_blocking(move || {
        cluster.stop().expect("stop");
        cluster
    });
    let cluster = stopped.await.expect("join");
    match store.claim(w, 1).await {
        Err(err @ StoreError::Database(_)) => assert!(
            err.is_unavailable(),
            "a stopped server is an outage, not a refused query: {err:?}"
        ),
        other => panic!("a stopped server must give a database error, got {other:?}"),
    }
    match store.heartbeat(w, &[]).await {
        Err(err) => assert!(err.is_unavailable(), "{err:?}"),
        Ok(beat) => panic!("a heartbeat reached a stopped server: {beat:?}"),
    }
    // The listener fails to reconnect; waiting still ends at the timeout.
    tokio::time::timeout(
        Duration::from_secs(10),
        events.wait(Duration::from_millis(200)),
    )
    .await
    .expect("a wait for work honours its timeout while the server is down");

    let cluster = tokio::task::spawn_blocking(move || {
        cluster.start().expect("start");
        cluster
    })
    .await
    .expect("join");
    let mut back = false;
    for _ in 0..50 {
        if store.ping().await.is_ok() {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(back, "the store reconnects by itself");
    let done = held.iter().map(compute).collect();
    assert!(
        store.complete(w, done).await.expect("complete").is_empty(),
        "leases survive the restart"
    );
    drain(&store, w).await;
    let view = store
        .batch(submitted.batch_id.expect("batch"), Scope::All)
        .await
        .expect("read")
        .expect("batch");
    assert_eq!((view.counts.succeeded, view.done), (5, true));
    store.close().await;
    drop(cluster);
}

/// Reads running back to back while the server crashes and starts again:
/// none of them fails, since a read whose connection broke is tried again
/// on a new one, which the pool waits for (up to `unreachable_after`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_ride_out_a_short_restart() {
    let cluster = match tokio::task::spawn_blocking(mcq_testdb::PgCluster::private)
        .await
        .expect("join")
    {
        Ok(cluster) => cluster,
        Err(err) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("PostgreSQL is required under CI: {err:#}")
        }
        Err(err) => {
            eprintln!("*** SKIPPING reads_ride_out_a_short_restart: {err:#}");
            return;
        }
    };
    let url = cluster.create_database("mcq_reread").expect("createdb");
    // A restart shorter than `unreachable_after` is ridden out; a loaded
    // machine may take longer than the default to stop and start a server.
    let config = QueueConfig {
        unreachable_after: Duration::from_secs(5),
        ..QueueConfig::default()
    };
    let store = Store::connect(&url, config).await.expect("connect");
    store.migrate().await.expect("migrate");
    let submitted = submit(&store, batch(3)).await;
    let batch_id = submitted.batch_id.expect("a batch");
    tokio::time::sleep(Duration::from_secs(1)).await; // see above: commits reach the OS

    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let (store, stop) = (store.clone(), stop.clone());
        readers.spawn(async move {
            let (mut reads, mut errors) = (0u64, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match store.batch(batch_id, Scope::All).await {
                    Ok(Some(_)) => reads += 1,
                    Ok(None) => errors.push("the batch vanished".to_owned()),
                    Err(err) => errors.push(format!("{err:?}")),
                }
            }
            (reads, errors)
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.stop().expect("stop");
        cluster.start().expect("start");
        cluster
    })
    .await
    .expect("join");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    while let Some(joined) = readers.join_next().await {
        let (reads, errors) = joined.expect("reader");
        assert!(
            errors.is_empty(),
            "reads failed across the restart: {errors:?}"
        );
        total += reads;
    }
    assert!(total > 0, "the readers read");
    drop(cluster);
}
