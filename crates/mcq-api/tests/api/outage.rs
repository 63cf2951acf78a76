//! Storage failures as clients see them: a database that cannot be reached
//! is a 503 worth retrying; a query the database refuses is an opaque 500
//! that names no table and no SQL.

use serde_json::json;

use crate::harness::TestApp;
use crate::on_both;

async fn a_closed_pool_is_unavailable(t: &TestApp) {
    t.store.close().await;
    for uri in ["/v1/workers", "/readyz"] {
        let answer = t.get(uri).await;
        answer.assert_problem(503, "/problems/unavailable");
        assert_eq!(
            answer.body["detail"], "the database is unavailable; try again later",
            "{uri}"
        );
    }
}
on_both!(closed_pool, a_closed_pool_is_unavailable);

async fn a_refused_query_is_an_opaque_internal_error(t: &TestApp) {
    let submitted = t.post_json("/v1/jobs", &json!({"runs": 1000})).await;
    assert_eq!(submitted.status.as_u16(), 202, "{:#?}", submitted.body);
    let id = submitted.body["id"].as_str().expect("job id").to_owned();
    let drop = if t.url.starts_with("sqlite:") {
        "DROP TABLE results"
    } else {
        "DROP TABLE results CASCADE"
    };
    mcq_testdb::execute(&t.url, drop)
        .await
        .expect("drop results");

    let answer = t.get(&format!("/v1/jobs/{id}")).await;
    answer.assert_problem(500, "/problems/internal");
    assert_eq!(answer.body["detail"], "internal error");
    let text = answer.body.to_string().to_lowercase();
    assert!(
        !text.contains("results") && !text.contains("sql") && !text.contains("relation"),
        "internal text leaked: {text}"
    );
}
on_both!(refused_query, a_refused_query_is_an_opaque_internal_error);

/// A TCP relay to PostgreSQL that can go silent: once frozen, it cuts the
/// connections it carries and accepts new ones without ever answering, as
/// a database host that vanished from the network looks.
struct Relay {
    port: u16,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
    carried: std::sync::Arc<std::sync::Mutex<tokio::task::JoinSet<()>>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Relay {
    async fn to(upstream: String) -> Relay {
        use std::sync::atomic::Ordering;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let carried = std::sync::Arc::new(std::sync::Mutex::new(tokio::task::JoinSet::new()));
        let accept = tokio::spawn({
            let (frozen, carried) = (frozen.clone(), carried.clone());
            async move {
                // Silent connections stay open, unanswered, as long as the relay.
                let mut silent = Vec::new();
                while let Ok((mut client, _)) = listener.accept().await {
                    if frozen.load(Ordering::SeqCst) {
                        silent.push(client);
                        continue;
                    }
                    let upstream = upstream.clone();
                    carried.lock().unwrap().spawn(async move {
                        if let Ok(mut server) = tokio::net::TcpStream::connect(upstream).await {
                            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                        }
                    });
                }
            }
        });
        Relay {
            port,
            frozen,
            carried,
            accept,
        }
    }

    fn freeze(&self) {
        self.frozen.store(true, std::sync::atomic::Ordering::SeqCst);
        self.carried.lock().unwrap().abort_all();
    }

    /// Cuts the connections it carries and closes its port, so that new
    /// connections are refused, as a database that was shut down.
    async fn refuse(&mut self) {
        self.accept.abort();
        let _ = (&mut self.accept).await;
        self.carried.lock().unwrap().abort_all();
    }
}

/// An app whose store reaches the test database through a [`Relay`].
async fn relayed_app(db: &mcq_testdb::TestDatabase) -> (Relay, axum::Router) {
    let upstream = db
        .url
        .split('@')
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("host:port in the test URL")
        .to_owned();
    let relay = Relay::to(upstream.clone()).await;
    let url = db
        .url
        .replace(&upstream, &format!("127.0.0.1:{}", relay.port));
    let store = mcq_queue::Store::connect(&url, mcq_queue::QueueConfig::default())
        .await
        .expect("connect through the relay");
    store.migrate().await.expect("migrate");
    let app = mcq_api::app(mcq_api::AppState {
        store,
        config: crate::harness::test_config(),
    });
    (relay, app)
}

/// Status and content type of one request to `app`.
async fn send(app: axum::Router, request: axum::http::Request<axum::body::Body>) -> (u16, String) {
    use tower::ServiceExt as _;
    let response = app.oneshot(request).await.expect("infallible");
    let content_type = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (response.status().as_u16(), content_type)
}

/// Reads and writes answer 503 within a second once the database is
/// gone, whether it refuses connections or leaves them unanswered, rather
/// than after the pool's acquire timeout (5 s), for which the driver
/// retries a refused connection. Time is paused, as in the test below.
#[tokio::test]
async fn requests_give_up_on_a_lost_database_within_a_second() {
    let Some(db) = mcq_testdb::postgres().await else {
        return;
    };
    for refused in [false, true] {
        let (mut relay, app) = relayed_app(&db).await;
        let submit = || {
            axum::http::Request::post("/v1/jobs")
                .header("content-type", "application/json")
                .body(axum::body::Body::from(r#"{"runs": 1000}"#))
                .unwrap()
        };
        let (status, _) = send(app.clone(), submit()).await;
        assert_eq!(status, 202);
        if refused {
            relay.refuse().await;
        } else {
            relay.freeze();
        }
        tokio::time::pause();
        let read = || {
            axum::http::Request::get(format!("/v1/jobs/{}", uuid::Uuid::nil()))
                .body(axum::body::Body::empty())
                .unwrap()
        };
        for (what, request) in [("read", read()), ("submission", submit())] {
            let asked = tokio::time::Instant::now();
            let (status, content_type) = send(app.clone(), request).await;
            let waited = asked.elapsed();
            assert_eq!(
                (status, content_type.as_str()),
                (503, "application/problem+json"),
                "{what}, refused: {refused}"
            );
            assert!(
                waited < std::time::Duration::from_secs(1),
                "a {what} waited {waited:?} for a database that is gone (refused: {refused})"
            );
        }
        tokio::time::resume();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.accept.abort();
        self.carried.lock().unwrap().abort_all();
    }
}

/// `/readyz` answers 503 within a second when the database stops
/// answering altogether, instead of waiting out the pool's acquire
/// timeout (5 s). Time is paused: it advances only while every task
/// waits, so the answer's virtual time tells which timer ended the wait.
#[tokio::test]
async fn readiness_gives_up_on_a_silent_database_within_a_second() {
    let Some(db) = mcq_testdb::postgres().await else {
        return;
    };
    let (relay, app) = relayed_app(&db).await;
    let ready = |app: axum::Router| async move {
        let request = axum::http::Request::get("/readyz")
            .body(axum::body::Body::empty())
            .unwrap();
        send(app, request).await
    };
    assert_eq!(ready(app.clone()).await.0, 200);

    relay.freeze();
    tokio::time::pause();
    let asked = tokio::time::Instant::now();
    let (status, content_type) = ready(app).await;
    let waited = asked.elapsed();
    assert_eq!(status, 503);
    assert_eq!(content_type, "application/problem+json");
    assert!(
        waited < std::time::Duration::from_secs(1),
        "the probe waited {waited:?} of the database's silence"
    );
}
