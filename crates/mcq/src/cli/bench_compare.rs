//! `mcq bench compare`: the same batch locally and through the service,
//! with progress bars while it runs and a table, CSV, JSON and charts after.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::Context;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use mcq_bench::link_sweep::{LinkRun, LinkSweepReport};
use mcq_bench::{
    Backend, CostModel, Event, LinkProfile, Plan, Platform, PollOptions, Target, parse_cloud_price,
    parse_link, parse_price,
};

use super::color;
use super::count::count;
use super::exit::{Outcome, bad_input};

/// Flags of `mcq bench compare`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct Args {
    /// Pricing calls per batch.
    #[arg(long, default_value_t = 100, value_parser = count::<u32>(1..=100_000))]
    calls: u32,
    /// Paths per call (1000000, 1_000_000 and 1e6 all work).
    #[arg(long, default_value = "1e6", value_parser = count::<u64>(1..=u64::MAX))]
    runs: u64,
    /// Trials per platform; the first is reported as cold.
    #[arg(long, default_value_t = 10, value_parser = count::<u32>(1..=10_000))]
    trials: u32,
    /// Platforms, comma-separated: local-1, local-all, service.
    #[arg(
        long,
        default_value = "local-1,local-all,service",
        value_delimiter = ','
    )]
    platforms: Vec<Platform>,
    /// Measure against a running server instead of starting one.
    #[arg(long, conflicts_with_all = ["workers", "database_url"])]
    server: Option<String>,
    /// Start a private server with N workers (default: one per core): embedded
    /// workers on the SQLite default, or N `mcq worker` processes with --database-url.
    #[arg(long, value_parser = count::<u32>(1..=256))]
    workers: Option<u32>,
    /// PostgreSQL for the private server (e.g. postgres://user@localhost/db).
    #[arg(long)]
    database_url: Option<String>,
    /// Also measure these paths per call and find the break-even (e.g. 1e3,1e4,1e5).
    #[arg(long, value_delimiter = ',', value_parser = count::<u64>(1..=u64::MAX))]
    sweep_runs: Option<Vec<u64>>,
    /// Directory for CSV, JSON and charts.
    #[arg(long, default_value = "mcq-out")]
    out: PathBuf,
    /// Seed of call 0; call i uses seed + i on every platform.
    #[arg(long, default_value_t = 2010)]
    seed: u64,
    /// Threads of local-all (default: the machine's cores).
    #[arg(long, value_parser = count::<u32>(1..=1024))]
    threads: Option<u32>,
    /// Longest a batch poll waits on the server for the batch to finish
    /// (a long poll, answered as soon as the batch is done), in
    /// milliseconds; 0 polls plainly every --poll-ms instead.
    #[arg(long, default_value_t = 1000.0)]
    wait_ms: f64,
    /// Milliseconds between plain batch polls (only with --wait-ms 0).
    #[arg(long, default_value_t = 5.0)]
    poll_ms: f64,
    /// Give up on a service batch after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Price of a local core-hour, for the cost per batch (needs --cost-cloud).
    #[arg(long, value_parser = parse_price, requires = "cost_cloud")]
    cost_local: Option<f64>,
    /// Price of a cloud core-hour and its billing granularity, e.g.
    /// 0.05,granularity=1min (1s, 1min or 1h; default 1s). Needs --cost-local.
    #[arg(long, value_parser = parse_cloud_price, requires = "cost_local")]
    cost_cloud: Option<(f64, f64)>,
    /// Emulated link for both the database and the client links: loopback,
    /// same-az, cross-az, cross-region, wan-2010 or
    /// rtt=20ms,jitter=2ms,rate=100mbit,loss=0.1% (see docs/bench.md).
    /// Several (`--link loopback,same-az,cross-region`, a custom one in a
    /// --link of its own) run the whole comparison once per link, into
    /// OUT/LINK/, and chart the break-even against the links' RTT.
    #[arg(long, value_parser = link_list, conflicts_with_all = ["link_db", "link_client"])]
    link: Vec<LinkList>,
    /// Emulated link between the service's workers and PostgreSQL (needs --database-url).
    #[arg(long, value_parser = link_profile)]
    link_db: Option<Box<LinkProfile>>,
    /// Emulated link between this client and the service's API.
    #[arg(long, value_parser = link_profile)]
    link_client: Option<Box<LinkProfile>>,
    /// Reproduce a published grid in one command. `2010`: 100 calls of 1M
    /// and 10M paths, all platforms, --trials trials (10 by default, the
    /// first cold), once with the service on loopback and once over
    /// wan-2010, then a table beside the 2010 result (OUT/preset-2010.md).
    #[arg(
        long,
        value_parser = ["2010"],
        conflicts_with_all = ["calls", "runs", "sweep_runs", "platforms", "link", "link_db", "link_client"]
    )]
    preset: Option<String>,
}

/// A link profile, boxed so the command's flags stay small beside the others.
fn link_profile(text: &str) -> Result<Box<LinkProfile>, String> {
    parse_link(text).map(Box::new)
}

/// The profiles of one `--link`: a custom `key=value,…` profile, or a
/// comma-separated list of built-in names.
#[derive(Debug, Clone)]
struct LinkList(Vec<LinkProfile>);

fn link_list(text: &str) -> Result<LinkList, String> {
    if text.contains('=') {
        return parse_link(text).map(|p| LinkList(vec![p]));
    }
    text.split(',')
        .map(parse_link)
        .collect::<Result<_, _>>()
        .map(LinkList)
}

impl Args {
    /// Every `--link` profile, in the order given.
    fn links(&self) -> Vec<LinkProfile> {
        self.link.iter().flat_map(|l| l.0.iter().cloned()).collect()
    }

    /// The one `--link` of a single comparison.
    fn single_link(&self) -> Option<LinkProfile> {
        self.links().into_iter().next()
    }
}

/// Runs `mcq bench compare`.
pub(crate) fn run(args: Args) -> anyhow::Result<Outcome> {
    if args.preset.is_some() {
        return preset_2010(args);
    }
    if args.links().len() > 1 {
        let links = args.links();
        let out = args.out.clone();
        let (_, sweep) = sweep_links(args, &links)?;
        print!("\n{}", sweep.table);
        println!(
            "wrote {} files to {} (and each link's run into its folder)",
            sweep.sweep.files.len(),
            out.display()
        );
        return Ok(Outcome::Done);
    }
    let report = measure(args)?;
    print!("{}", report.table);
    println!(
        "wrote {} files to {}",
        report.summary.files.len(),
        report.out_dir.display()
    );
    Ok(Outcome::Done)
}

/// Validates the flags, runs the comparison and writes its files.
fn measure(args: Args) -> anyhow::Result<mcq_bench::Report> {
    // Repeating a platform must not run it twice.
    let mut platforms: Vec<Platform> = args.platforms.clone();
    platforms.sort();
    platforms.dedup();
    if !(args.poll_ms.is_finite() && (0.1..=10_000.0).contains(&args.poll_ms)) {
        return Err(bad_input(format!(
            "--poll-ms must be between 0.1 and 10000, got {}",
            args.poll_ms
        )));
    }
    // The server accepts waits up to 60 s.
    if !(args.wait_ms.is_finite() && (0.0..=60_000.0).contains(&args.wait_ms)) {
        return Err(bad_input(format!(
            "--wait-ms must be between 0 and 60000, got {}",
            args.wait_ms
        )));
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut levels = args.sweep_runs.clone().unwrap_or_default();
    levels.push(args.runs);
    levels.sort_unstable();
    levels.dedup();
    let service = if platforms.contains(&Platform::Service) {
        Some(match (&args.server, &args.database_url) {
            (Some(url), _) => Target::Server(url.clone()),
            (None, Some(url)) => Target::Start(Backend::Postgres {
                url: url.clone(),
                workers: args.workers.unwrap_or(u32::try_from(cores).unwrap_or(1)),
            }),
            (None, None) => Target::Start(Backend::Embedded {
                workers: args.workers.unwrap_or(u32::try_from(cores).unwrap_or(1)),
            }),
        })
    } else {
        None
    };
    let link = args.single_link();
    let link_client = args
        .link_client
        .clone()
        .map(|p| *p)
        .or_else(|| link.clone())
        .unwrap_or_else(LinkProfile::loopback);
    let embedded = matches!(service, Some(Target::Start(Backend::Embedded { .. })));
    let link_db = match (args.link_db.as_deref(), link.as_ref()) {
        (Some(p), _) if !p.is_loopback() && embedded => {
            return Err(bad_input(
                "--link-db needs --database-url: the embedded SQLite database lives inside the \
                 server process, with no network between its workers and the database"
                    .to_owned(),
            ));
        }
        (Some(p), _) if !p.is_loopback() && args.server.is_some() => {
            return Err(bad_input(
                "--link-db needs a service this command starts (--database-url); the workers \
                 of --server are not ours to route"
                    .to_owned(),
            ));
        }
        // `--link` on the embedded default: the database has no link to emulate.
        (None, Some(_)) if embedded || args.server.is_some() => LinkProfile {
            name: if embedded {
                "in-process".to_owned()
            } else {
                "not emulated (remote server)".to_owned()
            },
            ..LinkProfile::loopback()
        },
        (Some(p), _) | (None, Some(p)) => p.clone(),
        (None, None) => LinkProfile::loopback(),
    };
    let plan = Plan {
        calls: args.calls,
        levels,
        trials: args.trials,
        platforms,
        seed: args.seed,
        local_all_threads: args.threads.map_or(cores, |t| t as usize),
        service,
        poll: PollOptions {
            wait: Duration::from_secs_f64(args.wait_ms / 1e3),
            interval: Duration::from_secs_f64(args.poll_ms / 1e3),
            timeout: Duration::from_secs(args.timeout_secs),
        },
        exe: std::env::current_exe().context("locating the mcq executable to start the service")?,
        service_dir: args.out.join(mcq_bench::SERVICE_DIR),
        cost: match (args.cost_local, args.cost_cloud) {
            (Some(local), Some((cloud, granularity))) => Some(CostModel {
                local_per_core_hour: local,
                cloud_per_core_hour: cloud,
                cloud_granularity_s: granularity,
            }),
            _ => None,
        },
        link_db,
        link_client,
    };
    let bars = Bars::new(&plan);
    let report = mcq_bench::compare(&plan, args.runs, args.out.clone(), &|event| bars.on(event))?;
    bars.finish();
    Ok(report)
}

/// The whole comparison once per link, into OUT/LINK/, then the link
/// sweep (the break-even against RTT) into OUT.
fn sweep_links(
    args: Args,
    links: &[LinkProfile],
) -> anyhow::Result<(Vec<LinkRun>, LinkSweepReport)> {
    use mcq_bench::link_sweep;
    let dirs = link_sweep::run_dirs(links).map_err(bad_input)?;
    let out = args.out.clone();
    // An earlier sweep's chart must not pass for this one's while it runs.
    link_sweep::remove_stale(&out)?;
    let mut runs = Vec::new();
    for (profile, dir) in links.iter().zip(dirs) {
        println!("the service over {profile}");
        let mut one = args.clone();
        one.out = out.join(&dir);
        one.link = vec![LinkList(vec![profile.clone()])];
        let report = measure(one)?;
        print!("{}", report.table);
        runs.push(LinkRun {
            profile: profile.clone(),
            dir,
            summary: report.summary,
        });
    }
    let report = link_sweep::write(&runs, &out)?;
    Ok((runs, report))
}

/// `--preset 2010`: the grid twice, on loopback and over wan-2010, into
/// OUT/loopback and OUT/wan-2010, the link sweep's charts into OUT, and the
/// comparison table beside 2010's result, printed and written to
/// OUT/preset-2010.md.
fn preset_2010(mut args: Args) -> anyhow::Result<Outcome> {
    use mcq_bench::preset;
    let out = args.out.clone();
    args.preset = None;
    args.calls = preset::CALLS;
    args.runs = preset::LEVELS[0];
    args.sweep_runs = Some(preset::LEVELS[1..].to_vec());
    args.platforms = Platform::ALL.to_vec();
    let links = ["loopback", "wan-2010"]
        .map(parse_link)
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad_input)?;
    let trials = args.trials;
    let (runs, sweep) = sweep_links(args, &links)?;
    let of = |name: &str| {
        runs.iter()
            .find(|r| r.profile.name == name)
            .map(|r| r.summary.levels.clone())
            .unwrap_or_default()
    };
    let table = preset::table(&of("loopback"), &of("wan-2010"));
    let path = out.join("preset-2010.md");
    std::fs::write(
        &path,
        format!(
            "# mcq bench compare --preset 2010\n\nMedian warm wall time per batch of {} calls \
             [95% interval], {trials} trials per platform and level, the first cold; details \
             in loopback/report.md and wan-2010/report.md.\n\n{table}\n## Break-even per \
             link\n\n{}\n![speedup-by-link.svg](speedup-by-link.svg)\n\n\
             ![break-even-rtt.svg](break-even-rtt.svg)\n",
            preset::CALLS,
            sweep.table
        ),
    )
    .with_context(|| format!("writing {}", path.display()))?;
    println!("\n{table}\n{}\nwrote {}", sweep.table, path.display());
    Ok(Outcome::Done)
}

/// An overall bar over all trials and one for the running trial's calls.
struct Bars {
    multi: MultiProgress,
    overall: ProgressBar,
    current: Mutex<Option<ProgressBar>>,
    trials: u32,
}

impl Bars {
    fn new(plan: &Plan) -> Self {
        let multi = MultiProgress::new();
        let total = plan.levels.len() as u64 * u64::from(plan.trials) * plan.platforms.len() as u64;
        let overall = multi.add(ProgressBar::new(total));
        overall.set_style(
            ProgressStyle::with_template(&format!(
                "trials {{bar:30{}}} {{pos}}/{{len}} [{{elapsed_precise}}] {{msg}}",
                paint(".cyan/blue")
            ))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        Self {
            multi,
            overall,
            current: Mutex::new(None),
            trials: plan.trials,
        }
    }

    fn on(&self, event: Event) {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match event {
            Event::ServiceReady { url, slots } => {
                let _ = self
                    .multi
                    .println(format!("service ready at {url} with {slots} compute slots"));
            }
            Event::TrialStarted {
                platform,
                runs,
                trial,
                calls,
            } => {
                let bar = self.multi.add(ProgressBar::new(u64::from(calls)));
                bar.set_style(
                    ProgressStyle::with_template(&format!(
                        "{{prefix:>30}} {{bar:30{}}} {{pos}}/{{len}} calls",
                        paint(".green/white")
                    ))
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                );
                bar.set_prefix(format!(
                    "{platform} {runs} runs, trial {trial}/{}",
                    self.trials
                ));
                *current = Some(bar);
            }
            Event::Progress(done) => {
                if let Some(bar) = current.as_ref() {
                    bar.set_position(done);
                }
            }
            Event::TrialFinished(record) => {
                if let Some(bar) = current.take() {
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
                self.overall.inc(1);
                self.overall.set_message(format!(
                    "last: {} {:.3} s{}",
                    record.platform,
                    record.wall_ms / 1e3,
                    if record.cold { " (cold)" } else { "" }
                ));
            }
        }
    }

    fn finish(&self) {
        self.overall.finish_and_clear();
    }
}

/// A bar's colour in a progress template, or nothing under `--color never`.
fn paint(style: &str) -> &str {
    if color::stderr() { style } else { "" }
}
