//! The server over real sockets: idle connections are closed, the number
//! of connections is capped, and a client that writes its whole body
//! before reading still receives the refusal, whatever refused it.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use mcq_api::{ApiConfig, AppState};
use mcq_queue::{NewKey, QueueConfig, Role, Store};

use crate::harness::test_config;

/// Generous: a closed connection is noticed in milliseconds; this only
/// bounds how long a broken server makes the test wait.
const DEADLINE: Duration = Duration::from_secs(30);

/// `mcq_api::serve` on a free port over a fresh SQLite file; stops when
/// dropped.
struct Live {
    addr: SocketAddr,
    store: Store,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    _dir: tempfile::TempDir,
}

impl Live {
    async fn start(config: ApiConfig) -> Live {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = Store::connect(&mcq_testdb::sqlite_url(dir.path()), QueueConfig::default())
            .await
            .expect("connect");
        store.migrate().await.expect("migrate");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(mcq_api::serve(
            listener,
            AppState {
                store: store.clone(),
                config,
            },
            async {
                let _ = stopped.await;
            },
        ));
        Live {
            addr,
            store,
            stop: Some(stop),
            _dir: dir,
        }
    }

    /// A blocking socket to the server with the test's read deadline.
    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(self.addr).expect("connect");
        stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
        stream
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Reads until the server closes the connection; fails on the deadline.
fn read_until_closed(stream: &mut TcpStream) -> String {
    let mut text = Vec::new();
    match stream.read_to_end(&mut text) {
        Ok(_) => {}
        // A reset is the server closing too.
        Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(err) => panic!("the server did not close the connection: {err}"),
    }
    String::from_utf8_lossy(&text).into_owned()
}

fn short_timeouts() -> ApiConfig {
    ApiConfig {
        header_read_timeout: Duration::from_millis(300),
        ..test_config()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_nothing_is_closed() {
    let live = Live::start(short_timeouts()).await;
    let mut silent = live.connect();
    let answer = tokio::task::spawn_blocking(move || read_until_closed(&mut silent))
        .await
        .unwrap();
    assert_eq!(
        answer, "",
        "a silent connection gets no answer, only a close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_sent_head_and_an_idle_kept_alive_connection_are_closed() {
    let live = Live::start(short_timeouts()).await;
    let mut partial = live.connect();
    let mut idle = live.connect();
    let (partial_answer, idle_answer) = tokio::task::spawn_blocking(move || {
        partial
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        (
            read_until_closed(&mut partial),
            read_until_closed(&mut idle),
        )
    })
    .await
    .unwrap();
    assert_eq!(partial_answer, "");
    // The idle one got its answer, then was closed while kept alive.
    assert!(idle_answer.starts_with("HTTP/1.1 200"), "{idle_answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_cap_wait_until_one_closes() {
    let live = Live::start(ApiConfig {
        max_connections: 2,
        header_read_timeout: Duration::from_secs(600),
        ..test_config()
    })
    .await;
    // Each holds a slot: the server has read part of a head from both.
    let mut held: Vec<TcpStream> = (0..2).map(|_| live.connect()).collect();
    for stream in &mut held {
        stream.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
    }
    let mut third = live.connect();
    third
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    // Not served while the cap is reached (a correct server never answers
    // here, so the short wait cannot fail it).
    third
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut byte = [0u8; 1];
    let early = third.read(&mut byte);
    assert!(
        early.is_err(),
        "the third connection was served past the cap: {early:?}"
    );
    drop(held.pop());
    third.set_read_timeout(Some(DEADLINE)).unwrap();
    let answer = tokio::task::spawn_blocking(move || read_until_closed(&mut third))
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

/// Writes `head` and then `body_len` bytes, all before reading, as
/// Python's `http.client` does; returns what the server answered.
fn write_everything_then_read(addr: SocketAddr, head: String, body_len: usize) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
    stream.write_all(head.as_bytes()).expect("head");
    let chunk = vec![b' '; 64 * 1024];
    let mut left = body_len;
    while left > 0 {
        let n = left.min(chunk.len());
        stream
            .write_all(&chunk[..n])
            .expect("the server reads the whole body before it answers");
        left -= n;
    }
    read_until_closed(&mut stream)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_writes_an_oversized_body_first_receives_the_413() {
    // Short idle timeout: the answers that keep the connection alive end
    // the read once the server closes it.
    let live = Live::start(short_timeouts()).await;
    // Far past the socket buffers: a server that stops reading at the
    // limit resets the connection while the client is still writing.
    let body_len = 32 * 1024 * 1024;
    let head = |path: &str, content_type: &str| {
        format!(
            "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: {body_len}\r\n\r\n"
        )
    };
    for (path, content_type, status, kind) in [
        (
            "/v1/batches",
            "application/json",
            "413",
            "/problems/body-too-large",
        ),
        (
            "/v1/jobs",
            "text/plain",
            "415",
            "/problems/unsupported-media-type",
        ),
        (
            "/v1/nowhere",
            "application/json",
            "404",
            "/problems/no-route",
        ),
        (
            "/v1/batches/00000000-0000-0000-0000-000000000000/cancel",
            "text/plain",
            "415",
            "/problems/unsupported-media-type",
        ),
    ] {
        let (addr, request) = (live.addr, head(path, content_type));
        let answer = tokio::task::spawn_blocking(move || {
            write_everything_then_read(addr, request, body_len)
        })
        .await
        .unwrap();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{path}: {answer}"
        );
        assert!(answer.contains(kind), "{path}: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_writes_a_large_body_first_receives_every_refusal() {
    let live = Live::start(ApiConfig {
        allowed_hosts: vec!["x".into()],
        ..short_timeouts()
    })
    .await;
    let minted = mcq_keys::mint().expect("random bytes");
    live.store
        .create_key(NewKey {
            id: minted.id.clone(),
            tenant: "lab".into(),
            role: Role::Read,
            label: None,
            secret_hash: minted.secret_hash.clone(),
        })
        .await
        .expect("store the key");
    // As in the 413 case: far past the socket buffers, within what a
    // refusal drains.
    let body_len = 32 * 1024 * 1024;
    let read_key = format!("Authorization: Bearer {}\r\n", minted.key);
    for (host, extra, status, kind) in [
        ("x", String::new(), "401", "/problems/unauthorized"),
        (
            "x",
            "Authorization: Bearer not-a-key\r\n".to_owned(),
            "401",
            "/problems/unauthorized",
        ),
        ("x", read_key.clone(), "403", "/problems/forbidden"),
        (
            "x",
            format!("{read_key}Origin: http://evil.example\r\n"),
            "403",
            "/problems/cross-origin",
        ),
        ("elsewhere", read_key, "421", "/problems/host-not-allowed"),
    ] {
        let request = format!(
            "POST /v1/batches HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Type: application/json\r\nContent-Length: {body_len}\r\n\r\n"
        );
        let addr = live.addr;
        let answer = tokio::task::spawn_blocking(move || {
            write_everything_then_read(addr, request, body_len)
        })
        .await
        .unwrap();
        assert!(
            answer.starts_with(&format!("HTTP/1.1 {status}")),
            "{kind}: {answer}"
        );
        assert!(answer.contains(kind), "{kind}: {answer}");
    }
}
