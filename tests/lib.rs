//! Shared plumbing of the end-to-end tests: finding the `mcq` binary and
//! running it as a child process that is killed when dropped.
