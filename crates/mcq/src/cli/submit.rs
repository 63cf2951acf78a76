//! `mcq submit`: one job, `--count` copies, or a file of specs, to a server;
//! `--wait` follows the batch with a progress bar and prints its summary;
//! `--dry-run` queues nothing and prints what the work would take.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use mcq_bench::{parse_cloud_price, parse_price};
use mcq_client::{Axis, BatchRequest, BatchView, Client, CostModel, JobState, JobView, Sweep};
use mcq_kernel::{Greek, Method, OptionKind, Spec, VarianceReduction};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::count::count;
use super::dry_run::print_dry_run;
use super::exit::{BadInput, Outcome};
use super::results::print_summary;
use super::status::{FOLLOW_REFRESH, print_batch, print_job};

/// Flags of `mcq submit`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    spec: SpecFlags,
    /// Submit this many copies of the flags' spec as one batch (1e3 = 1000),
    /// each job with its own seed.
    #[arg(long, default_value_t = 1, conflicts_with = "file", value_parser = count::<usize>(1..=10_000_000))]
    count: usize,
    /// A JSON array of specs, or a CSV file whose header names spec fields.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Vary a spec field over values, `FIELD=A,B,C` or `FIELD=FROM:TO:STEP`
    /// (both ends included); repeat for a grid: `--sweep exercise=25:35:5
    /// --sweep periods=10,20`. The other flags give the base spec and
    /// `--count` the jobs per grid point.
    #[arg(long, conflicts_with = "file", value_parser = parse_axis)]
    sweep: Vec<Axis>,
    /// Label of the batch.
    #[arg(long)]
    label: Option<String>,
    /// Base URL of the mcq server.
    #[arg(long, env = "MCQ_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// API key (from `mcq keys create`), sent as `Authorization: Bearer`;
    /// a server without keys needs none.
    #[arg(long, env = "MCQ_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
    /// Makes a retried submission return the original ids instead of enqueueing twice.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Wait until every job finished, then print the summary; the id is
    /// printed first. Exits 1 if a job failed or was cancelled.
    #[arg(long)]
    wait: bool,
    /// Queue nothing: validate exactly as a submission, then print the
    /// jobs, tasks and paths it would queue and the predicted compute and
    /// wall time on the server and on its live workers.
    #[arg(long, conflicts_with_all = ["wait", "quiet", "idempotency_key"])]
    dry_run: bool,
    /// With --dry-run: price of a local core-hour, for the cost (needs
    /// --cost-cloud), as `mcq bench compare --cost-local`.
    #[arg(long, value_parser = parse_price, requires = "cost_cloud", requires = "dry_run")]
    cost_local: Option<f64>,
    /// With --dry-run: price of a cloud core-hour, optionally with billing
    /// granularity, e.g. 0.05,granularity=1min (1s, 1min or 1h; default
    /// 1s). Needs --cost-local. As `mcq bench compare --cost-cloud`.
    #[arg(long, value_parser = parse_cloud_price, requires = "cost_local", requires = "dry_run")]
    cost_cloud: Option<(f64, f64)>,
    /// Print the server's JSON (the final view with --wait, the
    /// prediction with --dry-run).
    #[arg(long, conflicts_with = "quiet")]
    json: bool,
    /// Print only the id (of the job, or of the batch), for scripts:
    /// `ID=$(mcq submit --count 10 --quiet)`.
    #[arg(long, short)]
    quiet: bool,
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
    #[arg(long, value_parser = count::<u32>(0..=u64::from(u32::MAX)))]
    periods: Option<u32>,
    /// Monte Carlo paths (1e6 = 1_000_000).
    #[arg(long, value_parser = count::<u64>(0..=u64::MAX))]
    runs: Option<u64>,
    /// call or put.
    #[arg(long, value_parser = parse_enum::<OptionKind>)]
    option: Option<OptionKind>,
    /// mc or exact.
    #[arg(long, value_parser = parse_enum::<Method>)]
    method: Option<Method>,
    /// Seed of the random streams, 0 to 2^53 - 1 (drawn by the server when
    /// absent). For a batch (--count above 1, --file or --sweep) it is the
    /// batch's base seed: job i gets job_seed(seed, i), its own stream, the
    /// same on every submission (a spec in --file with a seed keeps it).
    #[arg(long, value_parser = clap::value_parser!(u64).range(..=mcq_kernel::MAX_SEED))]
    seed: Option<u64>,
    /// Simulate until the standard error is at most this (instead of --runs).
    #[arg(long)]
    target_std_error: Option<f64>,
    /// none, antithetic, arithmetic, geometric or auto.
    #[arg(long, value_parser = parse_enum::<VarianceReduction>)]
    variance_reduction: Option<VarianceReduction>,
    /// Sensitivities to report besides the price: delta (∂price/∂initial).
    #[arg(long, value_delimiter = ',', value_parser = parse_enum::<Greek>)]
    greeks: Vec<Greek>,
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
            greeks: self.greeks.clone(),
        }
    }
}

/// Parses a kernel enum by its JSON name, so flags and JSON agree.
fn parse_enum<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    serde_json::from_value(Value::String(text.to_owned())).map_err(|err| err.to_string())
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    let client = Client::new(&args.server)?.with_api_key(args.api_key.clone());
    let sweep = (!args.sweep.is_empty()).then(|| Sweep {
        axes: args.sweep.clone(),
    });
    let single = args.file.is_none() && sweep.is_none() && args.count == 1;
    // A batch's seed is its base: the server derives each job's seed from
    // it, so the copies of one spec are not the same job N times.
    let base_seed = if single { None } else { args.spec.seed };
    let unseeded = Spec {
        seed: if single { args.spec.seed } else { None },
        ..args.spec.to_spec()
    };
    let specs = match (&args.file, &sweep) {
        (Some(path), _) => read_specs(path).context(BadInput("--file".into()))?,
        (None, Some(_)) => Vec::new(),
        (None, None) => vec![unseeded.clone(); args.count],
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let total = match &sweep {
        Some(sweep) => sweep
            .points()
            .and_then(|n| usize::try_from(n).ok())
            .map_or(usize::MAX, |n| n.saturating_mul(args.count)),
        None => specs.len(),
    };
    // One job goes as a spec, anything else as a batch of them.
    let (job, batch) = if single {
        (specs.into_iter().next(), None)
    } else {
        (None, Some(specs))
    };
    let batch = batch.map(|jobs| BatchRequest {
        label: args.label.clone(),
        priority: None,
        jobs,
        seed: base_seed,
        spec: sweep.is_some().then(|| unseeded.clone()),
        repeat: sweep
            .is_some()
            .then(|| u32::try_from(args.count).unwrap_or(u32::MAX)),
        sweep: sweep.clone(),
    });
    runtime.block_on(async {
        let key = args.idempotency_key.as_deref();
        if args.dry_run {
            let cost = match (args.cost_local, args.cost_cloud) {
                (Some(local), Some(cloud)) => Some(CostModel::new(local, cloud)),
                _ => None,
            };
            let answer = match (&job, &batch) {
                (Some(job), _) => client.dry_run_job(job, cost.as_ref()).await,
                (None, Some(batch)) => client.dry_run_batch(batch, cost.as_ref()).await,
                (None, None) => anyhow::bail!("nothing to submit"),
            }
            .context("asking for a dry run")?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&answer)?);
            } else {
                print_dry_run(&answer);
            }
            return Ok(Outcome::Done);
        }
        if let Some(job) = &job {
            let job = client
                .submit_job(job, key)
                .await
                .context("submitting the job")?;
            if args.wait {
                args.announce(job.id, "job queued");
            } else if args.quiet {
                println!("{}", job.id);
            }
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
            } else if !args.quiet {
                print_job(&job);
            }
            return Ok(if args.wait {
                job_outcome(&job)
            } else {
                Outcome::Done
            });
        }
        let Some(batch) = batch else {
            anyhow::bail!("nothing to submit")
        };
        let accepted = client
            .submit_batch(&batch, key)
            .await
            .context("submitting the batch")?;
        if !args.wait {
            if args.json {
                println!("{}", serde_json::to_string_pretty(&accepted)?);
            } else if args.quiet {
                println!("{}", accepted.id);
            } else {
                println!("batch {}: {total} jobs queued", accepted.id);
                println!("follow it with: mcq status {}", accepted.id);
            }
            return Ok(Outcome::Done);
        }
        // The id comes first, so that an interrupted wait leaves it on screen.
        args.announce(accepted.id, &format!("{total} jobs queued"));
        let view = follow_batch(&client, accepted.id, total, !args.quiet, FOLLOW_REFRESH).await?;
        if sweep.is_some() && !args.quiet {
            let summary = client
                .batch_summary(accepted.id)
                .await
                .context("reading the batch summary")?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&summary)?);
            } else {
                print_summary(&summary);
            }
        } else if args.json {
            println!("{}", serde_json::to_string_pretty(&view)?);
        } else if !args.quiet {
            print_batch(&view);
        }
        Ok(batch_outcome(&view))
    })
}

impl Args {
    /// Says what was queued before waiting for it: the bare id with
    /// `--quiet`, a line on stderr with `--json` (stdout is the JSON), a
    /// line on stdout otherwise.
    fn announce(&self, id: Uuid, what: &str) {
        if self.quiet {
            println!("{id}");
        } else if self.json {
            eprintln!("{id}: {what}");
        } else {
            println!("{id}: {what}");
        }
    }
}

/// The outcome of a finished job: only success is success.
pub(crate) fn job_outcome(job: &JobView) -> Outcome {
    Outcome::from_ok(job.state == JobState::Succeeded)
}

/// The outcome of a finished batch: failed or cancelled jobs fail it.
pub(crate) fn batch_outcome(view: &BatchView) -> Outcome {
    Outcome::from_ok(view.counts.failed == 0 && view.counts.cancelled == 0)
}

/// The progress bar of a followed batch: jobs done, their rate and the
/// time left.
const BAR: &str =
    "{spinner} [{elapsed_precise}] {wide_bar} {pos}/{len} jobs, {per_sec}, ETA {eta} {msg}";

/// Follows a batch until it is done, with a progress bar on stderr when
/// `bar` (indicatif draws it on a terminal only). The server's long poll
/// answers as soon as the batch is done; `refresh` is only how often the
/// bar hears of a batch still running.
pub(crate) async fn follow_batch(
    client: &Client,
    id: Uuid,
    total: usize,
    bar: bool,
    refresh: Duration,
) -> anyhow::Result<BatchView> {
    let bar = if bar {
        indicatif::ProgressBar::new(total as u64)
    } else {
        indicatif::ProgressBar::hidden()
    };
    bar.set_style(
        indicatif::ProgressStyle::with_template(BAR)
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

/// Parses `FIELD=A,B,C` or `FIELD=FROM:TO:STEP` into a sweep axis; values
/// that read as numbers are numbers, others names (`option=call,put`).
fn parse_axis(text: &str) -> Result<Axis, String> {
    let (field, values) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected FIELD=A,B,C or FIELD=FROM:TO:STEP"))?;
    let field = field.trim();
    if field.is_empty() {
        return Err(format!("{text:?}: the field name is missing"));
    }
    let parts: Vec<&str> = values.split(':').collect();
    let values = match parts.as_slice() {
        [from, to, step] => range(from, to, step)?,
        [_] => values
            .split(',')
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .map(|v| {
                serde_json::from_str::<serde_json::Number>(v)
                    .map_or_else(|_| Value::String(v.to_owned()), Value::Number)
            })
            .collect(),
        _ => return Err(format!("{text:?}: a range is FROM:TO:STEP")),
    };
    if values.is_empty() {
        return Err(format!("{text:?}: no values"));
    }
    Ok(Axis {
        field: field.to_owned(),
        values,
    })
}

/// `from, from + step, …` up to `to` included (within a rounding error);
/// whole numbers when all three are.
fn range(from: &str, to: &str, step: &str) -> Result<Vec<Value>, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite())
            .ok_or_else(|| format!("{s:?} is not a number"))
    };
    let (a, b, h) = (number(from)?, number(to)?, number(step)?);
    if h <= 0.0 || b < a {
        return Err(format!(
            "the range {from}:{to}:{step} needs FROM <= TO and a STEP above 0"
        ));
    }
    let steps = ((b - a) / h + 1e-9).floor();
    if steps >= 100_000.0 {
        return Err(format!(
            "the range {from}:{to}:{step} has over 100000 values"
        ));
    }
    let whole = [a, b, h].iter().all(|x| x.fract() == 0.0);
    // `steps` is below 100,000: the conversion is exact.
    let count = steps as u32 + 1;
    Ok((0..count)
        .map(|i| {
            let x = a + f64::from(i) * h;
            if whole {
                Value::from(x as i64)
            } else {
                // Decimal steps land on 0.30000000000000004: round to the
                // digits the user wrote.
                Value::from((x * 1e12).round() / 1e12)
            }
        })
        .collect())
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
    fn sweep_flags_take_lists_and_ranges() {
        let axis = parse_axis("exercise=25:35:5").unwrap();
        assert_eq!(axis.field, "exercise");
        assert_eq!(serde_json::to_string(&axis.values).unwrap(), "[25,30,35]");
        let axis = parse_axis("down=0.7:0.9:0.1").unwrap();
        assert_eq!(
            serde_json::to_string(&axis.values).unwrap(),
            "[0.7,0.8,0.9]"
        );
        let axis = parse_axis("option=call,put").unwrap();
        assert_eq!(
            serde_json::to_string(&axis.values).unwrap(),
            r#"["call","put"]"#
        );
        assert_eq!(parse_axis("periods=10").unwrap().values.len(), 1);
        for bad in [
            "exercise",
            "=1,2",
            "exercise=",
            "x=1:2",
            "x=3:1:1",
            "x=1:2:0",
            "x=0:1e9:1",
        ] {
            assert!(parse_axis(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_bar_shows_rate_and_time_left() {
        assert!(indicatif::ProgressStyle::with_template(BAR).is_ok());
        assert!(BAR.contains("{per_sec}") && BAR.contains("{eta}"));
    }

    #[test]
    fn csv_rejects_unknown_columns_and_ragged_rows() {
        assert!(parse_csv("up,colour\n1.5,red\n").is_err());
        assert!(parse_csv("up,down\n1.5\n").is_err());
        assert!(parse_csv("").is_err());
    }
}
