//! `mcq serve` under a low soft open-file limit: it raises the limit at
//! start, so a crowd of silent connections cannot starve `/healthz`.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use super::server::Server;

#[test]
fn silent_connections_past_a_low_soft_limit_leave_healthz_answering() {
    // Idle connections are never timed out here: only the open-file
    // limit decides whether the probe gets through.
    let server = Server::start_with_open_files(128, &["--header-read-timeout-secs", "3600"]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    // More than 128 descriptors' worth: without raising the limit the
    // server's accepts fail and the probe below waits in the backlog.
    let silent: Vec<TcpStream> = (0..200)
        .map(|_| TcpStream::connect(&addr).expect("connect"))
        .collect();
    let mut probe = TcpStream::connect(&addr).expect("connect the probe");
    probe
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    probe
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: mcq\r\nConnection: close\r\n\r\n")
        .expect("send the probe");
    let mut answer = String::new();
    probe
        .read_to_string(&mut answer)
        .expect("/healthz answers while 200 connections sit silent");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""status":"ok""#), "{answer}");
    drop(silent);
}
