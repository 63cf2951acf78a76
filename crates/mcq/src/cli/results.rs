//! `mcq results ID`: a batch's results as CSV or JSON lines (streamed from
//! the server as they come, for `> out.csv`) or as a table; and the table
//! of a sweep's grid points that `submit --sweep --wait` prints.

use anyhow::Context as _;
use mcq_client::{BatchSummary, Client};
use serde_json::Value;
use uuid::Uuid;

use super::exit::{Outcome, bad_input};

/// Rows per page when printing a table.
const PAGE: u32 = 1000;

/// Flags of `mcq results`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Batch id.
    id: String,
    /// `csv` or `jsonl` (streamed as the server sends them), or `table`.
    #[arg(long, default_value = "csv", value_parser = ["csv", "jsonl", "table"])]
    format: String,
    /// Columns to print, comma-separated, in that order (default: all),
    /// e.g. `exercise,price,std_error`.
    #[arg(long)]
    fields: Option<String>,
    /// Base URL of the mcq server.
    #[arg(long, env = "MCQ_SERVER", default_value = "http://127.0.0.1:8080")]
    server: String,
    /// API key (from `mcq keys create`), sent as `Authorization: Bearer`;
    /// a server without keys needs none.
    #[arg(long, env = "MCQ_API_KEY", hide_env_values = true)]
    api_key: Option<String>,
}

/// Runs this subcommand.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    let id = Uuid::parse_str(args.id.trim())
        .map_err(|_| bad_input(format!("{:?} is not a batch id (a UUID)", args.id)))?;
    let client = Client::new(&args.server)?.with_api_key(args.api_key.clone());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let fields = args.fields.as_deref();
        if args.format != "table" {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            client
                .batch_results_to(id, &args.format, fields, &mut out)
                .await
                .context("reading the results")?;
            std::io::Write::flush(&mut out).context("writing the results")?;
            return Ok(Outcome::Done);
        }
        let mut columns: Vec<String> = Vec::new();
        let mut rows: Vec<Vec<String>> = Vec::new();
        let mut after: Option<Uuid> = None;
        loop {
            let page = client
                .batch_results_page(id, fields, after, PAGE)
                .await
                .context("reading the results")?;
            if columns.is_empty() {
                columns = page.columns.clone();
            }
            for row in &page.rows {
                rows.push(
                    columns
                        .iter()
                        .map(|c| row.get(c).map_or_else(|| "-".to_owned(), cell))
                        .collect(),
                );
            }
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        print_table(&columns, &rows);
        Ok(Outcome::Done)
    })
}

/// One row per grid point: its fields, jobs succeeded of its total, the
/// mean price, its standard error and 95% interval.
pub(crate) fn print_summary(summary: &BatchSummary) {
    let Some(first) = summary.points.first() else {
        return;
    };
    let mut columns: Vec<String> = first.point.0.iter().map(|(f, _)| f.clone()).collect();
    columns.extend(
        ["jobs", "price", "std_error", "ci95_low", "ci95_high"]
            .iter()
            .map(|c| (*c).to_owned()),
    );
    let rows: Vec<Vec<String>> = summary
        .points
        .iter()
        .map(|p| {
            let mut row: Vec<String> = p.point.0.iter().map(|(_, v)| cell(v)).collect();
            let total = p.counts.queued
                + p.counts.running
                + p.counts.succeeded
                + p.counts.failed
                + p.counts.cancelled;
            row.push(format!("{}/{total}", p.counts.succeeded));
            match &p.price {
                Some(price) => row.extend([
                    format!("{:.6}", price.mean),
                    format!("{:.6}", price.std_error),
                    format!("{:.6}", price.ci95[0]),
                    format!("{:.6}", price.ci95[1]),
                ]),
                None => row.extend(["-".into(), "-".into(), "-".into(), "-".into()]),
            }
            row
        })
        .collect();
    print_table(&columns, &rows);
}

/// A value as a table cell: strings bare, missing values as `-`.
fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Columns padded to their widest cell, numbers and text alike left-aligned
/// so that a header lines up with its values.
fn print_table(columns: &[String], rows: &[Vec<String>]) {
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |s| s.chars().count()))
                .chain([c.chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(columns);
    for row in rows {
        line(row);
    }
}
