//! The dashboard's page and assets as a browser receives them, and the
//! refusal of writes that a page of another site makes a browser send.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::json;
use tower::ServiceExt as _;

use crate::harness::TestApp;
use crate::on_both;

/// Status, headers and raw body of a GET.
async fn fetch(t: &TestApp, uri: &str) -> (StatusCode, header::HeaderMap, String) {
    let response = t
        .app
        .clone()
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .expect("the router is infallible");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .expect("body");
    (
        status,
        headers,
        String::from_utf8(bytes.to_vec()).expect("UTF-8"),
    )
}

fn header(headers: &header::HeaderMap, name: header::HeaderName) -> &str {
    headers.get(&name).map_or("", |v| v.to_str().unwrap_or(""))
}

/// Every `/assets/…` path the page names.
fn asset_paths(page: &str) -> Vec<String> {
    page.split('"')
        .filter(|part| part.starts_with("/assets/"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_page_and_its_assets_come_with_their_types_caching_and_policy() {
    let t = TestApp::sqlite().await;
    let (status, headers, page) = fetch(&t, "/").await;
    assert_eq!(status, 200);
    assert_eq!(
        header(&headers, header::CONTENT_TYPE),
        "text/html; charset=utf-8"
    );
    assert_eq!(header(&headers, header::CACHE_CONTROL), "no-cache");
    assert_eq!(
        header(&headers, header::CONTENT_SECURITY_POLICY),
        mcq_api::CONTENT_SECURITY_POLICY
    );
    assert_eq!(header(&headers, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    let assets = asset_paths(&page);
    assert!(assets.len() >= 5, "{page}");
    let mut total = page.len();
    for path in &assets {
        let (status, headers, body) = fetch(&t, path).await;
        assert_eq!(status, 200, "{path}");
        let expected = if path.ends_with(".js") {
            "text/javascript; charset=utf-8"
        } else {
            assert!(path.ends_with(".css"), "{path}");
            "text/css; charset=utf-8"
        };
        assert_eq!(header(&headers, header::CONTENT_TYPE), expected, "{path}");
        assert_eq!(
            header(&headers, header::CACHE_CONTROL),
            "public, max-age=31536000, immutable",
            "{path}"
        );
        assert!(!body.is_empty(), "{path}");
        total += body.len();
    }
    assert_eq!(total, mcq_api::dashboard_bytes());
}

#[tokio::test]
async fn an_asset_under_another_name_is_not_found() {
    let t = TestApp::sqlite().await;
    for path in [
        "/assets/app.js",
        "/assets/app.0000000000000000.js",
        "/assets/../Cargo.toml",
    ] {
        let (status, headers, body) = fetch(&t, path).await;
        assert_eq!(status, 404, "{path}: {body}");
        assert_eq!(
            header(&headers, header::CONTENT_TYPE),
            "application/problem+json"
        );
    }
}

fn post(uri: &str, extra: &[(&'static str, &'static str)]) -> Request<Body> {
    let mut request = Request::post(uri).header(header::CONTENT_TYPE, "application/json");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    request
        .body(Body::from(json!({"jobs": [{"runs": 1000}]}).to_string()))
        .unwrap()
}

async fn writes_from_another_site_are_refused(t: &TestApp) {
    let refused = [
        vec![("sec-fetch-site", "cross-site")],
        vec![
            ("origin", "https://evil.example"),
            ("host", "127.0.0.1:8080"),
        ],
    ];
    for headers in &refused {
        t.send(post("/v1/batches", headers))
            .await
            .assert_problem(403, "/problems/cross-origin");
        t.send(post("/v1/jobs", headers))
            .await
            .assert_problem(403, "/problems/cross-origin");
    }
    assert_eq!(t.jobs_in_database().await, 0, "a refused write enqueued");
    // The dashboard's own requests, and programs that name no origin, pass.
    let same = t
        .send(post(
            "/v1/batches",
            &[
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://127.0.0.1:8080"),
                ("host", "127.0.0.1:8080"),
            ],
        ))
        .await;
    assert_eq!(same.status, 202, "{:#?}", same.body);
    let id = same.body["id"].as_str().expect("batch id").to_owned();
    let plain = t.send(post("/v1/batches", &[])).await;
    assert_eq!(plain.status, 202, "{:#?}", plain.body);
    assert_eq!(t.jobs_in_database().await, 2);
    // Cancelling takes no body, so only the origin check stands between it and a form elsewhere.
    let cancel = Request::post(format!("/v1/batches/{id}/cancel"))
        .header("sec-fetch-site", "cross-site")
        .body(Body::empty())
        .unwrap();
    t.send(cancel)
        .await
        .assert_problem(403, "/problems/cross-origin");
    let batch = t.get(&format!("/v1/batches/{id}")).await;
    assert_eq!(batch.body["counts"]["cancelled"], 0, "{:#?}", batch.body);
    // Reading stays open: another site's page cannot read the answer anyway.
    let read = Request::get(format!("/v1/batches/{id}"))
        .header("sec-fetch-site", "cross-site")
        .body(Body::empty())
        .unwrap();
    assert_eq!(t.send(read).await.status, 200);
}
on_both!(cross_origin_writes, writes_from_another_site_are_refused);
