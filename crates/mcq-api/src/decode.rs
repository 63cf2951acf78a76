//! Request bodies decoded straight from their bytes, in two passes.
//!
//! The scan checks the shape — an object where a spec or a batch belongs,
//! every job an object — and counts the jobs, building nothing, so that a
//! body of millions of `{}` is refused at the first job past the limit
//! instead of after all of them were decoded. Then the typed decode builds
//! the request; serde's derive refuses unknown and duplicate fields there.
//! Both passes track the path, so every problem carries its JSON pointer.

use std::cell::Cell;
use std::fmt;

use mcq_api_types::{BatchRequest, FieldProblem};
use mcq_kernel::Spec;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor,
};
use serde_json::error::Category;

use crate::problem::ApiError;

/// A request body the API decodes.
pub(crate) trait Decode: DeserializeOwned + Send + 'static {
    /// Whether the body holds a `jobs` list to count (a batch).
    const HAS_JOBS: bool;
}

impl Decode for Spec {
    const HAS_JOBS: bool = false;
}

impl Decode for BatchRequest {
    const HAS_JOBS: bool = true;
}

/// Decodes `bytes` as `T`, with at most `max_jobs` jobs in a batch.
pub(crate) fn decode<T: Decode>(bytes: &[u8], max_jobs: usize) -> Result<T, ApiError> {
    let tripped = Cell::new(false);
    let top = Top {
        jobs: T::HAS_JOBS.then_some(JobsLimit {
            max: max_jobs,
            tripped: &tripped,
        }),
    };
    let mut scan = serde_json::Deserializer::from_slice(bytes);
    let mut track = serde_path_to_error::Track::new();
    let scanned = top
        .deserialize(serde_path_to_error::Deserializer::new(
            &mut scan, &mut track,
        ))
        .and_then(|()| scan.end());
    if tripped.get() {
        return Err(ApiError::TooManyJobs {
            limit: max_jobs,
            asked: None,
        });
    }
    scanned.map_err(|err| problem(err, &track.path()))?;
    let mut typed = serde_json::Deserializer::from_slice(bytes);
    let mut track = serde_path_to_error::Track::new();
    let value = T::deserialize(serde_path_to_error::Deserializer::new(
        &mut typed, &mut track,
    ))
    .and_then(|value| typed.end().map(|()| value))
    .map_err(|err| problem(err, &track.path()))?;
    Ok(value)
}

/// A decoding failure as a problem: syntax without a pointer, a wrong
/// value with the pointer of where it was found.
fn problem(err: serde_json::Error, path: &serde_path_to_error::Path) -> ApiError {
    match err.classify() {
        Category::Data => {
            let pointer = pointer(path);
            ApiError::Malformed {
                detail: format!("invalid request: {err}"),
                errors: vec![FieldProblem {
                    pointer,
                    detail: err.to_string(),
                }],
            }
        }
        Category::Io | Category::Syntax | Category::Eof => ApiError::Malformed {
            detail: format!("invalid JSON: {err}"),
            errors: vec![],
        },
    }
}

/// An RFC 6901 pointer for a serde path.
fn pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        out.push('/');
        match segment {
            Segment::Seq { index } => out.push_str(&index.to_string()),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                out.push_str(&key.replace('~', "~0").replace('/', "~1"));
            }
            Segment::Unknown => out.push('-'),
        }
    }
    out
}

/// The job limit of a batch scan, and where to say that it tripped.
#[derive(Clone, Copy)]
struct JobsLimit<'a> {
    max: usize,
    tripped: &'a Cell<bool>,
}

/// The top level of a body: an object; with a job limit, its `jobs` list
/// is scanned as well.
struct Top<'a> {
    jobs: Option<JobsLimit<'a>>,
}

impl<'de> DeserializeSeed<'de> for Top<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.jobs.is_some() {
            f.write_str("a JSON object (a batch)")
        } else {
            f.write_str("a JSON object (a pricing spec)")
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(is_jobs) = map.next_key_seed(IsJobs)? {
            match self.jobs {
                Some(limit) if is_jobs => map.next_value_seed(Jobs(limit))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A key, told apart as `jobs` or anything else without allocating.
struct IsJobs;

impl<'de> DeserializeSeed<'de> for IsJobs {
    type Value = bool;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<bool, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for IsJobs {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<bool, E> {
        Ok(key == "jobs")
    }
}

/// The `jobs` value: counted while it is read, refused at the first job
/// past the limit. Anything but a list is left to the typed decode, which
/// names the expected type.
struct Jobs<'a>(JobsLimit<'a>);

impl<'de> DeserializeSeed<'de> for Jobs<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Jobs<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of pricing specs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut count = 0usize;
        while seq.next_element_seed(AnObject)?.is_some() {
            count += 1;
            if count > self.0.max {
                self.0.tripped.set(true);
                return Err(de::Error::custom("too many jobs"));
            }
        }
        Ok(())
    }

    // Every other kind of value passes the scan.
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

/// One job of the list: an object, whatever it holds (serde would read a
/// list as a spec's fields by position).
struct AnObject;

impl<'de> DeserializeSeed<'de> for AnObject {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for AnObject {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object (a pricing spec)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(body: &str, max: usize) -> Result<BatchRequest, ApiError> {
        decode::<BatchRequest>(body.as_bytes(), max)
    }

    fn pointers(err: &ApiError) -> Vec<String> {
        err.problem()
            .errors
            .into_iter()
            .map(|e| e.pointer)
            .collect()
    }

    #[test]
    fn the_job_limit_stops_the_scan_before_the_rest_is_read() {
        // Past the limit the body is not even valid JSON: a scan that
        // stopped at the limit never sees that.
        let body = format!(r#"{{"jobs": [{}, not json"#, ["{}"; 4].join(", "));
        assert!(matches!(
            batch(&body, 3),
            Err(ApiError::TooManyJobs { limit: 3, .. })
        ));
        assert!(matches!(batch(&body, 4), Err(ApiError::Malformed { .. })));
        assert_eq!(batch(r#"{"jobs": [{}, {}, {}]}"#, 3).unwrap().jobs.len(), 3);
    }

    #[test]
    fn objects_are_required_where_specs_belong() {
        for (body, at) in [
            ("[]", ""),
            (r#"{"jobs": [{}, [1, 2]]}"#, "/jobs/1"),
            (r#"{"jobs": [{}, 5]}"#, "/jobs/1"),
        ] {
            let err = batch(body, 10).expect_err(body);
            assert!(matches!(err, ApiError::Malformed { .. }), "{body}");
            assert_eq!(pointers(&err), [at], "{body}");
        }
        assert!(decode::<Spec>(b"[30, 30]", 10).is_err());
        assert!(decode::<Spec>(b"{}", 10).is_ok());
    }

    #[test]
    fn duplicate_fields_and_trailing_data_are_refused() {
        for body in [
            r#"{"up": 1.5, "up": 1.6}"#,
            r#"{"seed": 1, "seed": 1}"#,
            r#"{} {}"#,
            r#"{"initial": 30} x"#,
        ] {
            let err = decode::<Spec>(body.as_bytes(), 10).expect_err(body);
            assert!(matches!(err, ApiError::Malformed { .. }), "{body}");
        }
        let err = batch(r#"{"label": "a", "jobs": [], "label": "b"}"#, 10).expect_err("dup");
        assert!(err.to_string().contains("duplicate field"), "{err}");
        let err = batch(r#"{"jobs": [{"down": 0.7, "down": 0.7}]}"#, 10).expect_err("dup");
        assert!(err.to_string().contains("duplicate field"), "{err}");
    }

    #[test]
    fn the_default_body_limit_holds_the_default_batch_written_in_full() {
        use mcq_kernel::{Greek, Method, OptionKind, VarianceReduction};
        // Every field written, numbers with 17 significant digits: the
        // longest a compact spec gets in practice.
        let spec = Spec {
            initial: 31.234_567_890_123_457,
            exercise: 29.876_543_210_987_654,
            up: 1.412_345_678_901_234_5,
            down: 0.812_345_678_901_234_5,
            interest: 1.081_234_567_890_123_4,
            periods: 1000,
            runs: Some(9_999_999_999),
            target_std_error: None,
            option: OptionKind::Call,
            method: Method::Mc,
            seed: Some(mcq_kernel::MAX_SEED),
            variance_reduction: VarianceReduction::Antithetic,
            greeks: vec![Greek::Delta],
        };
        let config = crate::ApiConfig::default();
        let request = BatchRequest {
            label: Some("x".repeat(200)),
            priority: Some(-100),
            jobs: vec![spec; config.max_batch_jobs],
            ..BatchRequest::default()
        };
        let body = serde_json::to_vec(&request).unwrap();
        assert!(
            body.len() <= config.max_body_bytes,
            "{} jobs written in full take {} bytes, over the {}-byte limit",
            config.max_batch_jobs,
            body.len(),
            config.max_body_bytes
        );
        let decoded = decode::<BatchRequest>(&body, config.max_batch_jobs).unwrap();
        assert_eq!(decoded.jobs.len(), config.max_batch_jobs);
    }

    #[test]
    fn type_errors_carry_their_pointer() {
        let err = batch(r#"{"jobs": [{}, {}, {"periods": "many"}]}"#, 10).expect_err("type");
        assert_eq!(pointers(&err), ["/jobs/2/periods"]);
        let err = batch(r#"{"jobs": 5}"#, 10).expect_err("type");
        assert_eq!(pointers(&err), ["/jobs"]);
    }
}
