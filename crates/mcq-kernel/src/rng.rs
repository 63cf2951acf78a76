//! Random streams addressed by position, so any chunk can be simulated
//! anywhere without replaying the chunks before it.
//!
//! The generator is wyrand: a Weyl sequence `s_k = key + k·γ` passed through
//! one 64×64→128-bit multiply-and-fold. Because the state is a Weyl
//! sequence, draw `k` is computed directly from `k` — the generator is
//! counter-based. Chunk `c` owns positions `c·2^32 .. c·2^32 + 2^32` of the
//! sequence started at `key = mix(seed)`, so chunks never share draws (a
//! chunk uses well under 2^32 of them) and draw `i` of chunk `c` is the same
//! number on every machine and thread.

use std::hash::{BuildHasher, Hasher};

const WY_GAMMA: u64 = 0xa076_1d64_78bd_642f;
const WY_XOR: u64 = 0xe703_7ed1_a0b4_28db;

/// Draws available to one chunk; a chunk must use fewer than this.
pub(crate) const DRAWS_PER_CHUNK: u64 = 1 << 32;

/// SplitMix64's finaliser, a bijective mixer: turns nearby seeds into
/// unrelated keys.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The random stream of one chunk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stream {
    base: u64,
}

impl Stream {
    /// The stream of chunk `chunk` under `seed`.
    pub(crate) fn new(seed: u64, chunk: u64) -> Self {
        let start = chunk.wrapping_mul(DRAWS_PER_CHUNK);
        Self {
            base: mix64(seed).wrapping_add(start.wrapping_mul(WY_GAMMA)),
        }
    }

    /// Draw number `index` of this stream: 64 uniformly distributed bits.
    /// (The loops walk Weyl states; tests address draws directly.)
    #[cfg(test)]
    pub(crate) fn at(self, index: u64) -> u64 {
        output(self.state(index))
    }

    /// The Weyl state of draw `index`; the next draw's state is this plus
    /// [`STATE_STEP`], which lets loops walk a stream without multiplying.
    #[inline(always)]
    pub(crate) fn state(self, index: u64) -> u64 {
        self.base
            .wrapping_add(index.wrapping_add(1).wrapping_mul(WY_GAMMA))
    }
}

/// Distance between the Weyl states of consecutive draws.
pub(crate) const STATE_STEP: u64 = WY_GAMMA;

/// The 64 random bits of a Weyl state.
#[inline(always)]
pub(crate) fn output(state: u64) -> u64 {
    let t = u128::from(state) * u128::from(state ^ WY_XOR);
    (t as u64) ^ ((t >> 64) as u64)
}

impl Stream {}

/// A seed for a request that gave none: std's randomly keyed hasher mixed
/// with the clock, so two requests in the same instant still differ. Its
/// top 53 bits, so that it is at most [`MAX_SEED`](crate::MAX_SEED).
pub(crate) fn fresh_seed() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.finish() >> 11
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_are_balanced_and_streams_differ() {
        let a = Stream::new(7, 0);
        let b = Stream::new(7, 1);
        let n = 1 << 16;
        let ones: u64 = (0..n).map(|i| u64::from(a.at(i).count_ones())).sum();
        let mean = ones as f64 / n as f64;
        // 64 fair bits: mean 32, sd 4/sqrt(n) of the mean.
        assert!((mean - 32.0).abs() < 0.1, "mean popcount {mean}");
        assert!((0..1000).all(|i| a.at(i) != b.at(i)));
        assert_ne!(Stream::new(1, 0).at(0), Stream::new(2, 0).at(0));
    }

    #[test]
    fn fresh_seeds_differ_and_stay_below_2_to_the_53() {
        assert_ne!(fresh_seed(), fresh_seed());
        assert!((0..10_000).all(|_| fresh_seed() <= crate::MAX_SEED));
    }
}
