//! End-to-end tests (process): being written.
