//! The environment record of every output: what machine, kernel, load,
//! backend, build and links the numbers come from, and the warnings that
//! say when they should not be trusted.

use serde::Serialize;

/// Where and with what a comparison ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Environment {
    /// CPU model name from `/proc/cpuinfo` (`unknown` elsewhere).
    pub cpu_model: String,
    /// Cores available to this process.
    pub cores: usize,
    /// Kernel: `uname -srm`, or the OS name when that fails.
    pub kernel: String,
    /// 1, 5 and 15 minute load averages from `/proc/loadavg` before the run.
    pub load_before: Option<[f64; 3]>,
    /// The same after the run.
    pub load_after: Option<[f64; 3]>,
    /// The service's database: `SQLite (embedded)`, `PostgreSQL`,
    /// `remote server` or `none`.
    pub backend: String,
    /// Its version (`SHOW server_version`, `sqlite_version()`), when it
    /// could be asked.
    pub backend_version: Option<String>,
    /// Version of this build of mcq.
    pub mcq_version: &'static str,
    /// Commit it was built from (`-dirty` with local changes), or `unknown`.
    pub mcq_commit: &'static str,
    /// The link between the workers and the database.
    pub link_db: String,
    /// The link between the benchmark client and the API.
    pub link_client: String,
}

/// The three load averages, when the system reports them.
pub(crate) fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<f64>().ok());
    Some([fields.next()??, fields.next()??, fields.next()??])
}

/// The first `model name` of `/proc/cpuinfo`.
fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

fn kernel() -> String {
    std::process::Command::new("uname")
        .arg("-srm")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| std::env::consts::OS.to_owned())
}

impl Environment {
    /// This machine and build now; the backend, its version and the links
    /// as given, the load after the run still to be filled in.
    pub(crate) fn current(
        backend: String,
        backend_version: Option<String>,
        link_db: String,
        link_client: String,
    ) -> Self {
        Self {
            cpu_model: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            kernel: kernel(),
            load_before: load_average(),
            load_after: None,
            backend,
            backend_version,
            mcq_version: env!("CARGO_PKG_VERSION"),
            mcq_commit: env!("MCQ_COMMIT"),
            link_db,
            link_client,
        }
    }

    /// A warning when the 1-minute load before or after the run exceeded
    /// the cores: other work shared the CPU, and every time is suspect.
    pub(crate) fn busy_warning(&self) -> Option<String> {
        let cores = self.cores as f64;
        let worst = [self.load_before, self.load_after]
            .into_iter()
            .flatten()
            .map(|l| l[0])
            .fold(f64::NAN, f64::max);
        (worst > cores).then(|| {
            format!(
                "the machine was busy: load average {worst:.2} above its {} cores; \
                 other work shared the CPU and every time here is suspect",
                self.cores
            )
        })
    }

    /// The record as Markdown table rows (`| what | value |`).
    pub(crate) fn markdown_rows(&self) -> String {
        let load = |l: Option<[f64; 3]>| {
            l.map_or("unknown".to_owned(), |l| {
                format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2])
            })
        };
        let rows = [
            ("CPU", self.cpu_model.clone()),
            ("cores", self.cores.to_string()),
            ("kernel", self.kernel.clone()),
            ("load before (1, 5, 15 min)", load(self.load_before)),
            ("load after (1, 5, 15 min)", load(self.load_after)),
            ("backend", self.backend.clone()),
            (
                "backend version",
                self.backend_version
                    .clone()
                    .unwrap_or_else(|| "unknown".to_owned()),
            ),
            ("mcq", format!("{} ({})", self.mcq_version, self.mcq_commit)),
            ("link workers ↔ database", self.link_db.clone()),
            ("link client ↔ API", self.link_client.clone()),
        ];
        rows.iter()
            .map(|(k, v)| format!("| {k} | {} |\n", v.replace('|', "\\|")))
            .collect()
    }
}

/// Asks the backend its version: `SHOW server_version` on PostgreSQL, and
/// for the embedded default `sqlite_version()` of the SQLite library
/// bundled into this binary, the same one a started `mcq serve` uses.
pub(crate) fn backend_version(postgres_url: Option<&str>) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        use sqlx::Connection;
        match postgres_url {
            Some(url) => {
                let mut conn = sqlx::PgConnection::connect(url).await.ok()?;
                let version: String = sqlx::query_scalar("SHOW server_version")
                    .fetch_one(&mut conn)
                    .await
                    .ok()?;
                let _ = conn.close().await;
                Some(format!("PostgreSQL {version}"))
            }
            None => {
                let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
                    .await
                    .ok()?;
                let version: String = sqlx::query_scalar("SELECT sqlite_version()")
                    .fetch_one(&mut conn)
                    .await
                    .ok()?;
                let _ = conn.close().await;
                Some(format!("SQLite {version}"))
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_names_this_machine_and_build() {
        let env = Environment::current(
            "SQLite (embedded)".to_owned(),
            backend_version(None),
            "loopback".to_owned(),
            "loopback".to_owned(),
        );
        assert!(env.cores >= 1);
        assert!(!env.kernel.is_empty() && !env.mcq_commit.is_empty());
        let version = env.backend_version.clone().unwrap();
        assert!(version.starts_with("SQLite 3."), "{version}");
        let rows = env.markdown_rows();
        assert!(
            rows.contains("| cores |") && rows.contains("SQLite 3."),
            "{rows}"
        );
    }

    #[test]
    fn a_load_above_the_cores_is_a_warning() {
        let mut env = Environment::current(
            "none".to_owned(),
            None,
            "loopback".to_owned(),
            "loopback".to_owned(),
        );
        env.cores = 2;
        env.load_before = Some([0.5, 0.5, 0.5]);
        env.load_after = Some([1.9, 1.0, 1.0]);
        assert_eq!(env.busy_warning(), None);
        env.load_after = Some([2.6, 1.0, 1.0]);
        let warning = env.busy_warning().unwrap();
        assert!(
            warning.contains("2.60") && warning.contains("2 cores"),
            "{warning}"
        );
    }
}
