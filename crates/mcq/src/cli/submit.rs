//! `mcq submit`: one job, `--count` copies, or a file of specs, to a server;
//! `--wait` follows the batch with a progress bar and prints its summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use mcq_client::{BatchRequest, BatchView, Client, JobState};
use mcq_kernel::{Method, OptionKind, Spec, VarianceReduction};
use serde_json::{Map, Value};

use super::status::{FOLLOW_REFRESH, print_batch, print_job};

/// Flags of `mcq submit`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    spec: SpecFlags,
    /// Submit this many copies of the flags' spec as one batch.
    #[arg(long, default_value_t = 1, conflicts_with = "file")]
    count: usize,
    /// A JSON array of specs, or a CSV file whose header names spec fields.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Label of the batch.
    #[arg(long)]
    label: Option<String>,
    /// Base URL of the mcq server.
    #[arg(long, env = "MCQ_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// Makes a retried submission return the original ids instead of enqueueing twice.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Wait until every job finished, then print the summary.
    #[arg(long)]
    wait: bool,
    /// Print the server's JSON (the final view with --wait).
    #[arg(long)]
    json: bool,
}

/// The spec fields as flags, named as in `mcq price` and the JSON spec.
/// Unset flags take the server's defaults (the original sample).
#[derive(Debug, clap::Args)]
pub(crate) struct SpecFlags {
    /// Spot price S0.
    #[arg(long)]
    initial: Option<f64>,
    /// Strike K.
    #[arg(long)]
    exercise: Option<f64>,
    /// Up factor per period.
    #[arg(long)]
    up: Option<f64>,
    /// Down factor per period.
    #[arg(long)]
    down: Option<f64>,
    /// Gross interest factor per period (e.g. 1.08).
    #[arg(long)]
    interest: Option<f64>,
    /// Number of periods.
    #[arg(long)]
    periods: Option<u32>,
    /// Monte Carlo paths.
    #[arg(long)]
    runs: Option<u64>,
    /// call or put.
    #[arg(long, value_parser = parse_enum::<OptionKind>)]
    option: Option<OptionKind>,
    /// mc or exact.
    #[arg(long, value_parser = parse_enum::<Method>)]
    method: Option<Method>,
    /// Seed of the random streams (drawn by the server when absent).
    #[arg(long)]
    seed: Option<u64>,
    /// Simulate until the standard error is at most this (instead of --runs).
    #[arg(long)]
    target_std_error: Option<f64>,
    /// none, antithetic, arithmetic, geometric or auto.
    #[arg(long, value_parser = parse_enum::<VarianceReduction>)]
    variance_reduction: Option<VarianceReduction>,
}

impl SpecFlags {
    /// The spec the flags describe.
    pub(crate) fn to_spec(&self) -> Spec {
        let d = Spec::default();
        Spec {
            initial: self.initial.unwrap_or(d.initial),
            exercise: self.exercise.unwrap_or(d.exercise),
            up: self.up.unwrap_or(d.up),
            down: self.down.unwrap_or(d.down),
            interest: self.interest.unwrap_or(d.interest),
            periods: self.periods.unwrap_or(d.periods),
            runs: self.runs,
            target_std_error: self.target_std_error,
            option: self.option.unwrap_or(d.option),
            method: self.method.unwrap_or(d.method),
            seed: self.seed,
            variance_reduction: self.variance_reduction.unwrap_or(d.variance_reduction),
        }
    }
}

/// Parses a kernel enum by its JSON name, so flags and JSON agree.
fn parse_enum<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_value(Value::String(text.to_owned())).map_err(|err| err.to_string())
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<ExitCode> {
    let client = Client::new(&args.server)?;
    let specs = match &args.file {
        Some(path) => read_specs(path)?,
        None => vec![args.spec.to_spec(); args.count.max(1)],
    };
    let single = args.file.is_none() && args.count <= 1;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let key = args.idempotency_key.as_deref();
        if single {
            let job = client
                .submit_job(&specs[0], key)
                .await
                .context("submitting the job")?;
            let job = if args.wait {
                client
                    .wait_for_job(job.id, FOLLOW_REFRESH)
                    .await
                    .context("waiting for the job")?
            } else {
                job
            };
            if args.json {
                println!("{}", serde_json::to_string_pretty(&job)?);
            } else {
                print_job(&job);
            }
            return Ok(exit_code(job.state != JobState::Failed));
        }
        let total = specs.len();
        let batch = BatchRequest {
            label: args.label.clone(),
            jobs: specs,
        };
        let accepted = client
            .submit_batch(&batch, key)
            .await
            .context("submitting the batch")?;
        if !args.wait {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&accepted)?);
            } else {
                println!("batch {}: {total} jobs queued", accepted.id);
                println!("follow it with: mcq status {}", accepted.id);
            }
            return Ok(ExitCode::SUCCESS);
        }
        let view = follow_batch(&client, accepted.id, total, FOLLOW_REFRESH).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&view)?);
        } else {
            print_batch(&view);
        }
        Ok(exit_code(view.counts.failed == 0))
    })
}

fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Follows a batch with a progress bar on stderr until it is done. The
/// server's long poll answers as soon as the batch is done; `refresh` is
/// only how often the bar hears of a batch still running.
pub(crate) async fn follow_batch(
    client: &Client,
    id: uuid::Uuid,
    total: usize,
    refresh: Duration,
) -> anyhow::Result<BatchView> {
    let bar = indicatif::ProgressBar::new(total as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} jobs {msg}",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let view = client
        .wait_for_batch(id, refresh, |view| {
            let c = &view.counts;
            bar.set_position(c.succeeded + c.failed + c.cancelled);
            bar.set_message(format!("({} running)", c.running));
        })
        .await
        .context("following the batch")?;
    bar.finish_and_clear();
    Ok(view)
}

/// Reads a JSON array of specs (or a `{"jobs": [...]}` object), or a CSV
/// file whose header row names spec fields; empty cells take defaults.
fn read_specs(path: &PathBuf) -> anyhow::Result<Vec<Spec>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('[') || trimmed.starts_with('{') {
        let value: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON", path.display()))?;
        let items = match value {
            Value::Array(items) => items,
            Value::Object(mut map) => match map.remove("jobs") {
                Some(Value::Array(items)) => items,
                _ => anyhow::bail!(
                    "{}: expected an array of specs or {{\"jobs\": [...]}}",
                    path.display()
                ),
            },
            _ => anyhow::bail!("{}: expected an array of specs", path.display()),
        };
        items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                serde_json::from_value(item)
                    .with_context(|| format!("{}: spec #{i}", path.display()))
            })
            .collect()
    } else {
        parse_csv(&text).with_context(|| format!("reading CSV {}", path.display()))
    }
}

/// A deliberately small CSV reader: specs hold numbers and enum names, so
/// fields never need quoting (surrounding quotes are tolerated).
fn parse_csv(text: &str) -> anyhow::Result<Vec<Spec>> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let Some((_, header)) = lines.next() else {
        anyhow::bail!("the file is empty")
    };
    let columns: Vec<String> = header.split(',').map(|c| unquote(c).to_owned()).collect();
    let mut specs = Vec::new();
    for (number, line) in lines {
        let cells: Vec<&str> = line.split(',').map(unquote).collect();
        anyhow::ensure!(
            cells.len() == columns.len(),
            "line {}: {} cells but the header has {} columns",
            number + 1,
            cells.len(),
            columns.len()
        );
        let mut object = Map::new();
        for (column, cell) in columns.iter().zip(cells) {
            if cell.is_empty() {
                continue;
            }
            // Numbers become JSON numbers; anything else stays a string and
            // the spec's own decoder says whether it is acceptable.
            let value = serde_json::from_str::<serde_json::Number>(cell)
                .map_or_else(|_| Value::String(cell.to_owned()), Value::Number);
            object.insert(column.clone(), value);
        }
        let spec = serde_json::from_value(Value::Object(object))
            .with_context(|| format!("line {}", number + 1))?;
        specs.push(spec);
    }
    anyhow::ensure!(!specs.is_empty(), "no rows below the header");
    Ok(specs)
}

fn unquote(cell: &str) -> &str {
    let cell = cell.trim();
    cell.strip_prefix('"')
        .and_then(|c| c.strip_suffix('"'))
        .unwrap_or(cell)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_rows_become_specs_with_defaults_for_empty_cells() {
        let specs = parse_csv("up,down,runs,option\n1.5,0.7,1000,put\n\"1.3\",,,call\n").unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(
            (specs[0].up, specs[0].down, specs[0].runs, specs[0].option),
            (1.5, 0.7, Some(1000), OptionKind::Put)
        );
        assert_eq!(
            (specs[1].up, specs[1].down, specs[1].runs),
            (1.3, Spec::default().down, None)
        );
    }

    #[test]
    fn csv_rejects_unknown_columns_and_ragged_rows() {
        assert!(parse_csv("up,colour\n1.5,red\n").is_err());
        assert!(parse_csv("up,down\n1.5\n").is_err());
        assert!(parse_csv("").is_err());
    }
}
