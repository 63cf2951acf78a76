//! The issue's table of malformed requests: each gets the right 4xx
//! problem document, and nothing reaches the queue.

use serde_json::json;

use crate::harness::{TestApp, test_config};
use crate::on_both;

/// One malformed request and what it must answer.
struct Case {
    name: &'static str,
    uri: &'static str,
    content_type: &'static str,
    body: Vec<u8>,
    status: u16,
    kind: &'static str,
    /// A pointer the problem must list, if any.
    pointer: Option<&'static str>,
}

fn case(
    name: &'static str,
    uri: &'static str,
    body: &str,
    status: u16,
    kind: &'static str,
) -> Case {
    Case {
        name,
        uri,
        content_type: "application/json",
        body: body.as_bytes().to_vec(),
        status,
        kind,
        pointer: None,
    }
}

impl Case {
    fn at(mut self, pointer: &'static str) -> Case {
        self.pointer = Some(pointer);
        self
    }
    fn typed(mut self, content_type: &'static str) -> Case {
        self.content_type = content_type;
        self
    }
}

const MALFORMED: &str = "/problems/malformed-request";
const INVALID: &str = "/problems/invalid-spec";

fn cases() -> Vec<Case> {
    let too_many_jobs =
        json!({"jobs": vec![json!({}); test_config().max_batch_jobs + 1]}).to_string();
    let huge_body = format!(
        r#"{{"label": "{}", "jobs": [{{}}]}}"#,
        "x".repeat(test_config().max_body_bytes)
    );
    vec![
        case("not JSON", "/v1/jobs", "{", 400, MALFORMED),
        case("missing body", "/v1/jobs", "", 400, MALFORMED),
        case("trailing garbage", "/v1/jobs", "{} {}", 400, MALFORMED),
        case("array instead of a spec", "/v1/jobs", "[]", 400, MALFORMED),
        case(
            "string for a number",
            "/v1/jobs",
            r#"{"up": "high"}"#,
            400,
            MALFORMED,
        )
        .at("/up"),
        case(
            "NaN as a string",
            "/v1/jobs",
            r#"{"up": "NaN"}"#,
            400,
            MALFORMED,
        )
        .at("/up"),
        case(
            "Infinity as a string",
            "/v1/jobs",
            r#"{"down": "Infinity"}"#,
            400,
            MALFORMED,
        )
        .at("/down"),
        case("bare NaN", "/v1/jobs", r#"{"up": NaN}"#, 400, MALFORMED),
        case(
            "bare Infinity",
            "/v1/jobs",
            r#"{"up": Infinity}"#,
            400,
            MALFORMED,
        ),
        case(
            "number beyond f64",
            "/v1/jobs",
            r#"{"initial": 1e400}"#,
            400,
            MALFORMED,
        ),
        case(
            "negative paths",
            "/v1/jobs",
            r#"{"runs": -5}"#,
            400,
            MALFORMED,
        )
        .at("/runs"),
        case(
            "fractional paths",
            "/v1/jobs",
            r#"{"runs": 1e30}"#,
            400,
            MALFORMED,
        )
        .at("/runs"),
        case(
            "paths beyond u64",
            "/v1/jobs",
            r#"{"runs": 123456789012345678901234567890}"#,
            400,
            MALFORMED,
        )
        .at("/runs"),
        case(
            "unknown option",
            "/v1/jobs",
            r#"{"option": "binary"}"#,
            400,
            MALFORMED,
        )
        .at("/option"),
        case(
            "unknown greek",
            "/v1/jobs",
            r#"{"greeks": ["delta", "gamma"]}"#,
            400,
            MALFORMED,
        )
        .at("/greeks/1"),
        case(
            "greeks not a list",
            "/v1/jobs",
            r#"{"greeks": "delta"}"#,
            400,
            MALFORMED,
        )
        .at("/greeks"),
        case(
            "a greek twice",
            "/v1/batches",
            r#"{"jobs": [{}, {"greeks": ["delta", "delta"]}]}"#,
            422,
            INVALID,
        )
        .at("/jobs/1/greeks"),
        case(
            "unknown field",
            "/v1/jobs",
            r#"{"colour": "red"}"#,
            400,
            MALFORMED,
        ),
        // The held tasks of `mcq bench scale` are a worker setting made in
        // code; no request can ask for one.
        case(
            "a held task",
            "/v1/jobs",
            r#"{"hold_ms": 50}"#,
            400,
            MALFORMED,
        ),
        case(
            "a hold method",
            "/v1/jobs",
            r#"{"method": "hold"}"#,
            400,
            MALFORMED,
        )
        .at("/method"),
        case(
            "a batch of held tasks",
            "/v1/batches",
            r#"{"jobs": [{"runs": 2, "hold": "50ms"}]}"#,
            400,
            MALFORMED,
        ),
        case(
            "too many paths",
            "/v1/jobs",
            r#"{"runs": 100000000000000}"#,
            422,
            INVALID,
        )
        .at("/runs"),
        case(
            "negative spot",
            "/v1/jobs",
            r#"{"initial": -30}"#,
            422,
            INVALID,
        )
        .at("/initial"),
        case(
            "down above up",
            "/v1/jobs",
            r#"{"up": 1.1, "down": 1.2}"#,
            422,
            INVALID,
        )
        .at("/down"),
        case(
            "down equal to up",
            "/v1/jobs",
            r#"{"up": 1.2, "down": 1.2, "interest": 1.0}"#,
            422,
            INVALID,
        )
        .at("/down"),
        case(
            "zero periods",
            "/v1/jobs",
            r#"{"periods": 0}"#,
            422,
            INVALID,
        )
        .at("/periods"),
        case(
            "runs and target",
            "/v1/jobs",
            r#"{"runs": 10, "target_std_error": 0.01}"#,
            422,
            INVALID,
        )
        .at("/runs"),
        case(
            "text/plain",
            "/v1/jobs",
            "{}",
            415,
            "/problems/unsupported-media-type",
        )
        .typed("text/plain"),
        case(
            "no content type",
            "/v1/jobs",
            "{}",
            415,
            "/problems/unsupported-media-type",
        )
        .typed(""),
        case(
            "batch without jobs or sweep",
            "/v1/batches",
            "{}",
            422,
            "/problems/invalid-spec",
        ),
        case(
            "batch unknown field",
            "/v1/batches",
            r#"{"jobs": [{}], "urgency": 1}"#,
            400,
            MALFORMED,
        ),
        case(
            "batch type error deep inside",
            "/v1/batches",
            r#"{"jobs": [{}, {}, {"periods": "many"}]}"#,
            400,
            MALFORMED,
        )
        .at("/jobs/2/periods"),
        case(
            "empty batch",
            "/v1/batches",
            r#"{"jobs": []}"#,
            422,
            INVALID,
        )
        .at("/jobs"),
        case(
            "one bad spec rejects the batch",
            "/v1/batches",
            r#"{"jobs": [{}, {"down": 2}, {}]}"#,
            422,
            INVALID,
        )
        .at("/jobs/1/down"),
        case(
            "label too long",
            "/v1/batches",
            &format!(r#"{{"label": "{}", "jobs": [{{}}]}}"#, "x".repeat(201)),
            422,
            INVALID,
        )
        .at("/label"),
        Case {
            body: too_many_jobs.into_bytes(),
            ..case(
                "oversized batch",
                "/v1/batches",
                "",
                413,
                "/problems/batch-too-large",
            )
        },
        Case {
            body: huge_body.into_bytes(),
            ..case(
                "oversized body",
                "/v1/batches",
                "",
                413,
                "/problems/body-too-large",
            )
        },
    ]
}

async fn every_malformed_request_is_a_problem_and_enqueues_nothing(t: &TestApp) {
    for c in cases() {
        let answer = if c.content_type.is_empty() {
            let request = axum::http::Request::post(c.uri)
                .body(axum::body::Body::from(c.body))
                .unwrap();
            t.send(request).await
        } else {
            t.post_raw(c.uri, c.content_type, c.body, None).await
        };
        assert_eq!(
            answer.status.as_u16(),
            c.status,
            "{}: {:#?}",
            c.name,
            answer.body
        );
        answer.assert_problem(c.status, c.kind);
        if let Some(pointer) = c.pointer {
            assert!(
                answer.pointers().iter().any(|p| p == pointer),
                "{}: no pointer {pointer} in {:#?}",
                c.name,
                answer.body
            );
        }
        assert!(
            !answer.body["detail"]
                .as_str()
                .unwrap_or("")
                .to_lowercase()
                .contains("sql"),
            "{}: internal text leaked: {:#?}",
            c.name,
            answer.body
        );
    }
    assert_eq!(
        t.jobs_in_database().await,
        0,
        "a rejected request must not enqueue anything"
    );
}
on_both!(
    malformed_requests,
    every_malformed_request_is_a_problem_and_enqueues_nothing
);

async fn bad_ids_and_parameters(t: &TestApp) {
    let unknown = uuid::Uuid::new_v4();
    for uri in [
        "/v1/jobs/not-a-uuid".to_owned(),
        "/v1/jobs/12345".to_owned(),
        format!("/v1/jobs/{unknown}"),
        "/v1/batches/%00%ff".to_owned(),
        format!("/v1/batches/{unknown}"),
        format!("/v1/batches/{unknown}/jobs"),
    ] {
        t.get(&uri).await.assert_problem(404, "/problems/not-found");
    }
    t.post_empty("/v1/jobs/nope/cancel")
        .await
        .assert_problem(404, "/problems/not-found");
    t.post_empty("/v1/batches/nope/cancel")
        .await
        .assert_problem(404, "/problems/not-found");
    for query in [
        "limit=0",
        "limit=1001",
        "limit=ten",
        "after=yesterday",
        "limit=-1",
    ] {
        t.get(&format!("/v1/batches/{unknown}/jobs?{query}"))
            .await
            .assert_problem(400, "/problems/bad-parameter");
    }
    for key in ["", &"k".repeat(256), "with space"] {
        let answer = t
            .post_raw("/v1/jobs", "application/json", b"{}".to_vec(), Some(key))
            .await;
        answer.assert_problem(400, "/problems/bad-parameter");
    }
    assert_eq!(t.jobs_in_database().await, 0);
}
on_both!(bad_ids, bad_ids_and_parameters);
