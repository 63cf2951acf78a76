//! Chunk partials: the sums a range of chunks contributes to an estimate.
//! Computed anywhere, merged in any order, always to the same bits.

use serde::{Deserialize, Serialize};

/// Sums over the paths of one or more chunks. `merge` is exact (associative
/// and commutative to the bit), so a job split across workers equals the
/// same job computed in one process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    // The kernel owner fills these in (counts and exact sums).
}

impl Partial {
    /// Adds `other`'s sums to `self`.
    pub fn merge(&mut self, other: &Partial) {
        let _ = other;
        todo!("kernel: exact merge")
    }
}
