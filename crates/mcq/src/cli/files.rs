//! The open-file limit of the process.
//!
//! Each client connection holds a file descriptor. Many systems start
//! processes with a soft limit far below the hard one (1,024, or 128 on
//! some), which a few hundred idle sockets exhaust; the soft limit may be
//! raised to the hard one without privileges, so `mcq serve` does that at
//! start.

/// Raises the soft `RLIMIT_NOFILE` to the hard limit; returns the soft
/// limit in force afterwards (`None` where there is no such limit, or it
/// cannot be read).
#[cfg(unix)]
pub(crate) fn raise_open_file_limit() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    // An unlimited hard limit is refused by Linux for RLIMIT_NOFILE (it is
    // capped by fs.nr_open): keep the soft limit then.
    if let (Some(soft), Some(hard)) = (limit.current, limit.maximum)
        && soft < hard
    {
        limit.current = Some(hard);
        match setrlimit(Resource::Nofile, limit) {
            Ok(()) => tracing::debug!(from = soft, to = hard, "raised the open-file limit"),
            Err(err) => {
                tracing::warn!(error = %err, soft, hard, "could not raise the open-file limit")
            }
        }
    }
    getrlimit(Resource::Nofile).current
}

/// Elsewhere there is nothing to raise.
#[cfg(not(unix))]
pub(crate) fn raise_open_file_limit() -> Option<u64> {
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_soft_limit_ends_at_the_hard_one() {
        use rustix::process::{Resource, getrlimit};
        let after = raise_open_file_limit();
        assert_eq!(after, getrlimit(Resource::Nofile).current);
        let hard = getrlimit(Resource::Nofile).maximum;
        if hard.is_some() {
            assert_eq!(after, hard);
        }
    }
}
