//! The HTTP API of mcq (axum): submit jobs and batches, poll results, cancel, list workers
