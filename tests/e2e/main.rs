//! End-to-end tests (e2e): being written.
