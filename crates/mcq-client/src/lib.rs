//! A typed async client for the mcq HTTP API, and the API's wire types.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mcq_client::ClientError> {
//! use mcq_client::{BatchRequest, Client};
//! let client = Client::new("http://127.0.0.1:8080")?;
//! let batch = BatchRequest { label: None, jobs: vec![mcq_kernel::Spec::default(); 100] };
//! let accepted = client.submit_batch(&batch, None).await?;
//! let done = client
//!     .wait_for_batch(accepted.id, std::time::Duration::from_secs(1), |_| {})
//!     .await?;
//! println!("{:?}", done.stats);
//! # Ok(()) }
//! ```

mod client;
mod wire;

pub use client::{Client, ClientError, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, MAX_WAIT};
pub use mcq_queue::{BatchView, JobState, JobView, WorkerView};
pub use wire::*;
