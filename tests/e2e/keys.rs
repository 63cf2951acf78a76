//! API keys as an operator meets them: `mcq serve` refusing to start open
//! on a public address, `mcq keys create/list/revoke`, the CLI's
//! `--api-key`, and the access log and cancel record in the server's log.

use std::io::{BufRead as _, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::server::{Process, TempDir, mcq};

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = mcq().args(args).output().expect("run mcq");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `mcq serve` on `listen` with an `info` log in `log`; the base URL once
/// it listens.
fn serve(db: &str, listen: &str, log: &std::path::Path, args: &[&str]) -> (Process, String) {
    let mut child = mcq()
        .env("RUST_LOG", "info")
        .args([
            "serve",
            "--listen",
            listen,
            "--database-url",
            db,
            "--embedded-workers",
            "1",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn mcq serve");
    let stdout = child.stdout.take().expect("stdout");
    let process = Process(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(url) = line.split("listening on ").nth(1) {
                let _ = tx.send(url.trim().replace("0.0.0.0", "127.0.0.1"));
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| {
            panic!(
                "mcq serve did not listen:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        });
    (process, url)
}

#[test]
fn a_public_address_needs_a_key_or_insecure_open() {
    let dir = TempDir::new();
    let db = dir.sqlite_url();
    let (code, _, err) = run(&["serve", "--listen", "0.0.0.0:0", "--database-url", &db]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("mcq keys create") && err.contains("--insecure-open"),
        "{err}"
    );
    // Explicitly open, it serves without a key.
    let log = dir.0.join("open.log");
    let (_server, url) = serve(&db, "0.0.0.0:0", &log, &["--insecure-open"]);
    let (code, out, err) = run(&["submit", "--server", &url, "--runs", "1000", "--quiet"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
}

#[test]
fn keys_made_listed_used_logged_and_revoked() {
    let dir = TempDir::new();
    let db = dir.sqlite_url();
    let (code, key, err) = run(&[
        "keys",
        "create",
        "--tenant",
        "alice",
        "--label",
        "notebook",
        "--quiet",
        "--database-url",
        &db,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let key = key.trim().to_owned();
    assert!(key.starts_with("mcq_"), "{key:?}");
    let secret = key.rsplit('_').next().unwrap().to_owned();
    let id = key.split('_').nth(1).unwrap().to_owned();
    let (code, listed, err) = run(&["keys", "list", "--database-url", &db]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        listed.contains(&id) && listed.contains("alice") && listed.contains("notebook"),
        "{listed}"
    );
    assert!(
        !listed.contains(&secret),
        "the list shows no secret:\n{listed}"
    );
    let (code, _, err) = run(&[
        "keys",
        "create",
        "--tenant",
        "bob",
        "--role",
        "read",
        "--database-url",
        &db,
    ]);
    assert_eq!(code, Some(0), "{err}");

    // With keys, a public address is allowed: every request needs a key.
    let log = dir.0.join("serve.log");
    let (_server, url) = serve(&db, "0.0.0.0:0", &log, &[]);
    let (code, out, err) = run(&["submit", "--server", &url, "--runs", "1000", "--quiet"]);
    assert_eq!(code, Some(2), "no key: {out}\n{err}");
    assert!(err.contains("API key"), "{err}");
    let (code, job, err) = run(&[
        "submit",
        "--server",
        &url,
        "--api-key",
        &key,
        "--runs",
        "1000",
        "--quiet",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let job = job.trim().to_owned();
    let (code, out, err) = run(&[
        "status",
        "--server",
        &url,
        "--api-key",
        &key,
        &job,
        "--wait",
    ]);
    assert_eq!(code, Some(0), "{out}\n{err}");

    // Who cancelled what is on record; the access log names route, tenant and key id.
    let client = mcq_client::Client::new(&url)
        .unwrap()
        .with_api_key(Some(key.clone()));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let batch = runtime
        .block_on(client.submit_batch(
            &mcq_client::BatchRequest {
                jobs: vec![mcq_kernel::Spec::default()],
                ..mcq_client::BatchRequest::default()
            },
            None,
        ))
        .expect("submit");
    runtime
        .block_on(client.cancel_batch(batch.id))
        .expect("cancel");
    let deadline = Instant::now() + Duration::from_secs(30);
    let text = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("mcq::audit") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let audit = text
        .lines()
        .find(|l| l.contains("mcq::audit"))
        .unwrap_or_else(|| panic!("no cancel record:\n{text}"));
    for part in [
        "tenant=alice",
        &format!("key={id}"),
        &format!("id={}", batch.id),
        "what=\"batch\"",
    ] {
        assert!(audit.contains(part), "{part} missing in {audit}");
    }
    let access: Vec<&str> = text.lines().filter(|l| l.contains("mcq::access")).collect();
    assert!(
        access.iter().any(|l| l.contains("route=/v1/jobs/{id}")
            && l.contains("status=200")
            && l.contains(&format!("key={id}"))
            && l.contains("tenant=alice")
            && l.contains("request_id=")),
        "{access:#?}"
    );
    assert!(
        access
            .iter()
            .any(|l| l.contains("status=401") && l.contains("key=-")),
        "{access:#?}"
    );
    assert!(
        !text.contains(&secret),
        "the secret reached the log:\n{text}"
    );
    assert!(
        !text.contains(&job),
        "the access log names routes, not ids:\n{text}"
    );

    // A revoked key stops working within the cache's time.
    let (code, out, err) = run(&["keys", "revoke", &id, "--database-url", &db]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _, err) = run(&["status", "--server", &url, "--api-key", &key, &job]);
        if code == Some(2) {
            assert!(err.contains("invalid or revoked"), "{err}");
            break;
        }
        assert!(Instant::now() < deadline, "the revoked key still works");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, _, _) = run(&["keys", "revoke", "0000000000000000", "--database-url", &db]);
    assert_eq!(code, Some(2));
}
