//! A typed async client for the mcq HTTP API.
//!
//! The client speaks in the API's own wire types (`mcq_api_types`), which
//! it re-exports so that one dependency is enough to call the service. It
//! builds on an HTTP client alone: no database driver, no server code.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcq_client::ClientError> {
//! use mcq_client::{BatchRequest, Client};
//! let client = Client::new("http://127.0.0.1:8080")?;
//! let batch = BatchRequest { jobs: vec![mcq_kernel::Spec::default(); 100], ..BatchRequest::default() };
//! let accepted = client.submit_batch(&batch, None).await?;
//! let done = client
//!     .wait_for_batch(accepted.id, std::time::Duration::from_secs(1), |_| {})
//!     .await?;
//! println!("{:?}", done.stats);
//! # Ok(()) }
//! ```

mod client;

pub use client::{Client, ClientError};
pub use mcq_api_types::*;
pub use mcq_cost::CostModel;
