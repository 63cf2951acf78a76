//! Batches on the wire: the submission body and its answer, the batch view
//! with counts, price statistics and timings, and the answer to cancelling.

use chrono::{DateTime, Utc};
use mcq_kernel::Spec;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{BatchGrid, Sweep};

/// Body of `POST /v1/batches`: either the jobs, or a sweep over a base
/// spec, which the server expands into one job per grid point (times
/// `repeat`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// Free text shown with the batch (at most 200 characters, no U+0000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(max_length = 200, pattern = r"^[^\u0000]*$")
    )]
    pub label: Option<String>,
    /// The jobs, each a pricing spec; omitted fields take their defaults.
    /// At least one, at most the server's limit (100,000 by default);
    /// absent (or empty) with a sweep.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub jobs: Vec<Spec>,
    /// Within the submitting tenant, batches of higher priority are claimed
    /// first (-100 to 100, default 0); between tenants, claims share fairly
    /// whatever the priorities.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_priority"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = -100, maximum = 100))]
    pub priority: Option<i16>,
    /// The base spec of a sweep (defaults when absent); only with `sweep`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub spec: Option<Spec>,
    /// Spec fields and the values each takes, e.g.
    /// `{"exercise": [25, 30, 35], "periods": [10, 20]}`: one job per
    /// point of their cartesian product, the last field varying fastest.
    /// (The server's OpenAPI document lists the fields and their types.)
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub sweep: Option<Sweep>,
    /// Base seed of the batch, 0 to 2^53 − 1: job `i` (counted from 0 in
    /// submission order, a sweep's jobs in grid order) gets the seed
    /// `job_seed(seed, i)` (SplitMix64; docs/api.md gives the formula), so
    /// the batch submitted again with the same base prices every job
    /// alike, bit for bit. A job whose spec names its own seed keeps it; a
    /// sweep's base spec may not name one beside it. Without it, each job
    /// draws its own seed.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "mcq_kernel::deserialize_seed"
    )]
    #[cfg_attr(feature = "openapi", schema(maximum = 9_007_199_254_740_991_u64))]
    pub seed: Option<u64>,
    /// Jobs per grid point (default 1), each with its own seed; only with `sweep`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole_repeat"
    )]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 4_294_967_295_u64))]
    pub repeat: Option<u32>,
}

/// Reads a field that may be left out but, when given, is not `null`: a
/// `null` sweep or base spec beside a list of jobs would otherwise pass
/// for an absent one.
fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// Reads a repeat count written as an integer or as an integral number
/// (`2.0`), as JSON Schema counts them; not `null` (see [`present`]). Zero
/// is refused where the batch is validated.
fn whole_repeat<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u32>, D::Error> {
    use serde::de::Error as _;
    let number = f64::deserialize(deserializer)?;
    if number.fract() != 0.0 || !(0.0..=f64::from(u32::MAX)).contains(&number) {
        return Err(D::Error::custom(format!(
            "invalid value: {number}, expected a whole number from 1 to {}",
            u32::MAX
        )));
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a whole number inside u32's range, checked above"
    )]
    Ok(Some(number as u32))
}

/// Reads a priority written as an integer or as an integral number
/// (`11.0`), as JSON Schema counts them; the range is checked where the
/// batch is validated.
fn whole_priority<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<i16>, D::Error> {
    use serde::de::Error as _;
    let Some(number) = Option::<f64>::deserialize(deserializer)? else {
        return Ok(None);
    };
    let whole =
        number.fract() == 0.0 && (f64::from(i16::MIN)..=f64::from(i16::MAX)).contains(&number);
    if !whole {
        return Err(D::Error::custom(format!(
            "invalid value: {number}, expected a whole number from -100 to 100"
        )));
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "a whole number inside i16's range, checked above"
    )]
    Ok(Some(number as i16))
}

/// Answer of `POST /v1/batches` (status 202).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchAccepted {
    /// Batch id: poll `GET /v1/batches/{id}`.
    pub id: Uuid,
    /// Job ids in submission order.
    pub job_ids: Vec<Uuid>,
}

/// Number of a batch's jobs in each state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StateCounts {
    /// Jobs waiting.
    pub queued: u64,
    /// Jobs being computed.
    pub running: u64,
    /// Jobs with a result.
    pub succeeded: u64,
    /// Jobs that gave up.
    pub failed: u64,
    /// Jobs cancelled.
    pub cancelled: u64,
}

impl StateCounts {
    /// Jobs that can change no more: succeeded, failed or cancelled.
    pub fn finished(&self) -> u64 {
        self.succeeded + self.failed + self.cancelled
    }
}

/// Statistics over the prices of a batch's succeeded jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PriceStats {
    /// Number of prices summarised.
    pub count: u64,
    /// Mean price.
    pub mean: f64,
    /// Smallest price.
    pub min: f64,
    /// Largest price.
    pub max: f64,
    /// Sample standard deviation of the prices (n - 1 denominator).
    pub stddev: f64,
    /// Standard error of the mean price: stddev / sqrt(count).
    pub std_error: f64,
}

/// Timings of a batch as a whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchTimings {
    /// When the batch was enqueued.
    pub submitted_at: DateTime<Utc>,
    /// First claim of any of its tasks.
    pub first_started_at: Option<DateTime<Utc>>,
    /// Last job finished (only meaningful once `done`).
    pub last_finished_at: Option<DateTime<Utc>>,
    /// `last_finished_at - submitted_at` in milliseconds.
    pub makespan_ms: Option<f64>,
    /// Kernel time summed over all jobs, in milliseconds.
    pub compute_ms_total: f64,
}

/// A batch as clients see it (`GET /v1/batches/{id}`), read in one query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchView {
    /// Batch id.
    pub id: Uuid,
    /// Label given at submission.
    pub label: Option<String>,
    /// Number of jobs in the batch.
    pub total: u64,
    /// Jobs per state.
    pub counts: StateCounts,
    /// True when no job is queued or running.
    pub done: bool,
    /// Statistics over succeeded prices; `None` while none succeeded.
    pub stats: Option<PriceStats>,
    /// Timestamps and durations.
    pub timings: BatchTimings,
    /// The sweep the batch was submitted as, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub sweep: Option<Sweep>,
    /// Jobs per grid point, with `sweep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
}

impl BatchView {
    /// The grid the batch was submitted as, with its jobs per point; `None`
    /// for a batch that is not a sweep.
    pub fn grid(&self) -> Option<BatchGrid> {
        self.sweep.clone().map(|sweep| BatchGrid {
            sweep,
            repeat: self.repeat.unwrap_or(1),
        })
    }
}

/// One page of batches (`GET /v1/batches`), newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchPage {
    /// Batches, newest first, each as `GET /v1/batches/{id}` shows it.
    pub batches: Vec<BatchView>,
    /// Cursor for the next (older) page (`?after=`); absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Uuid>,
}

/// Answer of `POST /v1/batches/{id}/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BatchCancelled {
    /// The batch.
    pub id: Uuid,
    /// How many unfinished jobs this call cancelled.
    pub cancelled: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_priority_is_a_whole_number_however_it_is_written() {
        let read = |json: &str| serde_json::from_str::<BatchRequest>(json).map(|r| r.priority);
        assert_eq!(read(r#"{"jobs":[{}]}"#).unwrap(), None);
        assert_eq!(read(r#"{"jobs":[{}],"priority":null}"#).unwrap(), None);
        assert_eq!(read(r#"{"jobs":[{}],"priority":-7}"#).unwrap(), Some(-7));
        assert_eq!(read(r#"{"jobs":[{}],"priority":11.0}"#).unwrap(), Some(11));
        for bad in ["11.5", "1e9", "\"3\""] {
            assert!(
                read(&format!(r#"{{"jobs":[{{}}],"priority":{bad}}}"#)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_repeat_is_a_whole_number_however_it_is_written() {
        let read = |json: &str| serde_json::from_str::<BatchRequest>(json).map(|r| r.repeat);
        let sweep = r#""sweep":{"exercise":[25]}"#;
        assert_eq!(read(&format!("{{{sweep}}}")).unwrap(), None);
        assert_eq!(
            read(&format!(r#"{{{sweep},"repeat":3}}"#)).unwrap(),
            Some(3)
        );
        assert_eq!(
            read(&format!(r#"{{{sweep},"repeat":3.0}}"#)).unwrap(),
            Some(3)
        );
        for bad in ["null", "2.5", "-1", "4294967296", "\"3\""] {
            assert!(
                read(&format!(r#"{{{sweep},"repeat":{bad}}}"#)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_sweep_or_its_base_spec_given_as_null_is_refused() {
        for body in [
            r#"{"jobs": [{}], "sweep": null}"#,
            r#"{"jobs": [{}], "spec": null}"#,
            r#"{"sweep": {"exercise": [25]}, "spec": null}"#,
        ] {
            assert!(
                serde_json::from_str::<BatchRequest>(body).is_err(),
                "{body}"
            );
        }
        let absent: BatchRequest = serde_json::from_str(r#"{"jobs": [{}]}"#).unwrap();
        assert_eq!((absent.spec, absent.sweep), (None, None));
    }

    #[test]
    fn a_request_without_label_is_just_its_jobs() {
        let request = BatchRequest {
            jobs: vec![Spec::default()],
            ..BatchRequest::default()
        };
        let json = serde_json::to_value(&request).unwrap();
        assert_eq!(json.as_object().unwrap().len(), 1, "{json}");
        assert_eq!(
            serde_json::from_value::<BatchRequest>(json).unwrap(),
            request
        );
    }

    #[test]
    fn a_request_with_an_unknown_field_is_refused() {
        let err = serde_json::from_str::<BatchRequest>(r#"{"jobs": [], "lable": "x"}"#)
            .expect_err("unknown field");
        assert!(err.to_string().contains("lable"), "{err}");
    }

    #[test]
    fn finished_counts_every_final_state() {
        let counts = StateCounts {
            queued: 1,
            running: 2,
            succeeded: 3,
            failed: 4,
            cancelled: 5,
        };
        assert_eq!(counts.finished(), 12);
    }
}
