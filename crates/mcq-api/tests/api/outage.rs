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
