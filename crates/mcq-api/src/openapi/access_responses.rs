//! The answers of the access layer, which stands in front of every
//! handler, written into each operation from the rule the layer applies
//! ([`crate::access::needs`]) rather than repeated on each handler, so
//! that no route's annotation can leave one out: `401` wherever a key is
//! needed, `403` where some key's role falls short or a browser may write
//! for another origin, `415` on the writes an open server refuses without
//! a JSON content type. The bodies of the cancels are ignored, so the
//! document calls them optional. Those operations name the `bearer`
//! scheme as optional: an open server needs no key, any other needs one.

use axum::http::Method;
use mcq_queue::Role;
use utoipa::openapi::path::Operation;
use utoipa::openapi::request_body::RequestBody;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{Content, OpenApi, Ref, RefOr, Required, Response};

use crate::access::{Needs, needs};

/// The name of the API key scheme in the document.
const SCHEME: &str = "bearer";

/// Adds the access layer's answers to every operation of `doc`, keeping
/// any a handler documents itself.
pub(super) fn add(doc: &mut OpenApi) {
    let scheme = Http::builder()
        .scheme(HttpAuthScheme::Bearer)
        .bearer_format("mcq_<id>_<secret>")
        .description(Some(
            "An API key from `mcq keys create`. A server whose database holds no key, \
             on a loopback address, needs none.",
        ))
        .build();
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(SCHEME, SecurityScheme::Http(scheme));
    for (path, item) in &mut doc.paths.paths {
        let operations = [(Method::GET, &mut item.get), (Method::POST, &mut item.post)];
        for (method, operation) in operations {
            let Some(operation) = operation else {
                continue;
            };
            let write = method != Method::GET;
            if let Needs::Role(role) = needs(&method, path) {
                operation.security = Some(vec![
                    SecurityRequirement::new(SCHEME, Vec::<String>::new()),
                    SecurityRequirement::default(),
                ]);
                problem(operation, "401", "No valid API key");
                if role != Role::Read {
                    problem(operation, "403", "The key's role may not do this");
                }
            }
            if write {
                problem(
                    operation,
                    "403",
                    "A browser sent the request for a page of another origin",
                );
                problem(
                    operation,
                    "415",
                    "Without an API key, a write must say `Content-Type: application/json`",
                );
            }
            if path.ends_with("/cancel") {
                ignored_body(operation);
            }
        }
    }
}

/// Documents `status` as a problem document, unless the operation does
/// already.
fn problem(operation: &mut Operation, status: &str, description: &str) {
    let responses = &mut operation.responses.responses;
    if responses.contains_key(status) {
        return;
    }
    let content = Content::new(Some(Ref::from_schema_name("Problem")));
    let response = Response::builder()
        .description(description)
        .content("application/problem+json", content)
        .build();
    responses.insert(status.to_owned(), RefOr::T(response));
}

/// A body the handler never reads may be left out.
fn ignored_body(operation: &mut Operation) {
    if let Some(RefOr::T(body)) = operation.request_body.as_mut() {
        let body: &mut RequestBody = body;
        body.required = Some(Required::False);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    fn operation(path: &str, method: &str) -> Value {
        let doc = serde_json::to_value(super::super::openapi()).unwrap();
        doc["paths"][path][method].clone()
    }

    fn statuses(operation: &Value) -> Vec<String> {
        operation["responses"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn every_route_that_needs_a_key_can_answer_401_and_admin_routes_403() {
        for (path, method) in [
            ("/v1/batches", "get"),
            ("/v1/jobs/{id}", "get"),
            ("/v1/workers", "get"),
            ("/v1/queue", "get"),
            ("/metrics", "get"),
            ("/v1/jobs/{id}/cancel", "post"),
        ] {
            let answers = statuses(&operation(path, method));
            assert!(
                answers.iter().any(|s| s == "401"),
                "{method} {path}: {answers:?}"
            );
        }
        for path in ["/v1/workers", "/v1/queue", "/metrics"] {
            let answers = statuses(&operation(path, "get"));
            assert!(answers.iter().any(|s| s == "403"), "{path}: {answers:?}");
        }
        for path in ["/healthz", "/readyz", "/openapi.json"] {
            let answers = statuses(&operation(path, "get"));
            assert!(!answers.iter().any(|s| s == "401"), "{path}: {answers:?}");
        }
        let security = &operation("/v1/jobs/{id}", "get")["security"];
        assert_eq!(security, &serde_json::json!([{"bearer": []}, {}]));
        assert!(operation("/healthz", "get").get("security").is_none());
        // Every role may read, so a read is never refused for its role.
        let answers = statuses(&operation("/v1/jobs/{id}", "get"));
        assert!(!answers.iter().any(|s| s == "403"), "{answers:?}");
    }

    #[test]
    fn writes_can_answer_403_and_415_and_cancels_need_no_body() {
        for path in [
            "/v1/jobs",
            "/v1/batches",
            "/v1/jobs/{id}/cancel",
            "/v1/batches/{id}/cancel",
        ] {
            let post = operation(path, "post");
            let answers = statuses(&post);
            for status in ["401", "403", "415"] {
                assert!(
                    answers.iter().any(|s| s == status),
                    "{path} {status}: {answers:?}"
                );
            }
            let required = post["requestBody"]["required"].as_bool();
            assert_eq!(required, Some(!path.ends_with("/cancel")), "{path}: {post}");
        }
    }
}
