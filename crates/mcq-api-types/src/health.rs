//! The answer of the probes.

use serde::{Deserialize, Serialize};

/// Answer of `GET /healthz` and `GET /readyz`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok` (process up) or `ready` (database reachable).
    pub status: String,
}
