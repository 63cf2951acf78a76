//! TLS to PostgreSQL: a server with `ssl = on` and a certificate signed by
//! a certificate authority made for the test (openssl). `mcq serve` and
//! `mcq worker` connect with `sslmode=verify-full` and the authority as
//! `sslrootcert`, run a batch, and every session they hold is encrypted;
//! a worker given another authority refuses the server's certificate and
//! exits non-zero at once, saying so, instead of retrying a mistake that
//! waiting cannot mend.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context as _, bail};
use mcq_testdb::PgCluster;
use mcq_tests::{McqProcess, TempDir};

use super::batch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_and_a_worker_connect_over_verified_tls() -> anyhow::Result<()> {
    if !openssl_present() {
        return Ok(());
    }
    let dir = TempDir::new("mcq-process-tls")?;
    let certs = dir.path().join("certs");
    std::fs::create_dir_all(&certs)?;
    authority(&certs, "ca")?;
    server_certificate(&certs, "ca")?;
    // Another authority, which never signed the server's certificate.
    authority(&certs, "stranger")?;
    let cluster = match tokio::task::spawn_blocking({
        let certs = certs.clone();
        move || PgCluster::private_with_tls(&certs.join("server.crt"), &certs.join("server.key"))
    })
    .await?
    {
        Ok(cluster) => cluster,
        Err(err) if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") => {
            panic!("PostgreSQL is required under CI: {err:#}")
        }
        Err(err) => {
            eprintln!("*** SKIPPING the TLS test: {err:#}");
            return Ok(());
        }
    };
    let plain = cluster.create_database("mcq_tls")?;
    let with_root = |root: &str| {
        format!(
            "{plain}?sslmode=verify-full&sslrootcert={}",
            certs.join(format!("{root}.crt")).display()
        )
    };
    let url = with_root("ca");

    let store = batch::store(&url, 4).await?;
    let (server, base) = McqProcess::server(
        "server",
        &url,
        &["--embedded-workers", "0", "--no-migrate"],
        dir.path(),
    )?;
    let worker = McqProcess::worker("worker", &url, &["--concurrency", "2"], dir.path())?;
    let specs: Vec<_> = (0..6).map(|i| batch::spec(2, 70_000 + i)).collect();
    let batch_id = batch::submit(&store, specs.clone()).await?;
    let client = reqwest::Client::new();
    let read = format!("{base}/v1/batches/{batch_id}?wait=20s");
    let mut done = false;
    let start = std::time::Instant::now();
    while !done {
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(120),
            "the batch did not finish over TLS\n{}\n{}",
            server.logs(),
            worker.logs()
        );
        let answer = client.get(&read).send().await?;
        anyhow::ensure!(
            answer.status().is_success(),
            "{answer:?}\n{}",
            server.logs()
        );
        let view: serde_json::Value = answer.json().await?;
        done = view["done"] == true;
    }
    let processes = [&worker, &server];
    batch::finish_and_check(&store, batch_id, &processes, &specs).await?;

    // Every session of the test database but this check's own: the
    // server's, the worker's and the test store's.
    let sessions = |ssl: bool| {
        format!(
            "SELECT count(*) FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
             WHERE a.datname = 'mcq_tls' AND a.pid <> pg_backend_pid() AND s.ssl = {ssl}"
        )
    };
    let encrypted = mcq_testdb::query_i64(&url, &sessions(true)).await?;
    let clear = mcq_testdb::query_i64(&url, &sessions(false)).await?;
    assert_eq!(clear, 0, "a session without TLS");
    assert!(
        encrypted >= 3,
        "the server's, the worker's and the store's sessions use TLS: {encrypted}"
    );

    let mut refused = McqProcess::worker("refused", &with_root("stranger"), &[], dir.path())?;
    let status = refused.wait_timeout(Duration::from_secs(60))?;
    assert_eq!(status.code(), Some(1), "{}", refused.logs());
    assert!(
        refused.log_text().contains("certificate"),
        "the worker says the certificate was refused\n{}",
        refused.logs()
    );
    drop(cluster);
    Ok(())
}

/// Whether `openssl` runs; says so loudly when not (a failure under CI).
fn openssl_present() -> bool {
    let found = Command::new("openssl")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
            panic!("openssl is required under CI (Debian: apt-get install openssl)");
        }
        eprintln!("\n*** SKIPPING the TLS test: no openssl ***\n");
    }
    found
}

/// A self-signed certificate authority `<name>.crt` with its key.
fn authority(dir: &Path, name: &str) -> anyhow::Result<()> {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN=mcq test {name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
        ],
    )
}

/// `server.crt` and `server.key` for 127.0.0.1, signed by authority `ca`.
/// A verifying client needs the address among the subject's alternative
/// names and a certificate that is not itself an authority.
fn server_certificate(dir: &Path, ca: &str) -> anyhow::Result<()> {
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
    )?;
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n\
         basicConstraints = CA:FALSE\n\
         keyUsage = digitalSignature, keyEncipherment\n\
         extendedKeyUsage = serverAuth\n",
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &format!("{ca}.crt"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.crt",
        ],
    )
}

fn openssl(dir: &Path, args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .context("running openssl")?;
    if !out.status.success() {
        bail!(
            "openssl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
