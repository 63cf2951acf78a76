//! A fresh app and database per test, and one-line requests.

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use mcq_api::{ApiConfig, AppState, app};
use mcq_queue::{QueueConfig, Store};
use serde_json::Value;
use tower::ServiceExt as _;

/// Held by every test that scrapes `/metrics`: a scrape sets the queue
/// gauges of the process's one recorder, which the metrics tests compare
/// between scrapes.
pub(crate) static SCRAPES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// An app over its own database.
pub(crate) struct TestApp {
    pub(crate) app: Router,
    pub(crate) url: String,
    /// The store behind the app (clones share its pool).
    pub(crate) store: Store,
    _dir: Option<tempfile::TempDir>,
}

/// What a request answered.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
}

impl Answer {
    /// Asserts a problem document with this status and type.
    pub(crate) fn assert_problem(&self, status: u16, kind: &str) {
        assert_eq!(self.status.as_u16(), status, "{:#?}", self.body);
        let content_type = self
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        assert_eq!(
            content_type,
            Some("application/problem+json"),
            "{:#?}",
            self.body
        );
        assert_eq!(self.body["type"], kind, "{:#?}", self.body);
        assert_eq!(self.body["status"], status, "{:#?}", self.body);
        assert!(
            self.body["title"].is_string() && self.body["detail"].is_string(),
            "{:#?}",
            self.body
        );
    }

    /// The JSON pointers listed in a problem's `errors`.
    pub(crate) fn pointers(&self) -> Vec<String> {
        self.body["errors"]
            .as_array()
            .map(|e| {
                e.iter()
                    .filter_map(|x| x["pointer"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Small limits so that "too large" cases stay small.
pub(crate) fn test_config() -> ApiConfig {
    ApiConfig {
        max_body_bytes: 256 * 1024,
        max_batch_jobs: 500,
        ..ApiConfig::default()
    }
}

impl TestApp {
    pub(crate) async fn sqlite() -> TestApp {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = mcq_testdb::sqlite_url(dir.path());
        TestApp::over(url, Some(dir), true).await
    }

    pub(crate) async fn postgres() -> Option<TestApp> {
        let db = mcq_testdb::postgres().await?;
        Some(TestApp::over(db.url, None, true).await)
    }

    /// An app over a database nobody migrated (SQLite, or PostgreSQL when
    /// `postgres`), as a server started with `--no-migrate` too early sees.
    pub(crate) async fn unmigrated(postgres: bool) -> Option<TestApp> {
        if postgres {
            let db = mcq_testdb::postgres().await?;
            return Some(TestApp::over(db.url, None, false).await);
        }
        let dir = tempfile::tempdir().expect("temp dir");
        let url = mcq_testdb::sqlite_url(dir.path());
        Some(TestApp::over(url, Some(dir), false).await)
    }

    async fn over(url: String, dir: Option<tempfile::TempDir>, migrate: bool) -> TestApp {
        let store = Store::connect(&url, QueueConfig::default())
            .await
            .expect("connect");
        if migrate {
            store.migrate().await.expect("migrate");
        }
        let app = app(AppState {
            store: store.clone(),
            config: test_config(),
        });
        TestApp {
            app,
            url,
            store,
            _dir: dir,
        }
    }

    /// Sends one request through the router.
    pub(crate) async fn send(&self, request: Request<Body>) -> Answer {
        let response = self
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("the router is infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        let text = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/plain"));
        let body = if bytes.is_empty() {
            Value::Null
        } else if text {
            // `/metrics`: the Prometheus text format.
            Value::String(String::from_utf8_lossy(&bytes).into_owned())
        } else {
            serde_json::from_slice(&bytes).unwrap_or_else(|_| {
                panic!("not JSON ({status}): {}", String::from_utf8_lossy(&bytes))
            })
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    pub(crate) async fn get(&self, uri: &str) -> Answer {
        self.send(Request::get(uri).body(Body::empty()).unwrap())
            .await
    }

    pub(crate) async fn post_json(&self, uri: &str, body: &Value) -> Answer {
        self.post_raw(uri, "application/json", body.to_string().into_bytes(), None)
            .await
    }

    pub(crate) async fn post_raw(
        &self,
        uri: &str,
        content_type: &str,
        body: Vec<u8>,
        key: Option<&str>,
    ) -> Answer {
        let mut request = Request::post(uri).header(header::CONTENT_TYPE, content_type);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        self.send(request.body(Body::from(body)).unwrap()).await
    }

    /// An empty POST declared as JSON, as clients send cancellations (a
    /// server without keys refuses writes of other content types).
    pub(crate) async fn post_empty(&self, uri: &str) -> Answer {
        self.send(
            Request::post(uri)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    /// Rows in the jobs table, read behind the API's back.
    pub(crate) async fn jobs_in_database(&self) -> i64 {
        mcq_testdb::query_i64(&self.url, "SELECT count(*) FROM jobs")
            .await
            .expect("count jobs")
    }
}
