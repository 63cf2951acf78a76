//! The OpenAPI document matches the router both ways and is well formed.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::harness::TestApp;

fn document() -> Value {
    serde_json::to_value(mcq_api::openapi()).expect("serialisable")
}

#[test]
fn every_route_is_documented_and_every_documented_operation_is_routed() {
    let doc = document();
    assert_eq!(doc["openapi"], "3.1.0");
    let routed: BTreeSet<(String, String)> = mcq_api::routes()
        .into_iter()
        .map(|(m, p, _)| (m.as_str().to_lowercase(), p.to_owned()))
        .collect();
    let mut documented = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in ["get", "post", "put", "patch", "delete", "head", "options"] {
            if item.get(method).is_some() {
                documented.insert((method.to_owned(), path.clone()));
            }
        }
    }
    assert_eq!(routed, documented);
}

#[test]
fn errors_are_documented_as_problem_json_and_refs_resolve() {
    let doc = document();
    let schemas = doc["components"]["schemas"].as_object().expect("schemas");
    for name in [
        "Problem",
        "FieldProblem",
        "JobView",
        "BatchView",
        "Spec",
        "PriceResult",
        "WorkerView",
    ] {
        assert!(schemas.contains_key(name), "schema {name} missing");
    }
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let responses = op["responses"]
                .as_object()
                .unwrap_or_else(|| panic!("{method} {path}: no responses"));
            assert!(
                responses.keys().any(|s| s.starts_with('2')),
                "{method} {path}: no success response"
            );
            for (status, response) in responses {
                if status.starts_with('4') || status.starts_with('5') {
                    let content =
                        &response["content"]["application/problem+json"]["schema"]["$ref"];
                    assert_eq!(
                        content, "#/components/schemas/Problem",
                        "{method} {path} {status}"
                    );
                }
            }
        }
    }
    let mut refs = Vec::new();
    collect_refs(&doc, &mut refs);
    assert!(!refs.is_empty());
    for r in refs {
        let name = r
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("unexpected $ref {r}"));
        assert!(schemas.contains_key(name), "$ref {r} does not resolve");
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                if key == "$ref" {
                    out.extend(v.as_str().map(str::to_owned));
                } else {
                    collect_refs(v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// Each documented operation reaches a handler: never the no-route fallback
/// nor 405, whatever the placeholder id answers.
#[tokio::test]
async fn every_documented_operation_reaches_a_handler() {
    // It reaches `/metrics` too.
    let _scrapes = crate::harness::SCRAPES.lock().await;
    let t = TestApp::sqlite().await;
    let doc = document();
    let served: Value = t.get("/openapi.json").await.body;
    assert_eq!(served, doc, "/openapi.json serves the generated document");
    for (path, item) in doc["paths"].as_object().unwrap() {
        let uri = path.replace("{id}", &uuid::Uuid::new_v4().to_string());
        for method in item.as_object().unwrap().keys() {
            let request = axum::http::Request::builder()
                .method(method.to_uppercase().as_str())
                .uri(&uri)
                .header("content-type", "application/json")
                .body(axum::body::Body::from("{}"))
                .unwrap();
            let answer = t.send(request).await;
            assert_ne!(answer.status, 405, "{method} {path}");
            assert_ne!(answer.body["type"], "/problems/no-route", "{method} {path}");
        }
    }
}

/// Delta is asked for in the spec and answered in the result, both
/// documented, and absent from results that did not ask.
#[test]
fn delta_is_documented_on_specs_and_results() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let result = &schemas["PriceResult"];
    for field in ["delta", "delta_std_error"] {
        let description = result["properties"][field]["description"].as_str();
        assert!(
            description.is_some_and(|d| d.contains("delta")),
            "{field}: {result}"
        );
    }
    let required = result["required"].as_array().expect("required");
    assert!(!required.iter().any(|r| r == "delta"), "{required:?}");
    let greeks = &schemas["Spec"]["properties"]["greeks"];
    assert!(
        greeks["description"]
            .as_str()
            .is_some_and(|d| d.contains("delta")),
        "{greeks}"
    );
    assert_eq!(
        schemas["Greek"]["enum"],
        serde_json::json!(["delta"]),
        "{}",
        schemas["Greek"]
    );
}

/// The document states the server's rules for parameters and fields, so
/// that data valid by the schema is accepted (checked in full by the
/// schemathesis stage of `.ci/run`).
#[test]
fn parameters_and_fields_carry_the_servers_bounds() {
    let doc = document();
    let param = |path: &str, method: &str, name: &str| {
        doc["paths"][path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path}: no parameter {name}"))["schema"]
            .clone()
    };
    let limit = param("/v1/batches/{id}/jobs", "get", "limit");
    assert_eq!(
        (limit["minimum"].clone(), limit["maximum"].clone()),
        (1.into(), 1000.into())
    );
    let limit = param("/v1/batches", "get", "limit");
    assert_eq!(limit["maximum"], mcq_queue::MAX_BATCH_PAGE);
    for (path, method) in [("/v1/jobs", "post"), ("/v1/batches", "post")] {
        let key = param(path, method, "Idempotency-Key");
        assert_eq!(key["minLength"], 1, "{path}");
        assert_eq!(key["maxLength"], 255, "{path}");
    }
    for (path, name) in [
        ("/v1/jobs/{id}", "wait"),
        ("/v1/batches/{id}", "wait"),
        ("/v1/batches/{id}/jobs", "wait"),
        ("/v1/batches/{id}/jobs", "after"),
        ("/v1/jobs/{id}", "id"),
    ] {
        assert!(
            param(path, "get", name)["pattern"].is_string(),
            "{path} {name}"
        );
    }
    let schemas = &doc["components"]["schemas"];
    let spec = &schemas["Spec"]["properties"];
    assert_eq!(spec["seed"]["maximum"], mcq_kernel::MAX_SEED);
    assert_eq!(spec["periods"]["minimum"], 1);
    assert_eq!(spec["runs"]["minimum"], mcq_kernel::MIN_RUNS);
    assert_eq!(spec["runs"]["maximum"], mcq_kernel::MAX_RUNS);
    assert_eq!(spec["initial"]["exclusiveMinimum"], 0);
    // A batch is one of two shapes: its jobs, or a sweep.
    let batch = &schemas["BatchRequest"]["oneOf"][0]["properties"];
    assert_eq!(batch["jobs"]["minItems"], 1);
    assert_eq!(batch["label"]["maxLength"], 200);
    let sweep = &schemas["BatchRequest"]["oneOf"][1]["properties"];
    assert_eq!(sweep["label"]["maxLength"], 200);
    assert_eq!(sweep["repeat"]["maximum"], u32::MAX);
    for name in ["fields", "format", "after"] {
        assert!(
            param("/v1/batches/{id}/results", "get", name)["pattern"].is_string(),
            "results {name}"
        );
    }
    let limit = param("/v1/batches/{id}/results", "get", "limit");
    assert_eq!(
        (limit["minimum"].clone(), limit["maximum"].clone()),
        (1.into(), 1000.into())
    );
}

/// Each job view documents its phases exactly: every phase and the
/// worker are always sent (required), `queued_at` as a date-time, the
/// others as date-times or ids that are null where unknown.
#[test]
fn job_phases_are_documented() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let timings = &schemas["JobTimings"];
    let required = timings["required"].as_array().expect("required");
    let nullable = serde_json::json!(["string", "null"]);
    assert_eq!(timings["properties"]["queued_at"]["type"], "string");
    for field in [
        "queued_at",
        "claimed_at",
        "compute_started_at",
        "compute_finished_at",
        "recorded_at",
    ] {
        let schema = &timings["properties"][field];
        assert_eq!(schema["format"], "date-time", "{field}: {schema}");
        assert!(required.iter().any(|r| r == field), "{field}: {required:?}");
        if field != "queued_at" {
            assert_eq!(schema["type"], nullable, "{field}: {schema}");
        }
    }
    let view = &schemas["JobView"];
    let worker = &view["properties"]["worker_id"];
    assert_eq!(
        (&worker["format"], &worker["type"]),
        (&"uuid".into(), &nullable),
        "{worker}"
    );
    assert!(
        view["required"]
            .as_array()
            .expect("required")
            .iter()
            .any(|r| r == "worker_id")
    );
}
