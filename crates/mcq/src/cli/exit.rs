//! mcq's exit codes, the same for every command, and the one place that
//! turns a command's outcome or error into one:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | done: the work succeeded (or there was nothing to wait for) |
//! | 1 | the work failed or was cancelled, or another runtime error |
//! | 2 | bad usage or input: a flag, a file, an id, a spec the server rejected |
//! | 3 | the mcq server (or the database) could not be reached |

use std::io::ErrorKind;
use std::process::ExitCode;

use mcq_client::ClientError;

/// Exit code of success.
pub(crate) const OK: u8 = 0;
/// Exit code of work that failed or was cancelled, and of runtime errors.
pub(crate) const FAILED: u8 = 1;
/// Exit code of bad usage or input (clap's usage errors use it too).
pub(crate) const USAGE: u8 = 2;
/// Exit code of a server or database that could not be reached.
pub(crate) const UNREACHABLE: u8 = 3;

/// How a command's work ended, when it ran to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Everything asked for succeeded.
    Done,
    /// Some of the work failed or was cancelled (said on the output).
    Failed,
}

impl Outcome {
    /// `Done` when `ok`, `Failed` otherwise.
    pub(crate) fn from_ok(ok: bool) -> Outcome {
        if ok { Outcome::Done } else { Outcome::Failed }
    }
}

/// Input mcq cannot use: exits with [`USAGE`], like a clap usage error.
#[derive(Debug)]
pub(crate) struct BadInput(pub(crate) String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// A [`BadInput`] error saying `message`.
pub(crate) fn bad_input(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(BadInput(message.into()))
}

/// The exit code of a command's result.
pub(crate) fn code(result: &anyhow::Result<Outcome>) -> ExitCode {
    ExitCode::from(match result {
        Ok(Outcome::Done) => OK,
        Ok(Outcome::Failed) => FAILED,
        Err(err) => classify(err),
    })
}

/// The exit code of an error: the first cause that says more than "failed"
/// decides (a rejected spec is bad input, a refused connection is
/// unreachable), whatever context was added around it.
fn classify(err: &anyhow::Error) -> u8 {
    // Finds a `BadInput` added with `.context(..)` too, at any depth.
    if err.downcast_ref::<BadInput>().is_some() {
        return USAGE;
    }
    for cause in err.chain() {
        if cause.is::<BadInput>() {
            return USAGE;
        }
        if let Some(client) = cause.downcast_ref::<ClientError>() {
            match client {
                ClientError::InvalidUrl(_) => return USAGE,
                // The server understood and refused the request: what was
                // sent (a spec, an id) is at fault, not the server.
                ClientError::Problem { status, .. } if status.is_client_error() => return USAGE,
                ClientError::Http(http) if http.is_connect() || http.is_timeout() => {
                    return UNREACHABLE;
                }
                _ => {}
            }
        }
        if let Some(io) = cause.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                ErrorKind::ConnectionRefused
                    | ErrorKind::HostUnreachable
                    | ErrorKind::NetworkUnreachable
                    | ErrorKind::TimedOut
            )
        {
            return UNREACHABLE;
        }
    }
    FAILED
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_the_table() {
        let bad = bad_input("--calls must be at least 1").context("demo");
        assert_eq!(classify(&bad), USAGE);
        let file = anyhow::anyhow!("line 2: unknown field")
            .context(BadInput("--file".into()))
            .context("submitting");
        assert_eq!(classify(&file), USAGE);
        let refused = std::io::Error::new(ErrorKind::ConnectionRefused, "refused");
        let err = anyhow::Error::new(refused).context("connecting to postgres://db");
        assert_eq!(classify(&err), UNREACHABLE);
        let url = anyhow::Error::new(ClientError::InvalidUrl("ftp://x".into()));
        assert_eq!(classify(&url), USAGE);
        assert_eq!(classify(&anyhow::anyhow!("disk full")), FAILED);
    }
}
