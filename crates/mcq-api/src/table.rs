//! The columns of a results table and how each format writes them.

use axum::http::{HeaderMap, header};
use mcq_api_types::JobView;
use serde_json::Value;

use crate::problem::ApiError;

/// How a results table is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `text/csv`, streamed.
    Csv,
    /// JSON lines (`application/x-ndjson`), streamed.
    Lines,
    /// JSON pages with a cursor.
    Json,
}

impl Format {
    /// `?format=` when given, else the first of the Accept header's media
    /// types that names a table format, else JSON pages.
    pub(crate) fn negotiate(format: Option<&str>, headers: &HeaderMap) -> Result<Format, ApiError> {
        if let Some(format) = format {
            return match format {
                "csv" => Ok(Format::Csv),
                "jsonl" => Ok(Format::Lines),
                "json" => Ok(Format::Json),
                other => Err(ApiError::BadParameter(format!(
                    "format must be csv, jsonl or json (got {other:?})"
                ))),
            };
        }
        let accept = headers
            .get_all(header::ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(|t| {
                t.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase()
            });
        for media in accept {
            match media.as_str() {
                "text/csv" => return Ok(Format::Csv),
                "application/x-ndjson" | "application/jsonl" | "application/json-lines" => {
                    return Ok(Format::Lines);
                }
                "application/json" => return Ok(Format::Json),
                _ => {}
            }
        }
        Ok(Format::Json)
    }

    /// The Content-Type of a streamed table.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Lines => "application/x-ndjson",
            Format::Json => "application/json",
        }
    }
}

/// The delta columns, among the defaults when some job asked for delta.
const DELTA_COLUMNS: [&str; 2] = ["delta", "delta_std_error"];

/// Columns after the grid point's fields, in their default order.
const RESULT_COLUMNS: [&str; 17] = [
    "price",
    "std_error",
    "ci95_low",
    "ci95_high",
    "delta",
    "delta_std_error",
    "paths",
    "seed",
    "method",
    "attempts",
    "queue_wait_ms",
    "compute_ms",
    "elapsed_ms",
    "submitted_at",
    "started_at",
    "finished_at",
    "error",
];

/// One column of the table.
#[derive(Debug, Clone)]
enum Column {
    /// A spec field that varies over the batch (a grid point's field).
    Point(String),
    /// A fixed column: `job_id`, `state` or one of [`RESULT_COLUMNS`].
    Fixed(&'static str),
}

/// The columns of one table, chosen once per request.
#[derive(Debug, Clone)]
pub(crate) struct Columns(Vec<(String, Column)>);

impl Columns {
    /// Every column (`job_id`, `state`, the point's fields, the results;
    /// the delta columns only if `delta`, some job having asked for it),
    /// or those `fields` names, in its order: comma-separated, nothing
    /// around the names. An unknown name is a 400 listing the known ones.
    pub(crate) fn new(
        point: Vec<String>,
        delta: bool,
        fields: Option<&str>,
    ) -> Result<Columns, ApiError> {
        let mut all: Vec<(String, Column)> = vec![
            ("job_id".into(), Column::Fixed("job_id")),
            ("state".into(), Column::Fixed("state")),
        ];
        all.extend(point.into_iter().map(|f| (f.clone(), Column::Point(f))));
        all.extend(
            RESULT_COLUMNS
                .iter()
                .map(|c| ((*c).into(), Column::Fixed(c))),
        );
        let Some(fields) = fields else {
            all.retain(|(name, _)| delta || !DELTA_COLUMNS.contains(&name.as_str()));
            return Ok(Columns(all));
        };
        let mut chosen = Vec::new();
        for name in fields.split(',') {
            let Some(column) = all.iter().find(|(n, _)| n == name) else {
                let known: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
                return Err(ApiError::BadParameter(format!(
                    "unknown field {name:?} in fields; this batch has {}",
                    known.join(", ")
                )));
            };
            if chosen.iter().any(|(n, _)| n == name) {
                return Err(ApiError::BadParameter(format!(
                    "fields names {name:?} twice"
                )));
            }
            chosen.push(column.clone());
        }
        Ok(Columns(chosen))
    }

    /// The column names, in order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.0.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// A job's values, one per column; `null` where it has none (a price
    /// before the job succeeded, an error of a job that did not fail).
    pub(crate) fn row(&self, job: &JobView) -> Vec<(String, Value)> {
        let spec = match &job.point {
            Some(_) => None,
            None => serde_json::to_value(&job.spec).ok(),
        };
        let result = job.result.as_ref();
        let number = |x: Option<f64>| x.map_or(Value::Null, Value::from);
        let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
            t.map_or(Value::Null, |t| Value::String(t.to_rfc3339()))
        };
        self.0
            .iter()
            .map(|(name, column)| {
                let value = match column {
                    Column::Point(field) => match &job.point {
                        Some(point) => point
                            .0
                            .iter()
                            .find(|(f, _)| f == field)
                            .map_or(Value::Null, |(_, v)| v.clone()),
                        None => spec
                            .as_ref()
                            .and_then(|s| s.get(field))
                            .cloned()
                            .unwrap_or(Value::Null),
                    },
                    Column::Fixed(fixed) => match *fixed {
                        "job_id" => Value::String(job.id.to_string()),
                        "state" => serde_json::to_value(job.state).unwrap_or(Value::Null),
                        "price" => number(result.map(|r| r.price)),
                        "std_error" => number(result.map(|r| r.std_error)),
                        "ci95_low" => number(result.map(|r| r.ci95[0])),
                        "ci95_high" => number(result.map(|r| r.ci95[1])),
                        "delta" => number(result.and_then(|r| r.delta)),
                        "delta_std_error" => number(result.and_then(|r| r.delta_std_error)),
                        "paths" => result.map_or(Value::Null, |r| Value::from(r.paths)),
                        "seed" => job.spec.seed.map_or(Value::Null, Value::from),
                        "method" => serde_json::to_value(job.spec.method).unwrap_or(Value::Null),
                        "attempts" => Value::from(job.attempts),
                        "queue_wait_ms" => number(job.timings.queue_wait_ms),
                        "compute_ms" => number(job.timings.compute_ms),
                        "elapsed_ms" => number(result.map(|r| r.elapsed_ms)),
                        "submitted_at" => time(Some(job.timings.submitted_at)),
                        "started_at" => time(job.timings.started_at),
                        "finished_at" => time(job.timings.finished_at),
                        "error" => job.error.clone().map_or(Value::Null, Value::String),
                        _ => Value::Null,
                    },
                };
                (name.clone(), value)
            })
            .collect()
    }

    /// The CSV header line.
    pub(crate) fn csv_header(&self, out: &mut Vec<u8>) {
        let cells: Vec<String> = self.0.iter().map(|(n, _)| n.clone()).collect();
        write_csv(out, &cells);
    }

    /// One CSV line: numbers as JSON writes them (shortest exact form),
    /// strings as they are, missing values empty.
    pub(crate) fn csv_row(&self, row: &[(String, Value)], out: &mut Vec<u8>) {
        let cells: Vec<String> = row
            .iter()
            .map(|(_, value)| match value {
                Value::Null => String::new(),
                Value::String(text) => text.clone(),
                other => other.to_string(),
            })
            .collect();
        write_csv(out, &cells);
    }
}

/// One RFC 4180 record: cells quoted when they hold a comma, a quote or a
/// line break, lines ended by CRLF.
fn write_csv(out: &mut Vec<u8>, cells: &[String]) {
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        if cell.contains([',', '"', '\n', '\r']) {
            out.push(b'"');
            out.extend_from_slice(cell.replace('"', "\"\"").as_bytes());
            out.push(b'"');
        } else {
            out.extend_from_slice(cell.as_bytes());
        }
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn the_accept_header_or_the_format_parameter_chooses() {
        let with = |accept: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_str(accept).unwrap());
            Format::negotiate(None, &headers).unwrap()
        };
        assert_eq!(with("text/csv"), Format::Csv);
        assert_eq!(with("application/x-ndjson"), Format::Lines);
        assert_eq!(with("application/jsonl; q=0.9, text/csv"), Format::Lines);
        assert_eq!(with("*/*"), Format::Json);
        assert_eq!(
            Format::negotiate(Some("csv"), &HeaderMap::new()).unwrap(),
            Format::Csv
        );
        for bad in ["xlsx", "", "ndjson", "CSV"] {
            assert!(
                Format::negotiate(Some(bad), &HeaderMap::new()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn fields_pick_and_order_columns_and_unknown_ones_are_refused() {
        let columns = Columns::new(vec!["exercise".into()], false, Some("price,exercise")).unwrap();
        assert_eq!(columns.names(), ["price", "exercise"]);
        let all = Columns::new(vec!["exercise".into()], false, None).unwrap();
        assert_eq!(&all.names()[..4], ["job_id", "state", "exercise", "price"]);
        assert!(!all.names().contains(&"delta"));
        let with_delta = Columns::new(vec!["exercise".into()], true, None).unwrap();
        assert_eq!(
            &with_delta.names()[3..9],
            [
                "price",
                "std_error",
                "ci95_low",
                "ci95_high",
                "delta",
                "delta_std_error"
            ]
        );
        // Asked for by name, a delta column is there (empty) either way.
        assert!(Columns::new(Vec::new(), false, Some("delta")).is_ok());
        let Err(ApiError::BadParameter(detail)) = Columns::new(Vec::new(), false, Some("prise"))
        else {
            panic!("an unknown field must be refused");
        };
        assert!(
            detail.contains("prise") && detail.contains("price"),
            "{detail}"
        );
        // The names exactly as the schema's pattern has them.
        for bad in ["", "price,", ",price", "price, std_error", "price,,seed"] {
            assert!(
                Columns::new(Vec::new(), false, Some(bad)).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn csv_cells_are_quoted_only_when_needed() {
        let mut out = Vec::new();
        write_csv(
            &mut out,
            &["a".into(), "b,c".into(), "say \"hi\"".into(), String::new()],
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "a,\"b,c\",\"say \"\"hi\"\"\",\r\n"
        );
    }
}
