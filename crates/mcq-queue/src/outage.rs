//! Telling "the database is not there right now" from every other database
//! error, so that callers above the queue (the API's 503, a worker's retry)
//! decide on [`StoreError::is_unavailable`](crate::StoreError::is_unavailable)
//! without naming the driver.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// True for errors of reaching the database — no connection, a broken
/// one, a closed or exhausted pool, a server shutting down or out of
/// connections — or of a session bound (`postgres/session.rs`) cutting a
/// wait short, and false for anything the database answered about the
/// query itself, and for the connection errors of [`never_heals`]. Each
/// of these may succeed when tried again later.
pub(crate) fn is_outage(err: &sqlx::Error) -> bool {
    if never_heals(err) {
        return false;
    }
    matches!(
        err,
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
    ) || closed_during_tls_request(err)
        || err
            .as_database_error()
            .and_then(|db| db.code())
            // PostgreSQL: 57P01-03 admin shutdown / crash / cannot connect now;
            // 08xxx connection errors; 53300 too many connections; 55P03 lock
            // timeout, 57014 statement timeout, 25P03 idle-in-transaction timeout.
            .is_some_and(|code| {
                code.starts_with("57P0")
                    || code.starts_with("08")
                    || matches!(&*code, "53300" | "55P03" | "57014" | "25P03")
            })
}

/// True for connection errors that come of how the client or the server
/// is configured, which waiting never changes:
///
/// - TLS that cannot be set up: a certificate file that does not load, a
///   server without TLS where the URL requires it (`Tls`), or a server
///   certificate the client refuses (an `InvalidData` I/O error from the
///   handshake; a connection cut by a restart is another kind).
/// - A startup parameter the server refuses (SQLSTATE 08P01, "unsupported
///   startup parameter"): PgBouncer does so for every parameter it does
///   not know unless `ignore_startup_parameters` lists it. PgBouncer uses
///   08P01 for its passing conditions too (the server it cannot reach,
///   `max_client_conn`), so only this message counts.
pub(crate) fn never_heals(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Tls(_) => true,
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::InvalidData,
        _ => refused_startup_parameter(err).is_some(),
    }
}

/// The server's message when it refused a startup parameter (see
/// [`never_heals`]).
pub(crate) fn refused_startup_parameter(err: &sqlx::Error) -> Option<&str> {
    let db = err.as_database_error()?;
    (db.code().as_deref() == Some("08P01")
        && db.message().contains("unsupported startup parameter"))
    .then(|| db.message())
}

/// True when the connection a statement ran on broke under it — the
/// server restarted or was shut down, the socket was cut — so that the
/// same statement on a new connection may well succeed. A pool that timed
/// out waiting is not among them: it has already waited.
pub(crate) fn is_dropped(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Io(_))
        || closed_during_tls_request(err)
        || err
            .as_database_error()
            .and_then(|db| db.code())
            // 57P01-03 admin shutdown / crash shutdown / cannot connect now;
            // 08xxx connection exceptions.
            .is_some_and(|code| code.starts_with("57P0") || code.starts_with("08"))
}

/// A new connection that the server closed before answering its request
/// for TLS, as a server does while it shuts down or restarts. The driver
/// (sqlx 0.9) reads no byte there and reports the empty answer as the
/// byte 0 rather than as an end of stream.
fn closed_during_tls_request(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Protocol(message)
        if message.starts_with("unexpected response from SSLRequest: 0x00"))
}

/// Errors of a broken connection (`is_dropped`) seen by any store of this
/// process so far. A store keeps the connection it gave back last for its
/// next call (`postgres/checkout.rs`) only while this count has not moved
/// since the connection was handed out, and checks a kept connection
/// before its next call once the count moved: a server that restarted
/// broke every connection to it, kept ones too.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// When this process last saw a connection break (`dropped`).
static LAST_DROPPED: Mutex<Option<Instant>> = Mutex::new(None);

/// Counts `err` if its connection broke under it.
pub(crate) fn note(err: &sqlx::Error) {
    if is_dropped(err) {
        *LAST_DROPPED.lock().expect("the last broken connection") = Some(Instant::now());
        DROPPED.fetch_add(1, Ordering::AcqRel);
    }
}

/// Whether this process saw a connection break within the last `span`:
/// a connection idle in a pool for that long may have broken with it.
pub(crate) fn dropped_within(span: Duration) -> bool {
    LAST_DROPPED
        .lock()
        .expect("the last broken connection")
        .is_some_and(|at| at.elapsed() <= span)
}

/// How many errors of a broken connection this process has seen.
pub(crate) fn dropped() -> u64 {
    DROPPED.load(Ordering::Acquire)
}

/// Runs the read `op` again, a few times, while its connection breaks
/// under it: a server restart of a fraction of a second then costs the
/// caller that fraction, not an error. Each new attempt takes a connection
/// from the pool, which waits (up to its acquire timeout) while the server
/// is coming back; the short pauses between attempts let the other pooled
/// connections of the old server break before one is handed out again.
/// Only for statements that change nothing: a write whose answer was lost
/// may have committed.
pub(crate) async fn read_again_if_dropped<T, Fut>(
    op: impl Fn() -> Fut,
) -> Result<T, crate::StoreError>
where
    Fut: std::future::Future<Output = Result<T, crate::StoreError>>,
{
    let mut pause = std::time::Duration::from_millis(50);
    for _ in 0..REREADS {
        match op().await {
            Err(crate::StoreError::Database(err)) if is_dropped(&err) => {
                tracing::debug!(error = %err, "connection dropped under a read; reading again");
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            other => return other,
        }
    }
    op().await
}

/// Attempts of a read beyond the first (pauses of 50 to 400 ms between).
const REREADS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;

    /// A broken connection is remembered for as long as a connection
    /// that went idle before it may have broken with it; an error the
    /// database answered is no break.
    #[test]
    fn a_break_is_seen_within_the_span_since_it() {
        let answered = sqlx::Error::RowNotFound;
        note(&answered);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let before = dropped();
        note(&sqlx::Error::Io(reset));
        assert!(dropped() > before);
        assert!(dropped_within(Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(20));
        // Other tests of the process may note breaks of their own, but
        // none is noted in the future.
        assert!(!dropped_within(Duration::ZERO));
    }

    #[test]
    fn failures_to_reach_the_database_are_outages() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        for err in [
            sqlx::Error::Io(refused),
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
        ] {
            assert!(is_outage(&err), "{err:?}");
            assert!(StoreError::Database(err).is_unavailable());
        }
    }

    /// A server restarting closes a new connection before it answers the
    /// request for TLS; the driver words that as an answer of 0x00 (seen
    /// in `reads_ride_out_a_short_restart`). Another answer is a server
    /// that does not speak PostgreSQL's protocol, which waiting does not
    /// change.
    #[test]
    fn a_connection_closed_before_its_tls_answer_is_a_broken_one() {
        let closed = sqlx::Error::Protocol("unexpected response from SSLRequest: 0x00".to_owned());
        assert!(is_dropped(&closed) && is_outage(&closed));
        let other = sqlx::Error::Protocol("unexpected response from SSLRequest: 0x48".to_owned());
        assert!(!is_dropped(&other) && !is_outage(&other));
    }

    #[test]
    fn configuration_the_connection_trips_on_is_never_an_outage() {
        let refused = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "invalid peer certificate: UnknownIssuer",
        );
        for err in [
            sqlx::Error::Io(refused),
            sqlx::Error::Tls("server does not support TLS".into()),
        ] {
            assert!(never_heals(&err), "{err:?}");
            assert!(!is_outage(&err), "{err:?}");
        }
        let cut = std::io::Error::from(std::io::ErrorKind::UnexpectedEof);
        assert!(is_outage(&sqlx::Error::Io(cut)));
    }

    #[test]
    fn answers_about_the_query_are_not_outages() {
        for err in [
            sqlx::Error::RowNotFound,
            sqlx::Error::Protocol("unexpected message".into()),
            sqlx::Error::ColumnNotFound("spec".into()),
        ] {
            assert!(!is_outage(&err), "{err:?}");
            assert!(!StoreError::Database(err).is_unavailable());
        }
        for err in [
            StoreError::IdempotencyConflict,
            StoreError::Corrupt("unknown state".into()),
            StoreError::UnsupportedUrl("mysql://".into()),
        ] {
            assert!(!err.is_unavailable(), "{err:?}");
        }
    }

    #[tokio::test]
    async fn a_refused_query_is_not_an_outage_but_a_closed_pool_is() {
        let pool = sqlx::SqlitePool::connect("sqlite::memory:")
            .await
            .expect("open");
        let refused = sqlx::query("SELECT * FROM no_such_table")
            .execute(&pool)
            .await
            .expect_err("no such table");
        assert!(!is_outage(&refused), "{refused:?}");
        pool.close().await;
        let closed = sqlx::query("SELECT 1")
            .execute(&pool)
            .await
            .expect_err("closed pool");
        assert!(is_outage(&closed), "{closed:?}");
    }
}
