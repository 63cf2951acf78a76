//! The HTTP probes of `mcq worker --http-listen ADDR`, for orchestrators
//! (Kubernetes probes, the image's HEALTHCHECK); nothing else is served.
//!
//! - `GET /healthz`: 200 while the worker's event loop runs. The kernels
//!   compute on their own threads, so a busy worker still answers; one
//!   whose event loop is stuck does not, and is restarted.
//! - `GET /readyz`: 200 once this process is registered as a worker with
//!   a live heartbeat and the database holds the schema this binary needs;
//!   503 problem+json saying which is missing otherwise.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use anyhow::Context as _;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use mcq_api::{ApiError, PROBLEM_JSON};
use mcq_client::Health;
use mcq_queue::Store;

/// The probe server of one worker process; it runs on the worker's
/// runtime until that ends.
#[derive(Debug)]
pub(crate) struct Probes {
    store: Arc<OnceLock<Store>>,
}

/// What the handlers read: the store once connected, and who we are in
/// the workers table.
#[derive(Debug, Clone)]
struct Probe {
    store: Arc<OnceLock<Store>>,
    hostname: String,
    pid: u32,
}

impl Probes {
    /// Binds `addr` and starts answering; before [`Probes::attach`] the
    /// worker is alive but not ready (still connecting).
    pub(crate) async fn start(addr: SocketAddr) -> anyhow::Result<Probes> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("binding {addr} for the probes"))?;
        let addr = listener
            .local_addr()
            .context("reading the probes' address")?;
        let store = Arc::new(OnceLock::new());
        let probe = Probe {
            store: store.clone(),
            hostname: hostname(),
            pid: std::process::id(),
        };
        tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, router(probe)).await {
                tracing::error!(error = %err, "the probe server stopped");
            }
        });
        tracing::info!("probes listening on http://{addr}");
        Ok(Probes { store })
    }

    /// Hands the connected store to the readiness probe.
    pub(crate) fn attach(&self, store: Store) {
        let _ = self.store.set(store);
    }
}

fn router(probe: Probe) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(probe)
}

async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

async fn readyz(State(probe): State<Probe>) -> Response {
    // A database that neither answers nor refuses would otherwise hold the
    // probe for the pool's acquire timeout, past orchestrators' probe timeouts.
    let verdict = tokio::time::timeout(READY_WITHIN, not_ready(&probe))
        .await
        .unwrap_or_else(|_| Some("the database did not answer within a second".into()));
    match verdict {
        None => Json(Health {
            status: "ready".into(),
        })
        .into_response(),
        Some(reason) => {
            let mut problem = ApiError::Unavailable.problem();
            problem.detail = reason;
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::CONTENT_TYPE, PROBLEM_JSON)],
                Json(problem),
            )
                .into_response()
        }
    }
}

/// Longest a readiness check waits for the database.
const READY_WITHIN: std::time::Duration = std::time::Duration::from_millis(900);

/// Why this worker is not ready, or `None` when it is.
async fn not_ready(probe: &Probe) -> Option<String> {
    let Some(store) = probe.store.get() else {
        return Some("the worker is still connecting to the database".into());
    };
    match store.schema_status().await {
        Ok(status) if status.is_ready() => {}
        Ok(status) => return Some(status.to_string()),
        Err(err) => {
            tracing::warn!(error = %err, "readiness check failed");
            return Some("the database is unreachable".into());
        }
    }
    // A worker whose heartbeat is older than its lease is listed as lost.
    match store.workers().await {
        Ok(workers) => {
            let registered = workers.iter().any(|w| {
                w.pid == probe.pid
                    && w.hostname == probe.hostname
                    && w.state != mcq_api_types::WorkerState::Lost
            });
            (!registered).then(|| "the worker is not registered with a live heartbeat".into())
        }
        Err(err) => {
            tracing::warn!(error = %err, "readiness check failed");
            Some("the database is unreachable".into())
        }
    }
}

/// This machine's name as the worker registers it (mcq-worker reads the
/// same source), so the probe finds its own row.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "unknown".to_owned())
}
