//! How fast the fleet has been computing, on SQLite: the kernel time and
//! specs of recently finished jobs, for the predictions of dry runs.

use super::{SqliteQueue, duration_us, now_us};
use crate::store::StoreError;
use crate::types::FinishedCompute;

impl SqliteQueue {
    /// Succeeded jobs among the `scan` newest (by id, that is by
    /// submission) that finished within `within`.
    pub(crate) async fn recent_compute(
        &self,
        scan: u32,
        within: std::time::Duration,
    ) -> Result<Vec<FinishedCompute>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT spec, compute_ms FROM (SELECT spec, compute_ms, state, finished_at FROM jobs
                                           ORDER BY id DESC LIMIT ?1)
             WHERE state = 'succeeded' AND finished_at > ?2 AND compute_ms > 0",
        )
        .bind(i64::from(scan))
        .bind(now_us() - duration_us(within))
        .fetch_all(&self.reader)
        .await?)
    }
}
