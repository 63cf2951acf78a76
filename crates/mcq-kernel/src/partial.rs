//! Chunk partials: the sums a range of chunks contributes to an estimate.
//! Computed anywhere, merged in any order, always to the same bits.

use serde::{Deserialize, Serialize};

use crate::exact_sum::ExactSum;
use crate::simulate::ChunkSums;

/// Sums over the paths of one or more chunks. `merge` is exact (associative
/// and commutative to the bit), so a job split across workers equals the
/// same job computed in one process.
///
/// Each chunk's floating-point sums (taken in the chunk's fixed path order)
/// are added into exact accumulators; what is merged is integers. Sums are
/// in path-sum units (undiscounted, spot scaled to 1); only
/// [`ValidSpec::finish`](crate::ValidSpec::finish) knows how to read them.
/// The delta sums are zero unless the spec asks for delta, and zero sums
/// are left out of the JSON, so a partial without delta reads and writes
/// as it does in a kernel that knows no delta.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Partial {
    /// Paths simulated.
    pub paths: u64,
    /// Independent samples: paths, or antithetic pairs.
    pub samples: u64,
    /// Chunks merged into this partial.
    pub chunks: u64,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    y: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    yy: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    a: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    aa: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    ya: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    g: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    gg: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    yg: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pp: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    #[serde(default, skip_serializing_if = "ExactSum::is_zero")]
    d: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    #[serde(default, skip_serializing_if = "ExactSum::is_zero")]
    dd: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    #[serde(default, skip_serializing_if = "ExactSum::is_zero")]
    da: ExactSum,
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    #[serde(default, skip_serializing_if = "ExactSum::is_zero")]
    dg: ExactSum,
}

/// The sums of a partial read back as doubles, for the estimators.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Moments {
    pub(crate) samples: f64,
    pub(crate) sums: ChunkSums,
}

impl Partial {
    /// Adds `other`'s sums to `self`.
    pub fn merge(&mut self, other: &Partial) {
        self.paths += other.paths;
        self.samples += other.samples;
        self.chunks += other.chunks;
        for (mine, theirs) in self.sums_mut().into_iter().zip(other.sums()) {
            mine.add(theirs);
        }
    }

    /// The partial of one chunk.
    pub(crate) fn from_chunk(paths: u64, samples: u64, sums: &ChunkSums) -> Self {
        let mut partial = Partial {
            paths,
            samples,
            chunks: 1,
            ..Partial::default()
        };
        let values = [
            sums.y, sums.yy, sums.a, sums.aa, sums.ya, sums.g, sums.gg, sums.yg, sums.pp, sums.d,
            sums.dd, sums.da, sums.dg,
        ];
        for (acc, value) in partial.sums_mut().into_iter().zip(values) {
            acc.add_f64(value);
        }
        partial
    }

    pub(crate) fn moments(&self) -> Moments {
        let [y, yy, a, aa, ya, g, gg, yg, pp, d, dd, da, dg] = self.sums().map(ExactSum::to_f64);
        Moments {
            samples: self.samples as f64,
            sums: ChunkSums {
                y,
                yy,
                a,
                aa,
                ya,
                g,
                gg,
                yg,
                pp,
                d,
                dd,
                da,
                dg,
            },
        }
    }

    fn sums(&self) -> [&ExactSum; 13] {
        [
            &self.y, &self.yy, &self.a, &self.aa, &self.ya, &self.g, &self.gg, &self.yg, &self.pp,
            &self.d, &self.dd, &self.da, &self.dg,
        ]
    }

    fn sums_mut(&mut self) -> [&mut ExactSum; 13] {
        [
            &mut self.y,
            &mut self.yy,
            &mut self.a,
            &mut self.aa,
            &mut self.ya,
            &mut self.g,
            &mut self.gg,
            &mut self.yg,
            &mut self.pp,
            &mut self.d,
            &mut self.dd,
            &mut self.da,
            &mut self.dg,
        ]
    }
}
