//! How fast the fleet has been computing: the kernel time and specs of
//! recently finished jobs, for the predictions of dry runs.

use super::PgQueue;
use crate::store::StoreError;
use crate::types::FinishedCompute;

/// Succeeded jobs among the `$1` newest by id (UUIDv7: by submission, a
/// walk of the primary key backwards) that finished within `$2` seconds.
const RECENT_COMPUTE: &str = "
SELECT spec::text AS spec, compute_ms
FROM (SELECT spec, compute_ms, state, finished_at FROM jobs ORDER BY id DESC LIMIT $1) recent
WHERE state = 'succeeded' AND finished_at > now() - make_interval(secs => $2) AND compute_ms > 0";

impl PgQueue {
    /// Succeeded jobs among the `scan` newest that finished within `within`.
    pub(crate) async fn recent_compute(
        &self,
        scan: u32,
        within: std::time::Duration,
    ) -> Result<Vec<FinishedCompute>, StoreError> {
        Ok(sqlx::query_as(RECENT_COMPUTE)
            .bind(i64::from(scan))
            .bind(within.as_secs_f64())
            .fetch_all(&mut *self.conn().await?)
            .await?)
    }
}
