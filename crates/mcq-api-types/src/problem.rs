//! The body of every error answer: an RFC 9457 problem document.

use serde::{Deserialize, Serialize};

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem: the body of every error (`application/problem+json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Problem {
    /// Stable identifier of the kind of problem, e.g. `/problems/invalid-spec`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Short summary of the kind of problem.
    pub title: String,
    /// HTTP status code.
    pub status: u16,
    /// What went wrong with this request, for humans.
    pub detail: String,
    /// For validation problems: each bad value by JSON pointer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldProblem>,
}

/// One bad value of a request body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldProblem {
    /// RFC 6901 JSON pointer into the request body, e.g. `/jobs/17/down`.
    pub pointer: String,
    /// What is wrong with it and how to fix it.
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_is_the_type_member_and_empty_errors_are_left_out() {
        let problem = Problem {
            kind: "/problems/not-found".into(),
            title: "Not found".into(),
            status: 404,
            detail: "no job with id x".into(),
            errors: Vec::new(),
        };
        let json = serde_json::to_value(&problem).unwrap();
        assert_eq!(json["type"], "/problems/not-found");
        assert!(json.get("kind").is_none() && json.get("errors").is_none());
        assert_eq!(serde_json::from_value::<Problem>(json).unwrap(), problem);
    }

    #[test]
    fn field_problems_carry_json_pointers() {
        let json = r#"{"type": "/problems/invalid-spec", "title": "Invalid pricing spec",
            "status": 422, "detail": "1 invalid value",
            "errors": [{"pointer": "/jobs/3/down", "detail": "must be positive"}]}"#;
        let problem: Problem = serde_json::from_str(json).unwrap();
        assert_eq!(problem.errors[0].pointer, "/jobs/3/down");
    }
}
