//! Refuses state-changing requests that a browser sends on behalf of
//! another site (cross-site request forgery). A page elsewhere can make a
//! browser POST to this server — a plain form needs no permission — so
//! every method other than GET, HEAD and OPTIONS must come from this
//! origin or from a client that is not a browser.
//!
//! Browsers say where a request comes from: `Sec-Fetch-Site` (all current
//! browsers) and `Origin` (on every cross-origin request and every POST).
//! Programs such as `mcq submit`, curl or the Python client send neither
//! and pass untouched.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::body::drain_refused;
use crate::problem::ApiError;

/// The middleware: answers 403 to a cross-origin state-changing request,
/// after draining up to `drain` bytes of its body.
pub(crate) async fn same_origin_writes(
    State(drain): State<u64>,
    request: Request,
    next: Next,
) -> Response {
    let safe = matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if !safe && from_another_site(request.headers()) {
        let (parts, body) = request.into_parts();
        drain_refused(&parts.headers, body, drain).await;
        return ApiError::CrossOrigin.into_response();
    }
    next.run(request).await
}

/// True when the headers show a browser sending this on behalf of a page
/// of another origin.
fn from_another_site(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site") {
        // `none` is the user's own doing (typed URL, bookmark).
        return !matches!(site.as_bytes(), b"same-origin" | b"none");
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return false;
    };
    let Some(host) = headers.get(header::HOST) else {
        return true;
    };
    // `Origin` is `scheme://host[:port]`, or `null` from sandboxed pages
    // and files, which never match.
    let origin = origin.to_str().unwrap_or("null");
    let origin_host = origin
        .split_once("://")
        .map_or("", |(_, authority)| authority);
    !origin_host.eq_ignore_ascii_case(host.to_str().unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn browsers_of_other_sites_are_refused_and_everything_else_passes() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[], false),
            (&[("sec-fetch-site", "same-origin")], false),
            (&[("sec-fetch-site", "none")], false),
            (&[("sec-fetch-site", "cross-site")], true),
            (&[("sec-fetch-site", "same-site")], true),
            (&[("host", "127.0.0.1:8080")], false),
            (
                &[
                    ("origin", "http://127.0.0.1:8080"),
                    ("host", "127.0.0.1:8080"),
                ],
                false,
            ),
            (
                &[
                    ("origin", "http://evil.example"),
                    ("host", "127.0.0.1:8080"),
                ],
                true,
            ),
            (
                &[
                    ("origin", "http://127.0.0.1:9090"),
                    ("host", "127.0.0.1:8080"),
                ],
                true,
            ),
            (&[("origin", "null"), ("host", "127.0.0.1:8080")], true),
            (&[("origin", "http://127.0.0.1:8080")], true),
        ];
        for (pairs, refused) in cases {
            let map = headers(pairs);
            assert_eq!(from_another_site(&map), *refused, "{pairs:?}");
        }
    }
}
