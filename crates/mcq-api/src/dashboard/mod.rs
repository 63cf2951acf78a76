//! The web dashboard: a page at `/` and its scripts and style sheet under
//! `/assets/`, all compiled into the binary so that it works offline and
//! needs no build step. The page is plain JavaScript drawing its own SVG
//! charts; it reads and submits through the same JSON API as every client.
//!
//! Asset names carry a hash of their content (`app.3f2a….js`), so a
//! browser may keep them forever; the page itself is always revalidated
//! and so always names the assets of the binary that serves it.

use std::sync::LazyLock;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;
use crate::problem::ApiError;

/// What the page may load and where it may connect: only this origin, no
/// inline script, and no framing (the page holds an API key).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// One embedded file: its plain name, media type and content.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

/// Every asset, scripts in the order the page loads them.
const ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/style.css"),
    },
    Asset {
        name: "api.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/api.js"),
    },
    Asset {
        name: "seeds.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/seeds.js"),
    },
    Asset {
        name: "exact.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/exact.js"),
    },
    Asset {
        name: "charts.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/charts.js"),
    },
    Asset {
        name: "stream.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/stream.js"),
    },
    Asset {
        name: "views.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/views.js"),
    },
    Asset {
        name: "ops.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/ops.js"),
    },
    Asset {
        name: "submit.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/submit.js"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/app.js"),
    },
];

/// The page with `{{name}}` placeholders for the hashed asset names.
const INDEX_TEMPLATE: &str = include_str!("assets/index.html");

/// The asset table with each file's hashed name, and the page naming them.
struct Served {
    /// `(hashed name, asset)`.
    assets: Vec<(String, &'static Asset)>,
    index: String,
}

static SERVED: LazyLock<Served> = LazyLock::new(|| {
    let assets: Vec<(String, &'static Asset)> = ASSETS
        .iter()
        .map(|asset| (hashed_name(asset.name, asset.body), asset))
        .collect();
    let mut index = INDEX_TEMPLATE.to_owned();
    for (hashed, asset) in &assets {
        index = index.replace(
            &format!("{{{{{}}}}}", asset.name),
            &format!("/assets/{hashed}"),
        );
    }
    Served { assets, index }
});

/// `app.js` with content `body` becomes `app.<16 hex digits>.js`.
fn hashed_name(name: &str, body: &str) -> String {
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let hash = body.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    format!("{stem}.{hash:016x}.{ext}")
}

/// Total size of the page and its assets in bytes, as served (uncompressed).
pub fn dashboard_bytes() -> usize {
    SERVED.index.len() + ASSETS.iter().map(|a| a.body.len()).sum::<usize>()
}

/// The routes of the dashboard; merged into the API's router.
pub(crate) fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(index))
        .route("/assets/{name}", get(asset))
}

/// Headers every dashboard response carries.
fn secure_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

async fn index() -> Response {
    let mut response = (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // Revalidated every time: a new binary's page names new assets.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        SERVED.index.as_str(),
    )
        .into_response();
    secure_headers(response.headers_mut());
    response
}

async fn asset(Path(name): Path<String>) -> Response {
    let Some((_, asset)) = SERVED.assets.iter().find(|(hashed, _)| *hashed == name) else {
        return ApiError::NoRoute(format!(
            "/assets/{}",
            name.chars().take(100).collect::<String>()
        ))
        .into_response();
    };
    let mut response = (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, asset.content_type),
            // The name changes with the content, so this name never goes stale.
            (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
        ],
        asset.body,
    )
        .into_response();
    secure_headers(response.headers_mut());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_is_named_in_the_page_and_every_placeholder_is_filled() {
        for asset in ASSETS {
            assert!(
                INDEX_TEMPLATE.contains(&format!("{{{{{}}}}}", asset.name)),
                "{} is not loaded by the page",
                asset.name
            );
        }
        assert!(!SERVED.index.contains("{{"), "{}", SERVED.index);
    }

    #[test]
    fn a_hashed_name_follows_the_content() {
        let a = hashed_name("app.js", "one");
        assert!(a.starts_with("app.") && a.ends_with(".js") && a.len() == "app..js".len() + 16);
        assert_ne!(a, hashed_name("app.js", "two"));
        assert_eq!(a, hashed_name("app.js", "one"));
    }

    #[test]
    fn the_page_loads_no_inline_script() {
        // The CSP forbids inline script; one would silently not run.
        for line in INDEX_TEMPLATE.lines() {
            if line.contains("<script") {
                assert!(line.contains("src="), "inline script: {line}");
            }
            let handler = line
                .split_whitespace()
                .any(|word| word.starts_with("on") && word.contains('='));
            assert!(!handler, "inline event handler: {line}");
        }
    }
}
