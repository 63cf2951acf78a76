//! Starting and stopping real PostgreSQL clusters with the server binaries
//! on this machine. `initdb` refuses to run as root, so as root every server
//! command runs as the unprivileged `postgres` user.

use std::fs::{self, File};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{Context as _, bail};

/// Port of the cluster shared by all test processes of this machine.
///
/// Below Linux's ephemeral range (32768–60999 by default): the tests bind
/// HTTP servers and private clusters to ports the kernel picks from that
/// range, and one of them once held 55432, the old choice, at the moment
/// the shared cluster started, which failed every PostgreSQL test of that
/// run with "Address already in use".
const SHARED_PORT: u16 = 25432;

/// How `pg_ctl` ends a server's sessions when it stops or restarts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Rolls back open transactions, closes the sessions, checkpoints.
    Fast,
    /// Kills every process at once, as a crash would; recovery replays WAL.
    Immediate,
}

impl Shutdown {
    fn as_arg(self) -> &'static str {
        match self {
            Shutdown::Fast => "fast",
            Shutdown::Immediate => "immediate",
        }
    }
}

/// A PostgreSQL cluster in a directory of its own, listening on loopback.
#[derive(Debug)]
pub struct PgCluster {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    as_postgres_user: bool,
    /// The server offers TLS with `server.crt` and `server.key` of `dir`.
    tls: bool,
}

impl PgCluster {
    /// The cluster shared by every test on this machine, started on first
    /// use and left running for later test processes.
    pub fn shared() -> anyhow::Result<&'static PgCluster> {
        static SHARED: OnceLock<Result<PgCluster, String>> = OnceLock::new();
        SHARED
            .get_or_init(|| {
                let dir = std::env::temp_dir().join(format!("mcq-testpg-{SHARED_PORT}"));
                PgCluster::start_at(dir, SHARED_PORT).map_err(|e| format!("{e:#}"))
            })
            .as_ref()
            .map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// Starts a private cluster on a free port, for tests that stop or
    /// restart the server. It is stopped and removed when dropped.
    pub fn private() -> anyhow::Result<PgCluster> {
        let port = free_port()?;
        let dir =
            std::env::temp_dir().join(format!("mcq-testpg-private-{port}-{}", std::process::id()));
        PgCluster::start_at(dir, port)
    }

    /// Starts a private cluster like [`PgCluster::private`] that offers TLS
    /// (`ssl = on`) with the PEM certificate chain `cert` and its private
    /// key `key`, copied into the cluster's directory (the server reads its
    /// key only from a file of its own user, readable by it alone).
    /// Connections without TLS are still accepted.
    pub fn private_with_tls(cert: &Path, key: &Path) -> anyhow::Result<PgCluster> {
        let port = free_port()?;
        let dir = std::env::temp_dir().join(format!(
            "mcq-testpg-private-tls-{port}-{}",
            std::process::id()
        ));
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (from, name) in [(cert, "server.crt"), (key, "server.key")] {
            let to = dir.join(name);
            fs::copy(from, &to).with_context(|| format!("copying {}", from.display()))?;
            use std::os::unix::fs::PermissionsExt as _;
            fs::set_permissions(&to, fs::Permissions::from_mode(0o600))?;
        }
        PgCluster::start_with(dir, port, true)
    }

    /// Connection URL of database `db` in this cluster.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server immediately (`pg_ctl stop -m immediate`), as a crash would.
    pub fn stop(&self) -> anyhow::Result<()> {
        self.pg_ctl(&["stop", "-m", "immediate", "-w"])
    }

    /// Stops the server with `pg_ctl stop -m <mode>`.
    pub fn stop_with(&self, mode: Shutdown) -> anyhow::Result<()> {
        self.pg_ctl(&["stop", "-m", mode.as_arg(), "-w"])
    }

    /// Restarts the server with `pg_ctl restart -m <mode>`, waiting until
    /// it accepts connections again.
    pub fn restart(&self, mode: Shutdown) -> anyhow::Result<()> {
        let mut args = self.start_args();
        args[0] = "restart".into();
        args.extend(["-m".into(), mode.as_arg().into()]);
        self.pg_ctl(&args)
    }

    /// Starts the server again after [`PgCluster::stop`].
    pub fn start(&self) -> anyhow::Result<()> {
        self.pg_ctl(&self.start_args())
    }

    /// Creates a database in this cluster with `createdb`; returns its URL.
    pub fn create_database(&self, name: &str) -> anyhow::Result<String> {
        let status = self
            .command("createdb")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                name,
            ])
            .status()
            .context("running createdb")?;
        if !status.success() {
            bail!("createdb {name} failed");
        }
        Ok(self.url(name))
    }

    fn start_at(dir: PathBuf, port: u16) -> anyhow::Result<PgCluster> {
        PgCluster::start_with(dir, port, false)
    }

    fn start_with(dir: PathBuf, port: u16, tls: bool) -> anyhow::Result<PgCluster> {
        let bin = find_bin_dir()?;
        let as_postgres_user = is_root();
        let cluster = PgCluster {
            dir,
            port,
            bin,
            as_postgres_user,
            tls,
        };
        fs::create_dir_all(&cluster.dir)
            .with_context(|| format!("creating {}", cluster.dir.display()))?;
        // Several test processes may race to start the shared cluster.
        let lock = File::create(cluster.dir.with_extension("lock"))
            .context("creating the cluster lock file")?;
        lock.lock().context("locking the cluster lock file")?;
        if cluster.is_running() {
            return Ok(cluster);
        }
        let data = cluster.data_dir();
        if !data.join("PG_VERSION").exists() {
            if data.exists() {
                fs::remove_dir_all(&data).ok();
            }
            fs::create_dir_all(&data)?;
            if cluster.as_postgres_user {
                let status = Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(&cluster.dir)
                    .status()
                    .context("chown of the cluster directory to postgres")?;
                if !status.success() {
                    bail!("chown of {} to postgres failed", cluster.dir.display());
                }
            }
            let out = cluster
                .command("initdb")
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--no-sync",
                    "-E",
                    "UTF8",
                    "--locale=C",
                ])
                .output()
                .context("running initdb")?;
            if !out.status.success() {
                bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        if let Err(first) = cluster.pg_ctl(&cluster.start_args()) {
            // A server killed with its machine leaves `postmaster.pid` behind;
            // if nothing answers on the port, the file is stale.
            let pid_file = data.join("postmaster.pid");
            if !pid_file.exists() {
                return Err(first);
            }
            fs::remove_file(&pid_file).context("removing a stale postmaster.pid")?;
            cluster
                .pg_ctl(&cluster.start_args())
                .context("starting after removing a stale postmaster.pid")?;
        }
        Ok(cluster)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn start_args(&self) -> Vec<String> {
        let mut opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories='{}' -c max_connections=300 \
             -c fsync=off -c synchronous_commit=off -c full_page_writes=off",
            self.port,
            self.dir.display()
        );
        if self.tls {
            opts.push_str(&format!(
                " -c ssl=on -c ssl_cert_file='{0}/server.crt' -c ssl_key_file='{0}/server.key'",
                self.dir.display()
            ));
        }
        vec![
            "start".into(),
            "-w".into(),
            "-t".into(),
            "60".into(),
            "-l".into(),
            self.dir.join("server.log").display().to_string(),
            "-o".into(),
            opts,
        ]
    }

    fn is_running(&self) -> bool {
        self.data_dir().join("postmaster.pid").exists()
            && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
    }

    fn pg_ctl<S: AsRef<std::ffi::OsStr>>(&self, args: &[S]) -> anyhow::Result<()> {
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data_dir())
            .args(args)
            .output()
            .context("running pg_ctl")?;
        if !out.status.success() {
            let log = fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
            let tail: String = log.lines().rev().take(10).collect::<Vec<_>>().join("\n");
            bail!(
                "pg_ctl failed: {}{}\nserver log (last lines, newest first):\n{tail}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres_user {
            let mut cmd = Command::new("runuser");
            cmd.args(["-u", "postgres", "--"]).arg(path);
            cmd
        } else {
            Command::new(path)
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // Only private clusters are ever dropped: the shared one lives in a static.
        let _ = self.pg_ctl(&["stop", "-m", "immediate", "-w"]);
        let _ = fs::remove_dir_all(&self.dir);
        let _ = fs::remove_file(self.dir.with_extension("lock"));
    }
}

/// Directory holding `initdb`, `pg_ctl` and `postgres`.
fn find_bin_dir() -> anyhow::Result<PathBuf> {
    if let Ok(dir) = std::env::var("MCQ_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut candidates: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Ok(entries) = fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("bin"))
            .collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev());
    }
    candidates
        .into_iter()
        .find(|dir| ["initdb", "pg_ctl", "postgres"].iter().all(|b| dir.join(b).is_file()))
        .map(|dir| resolve_wrapper(&dir))
        .context("no PostgreSQL server binaries (initdb, pg_ctl, postgres) on PATH or in /usr/lib/postgresql/*/bin")
}

/// Debian's `/usr/bin` wrappers need a configured cluster; prefer the real
/// binaries next to `postgres` when the one on PATH is a symlink.
fn resolve_wrapper(dir: &Path) -> PathBuf {
    fs::canonicalize(dir.join("postgres"))
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .filter(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
        .unwrap_or_else(|| dir.to_path_buf())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}
