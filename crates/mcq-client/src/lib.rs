//! A typed HTTP client for the mcq API
