//! The accept loop: HTTP/1.1 connections served by hyper with a header-read
//! timeout and a cap on open connections, stopped gracefully.
//!
//! A connection costs a file descriptor and a buffer whether or not it ever
//! sends a request, so the server bounds both how many it holds and how
//! long an idle one may stay: a client that opens sockets and sends nothing
//! cannot exhaust the descriptors that `/healthz`, the database pool and
//! real clients need.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

/// Pause after an accept error that is not about one connection (such as
/// running out of file descriptors), so the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(250);

/// Most header fields hyper parses; past this it answers 431 without a
/// body. Above [`head::MAX_HEADERS`](crate::head::MAX_HEADERS), so that the
/// usual excess gets a problem document from the API instead.
const HYPER_MAX_HEADERS: usize = 256;

/// Limits on connections, as opposed to requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    /// Most connections open at once; further ones wait in the listen
    /// backlog until one closes.
    pub(crate) max_connections: usize,
    /// A connection that has not sent a complete request head this long
    /// after opening, or after its previous answer, is closed.
    pub(crate) header_read_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown` completes; then stops
/// accepting, lets each connection finish the request it is serving, and
/// returns once all are closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    // hyper's header-read timer starts whenever it waits for a request
    // head, on a new connection and between keep-alive requests alike, so
    // it is the idle timeout too.
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_headers(HYPER_MAX_HEADERS)
        .keep_alive(true);
    // We never close the semaphore, so acquiring cannot fail.
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections = TaskTracker::new();
    let stop = CancellationToken::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            biased;
            () = &mut shutdown => break,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) if is_connection_error(&err) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    tokio::select! {
                        () = &mut shutdown => break,
                        () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => continue,
                    }
                }
            },
        };
        // Small answers leave at once rather than after Nagle's delay.
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(
            app.clone()
                .map_request(|request: Request<Incoming>| request.map(Body::new)),
        );
        let http = http.clone();
        let stop = stop.clone();
        connections.spawn(async move {
            let _permit = permit;
            let connection = http.serve_connection(TokioIo::new(stream), service);
            let mut connection = std::pin::pin!(connection);
            let outcome = tokio::select! {
                outcome = connection.as_mut() => outcome,
                () = stop.cancelled() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(err) = outcome {
                tracing::debug!(error = %err, "connection ended with an error");
            }
        });
    }
    drop(listener);
    stop.cancel();
    connections.close();
    connections.wait().await;
    Ok(())
}

/// Errors that concern only the connection being accepted.
fn is_connection_error(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}
