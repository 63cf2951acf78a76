//! `GET /metrics`: who may read it, and that the queue-wide gauges are read
//! from the database at most once per refresh interval.
//!
//! The recorder is the process's, shared by every app in this binary: a
//! test that scrapes holds [`SCRAPES`] (a scrape sets the queue gauges).

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use mcq_api::{ApiConfig, AppState, app};
use mcq_metrics::text::{Scrape, parse};
use mcq_metrics::{QUEUE_READ_AT, QUEUE_TASKS};
use mcq_queue::{NewKey, Role};
use serde_json::json;
use tower::ServiceExt as _;

use crate::harness::{SCRAPES, TestApp, test_config};
use crate::on_both;

/// Status and body of `GET /metrics`, parsed when it answered 200.
async fn scrape(app: &Router, key: Option<&str>) -> (StatusCode, Option<Scrape>, String) {
    let mut request = Request::get("/metrics");
    if let Some(key) = key {
        request = request.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    let response = app
        .clone()
        .oneshot(request.body(Body::empty()).unwrap())
        .await
        .expect("the router is infallible");
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    let text = String::from_utf8(bytes.to_vec()).expect("UTF-8");
    if status != StatusCode::OK {
        return (status, None, text);
    }
    assert_eq!(
        content_type.as_ref().and_then(|v| v.to_str().ok()),
        Some(mcq_metrics::CONTENT_TYPE)
    );
    let scrape = parse(&text).unwrap_or_else(|err| panic!("{err}\n{text}"));
    (status, Some(scrape), text)
}

fn app_with_refresh(t: &TestApp, every: Duration) -> Router {
    app(AppState {
        store: t.store.clone(),
        config: ApiConfig {
            metrics_refresh: every,
            ..test_config()
        },
    })
}

async fn key(t: &TestApp, role: Role) -> String {
    let minted = mcq_keys::mint().expect("random bytes");
    t.store
        .create_key(NewKey {
            id: minted.id.clone(),
            tenant: "ops".into(),
            role,
            label: None,
            secret_hash: minted.secret_hash.clone(),
        })
        .await
        .expect("store the key");
    minted.key
}

async fn only_admins_read_the_metrics_once_keys_exist(t: &TestApp) {
    let _one = SCRAPES.lock().await;
    // Open while no key exists, like every other route.
    let (status, open, text) = scrape(&t.app, None).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        open.expect("parsed").family(QUEUE_TASKS).is_some(),
        "{text}"
    );

    let read = key(t, Role::Read).await;
    let submit = key(t, Role::Submit).await;
    let admin = key(t, Role::Admin).await;
    // A new app: its key cache has not seen the server open.
    let keyed = app_with_refresh(t, Duration::ZERO);
    for (key, expected) in [
        (None, 401),
        (Some(read.as_str()), 403),
        (Some(submit.as_str()), 403),
        (Some("mcq_0000000000000000_00"), 401),
        (Some(admin.as_str()), 200),
    ] {
        let (status, _, text) = scrape(&keyed, key).await;
        assert_eq!(status.as_u16(), expected, "key {key:?}: {text}");
    }
}
on_both!(access, only_admins_read_the_metrics_once_keys_exist);

async fn the_queue_is_read_once_per_refresh_interval(t: &TestApp) {
    let _one = SCRAPES.lock().await;
    let cached = app_with_refresh(t, Duration::from_secs(3600));
    let (_, first, text) = scrape(&cached, None).await;
    let first = first.unwrap_or_else(|| panic!("{text}"));
    assert_eq!(first.sum(QUEUE_TASKS, &[("state", "queued")]), 0.0);
    let read_at = first.sum(QUEUE_READ_AT, &[]);
    assert!(read_at > 1.7e9, "a Unix time: {read_at}");

    let submitted = t.post_json("/v1/jobs", &json!({"runs": 1000})).await;
    assert_eq!(submitted.status, 202, "{:#?}", submitted.body);
    let (_, again, _) = scrape(&cached, None).await;
    let again = again.expect("parsed");
    assert_eq!(
        again.sum(QUEUE_READ_AT, &[]),
        read_at,
        "within the interval the database is not read again"
    );
    assert_eq!(again.sum(QUEUE_TASKS, &[("state", "queued")]), 0.0);

    // With no interval every scrape reads: the job shows.
    let uncached = app_with_refresh(t, Duration::ZERO);
    let (_, fresh, _) = scrape(&uncached, None).await;
    let fresh = fresh.expect("parsed");
    assert_eq!(fresh.sum(QUEUE_TASKS, &[("state", "queued")]), 1.0);
    assert!(fresh.sum(QUEUE_READ_AT, &[]) >= read_at);
}
on_both!(refresh, the_queue_is_read_once_per_refresh_interval);
