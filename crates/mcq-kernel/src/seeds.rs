//! The seeds of a batch's jobs, derived from one base seed.
//!
//! Job `i` (counted from 0 in submission order) of a batch with base seed
//! `b` gets `job_seed(b, i)`: output number `i` of SplitMix64 seeded with
//! `b`, its top 53 bits. In 64-bit wrapping arithmetic,
//!
//! ```text
//! z = b + (i + 1) · 0x9e3779b97f4a7c15
//! z = (z ^ (z >> 30)) · 0xbf58476d1ce4e5b9
//! z = (z ^ (z >> 27)) · 0x94d049bb133111eb
//! job_seed = (z ^ (z >> 31)) >> 11
//! ```
//!
//! The formula is part of the API (docs/api.md states it, and the Python
//! client and the dashboard implement it against the same test vectors):
//! changing it changes the result of every batch submitted with a base
//! seed. Mixing, rather than `b + i`, keeps batches with nearby bases from
//! sharing seeds, and the shift keeps every seed within
//! [`MAX_SEED`](crate::MAX_SEED).

use crate::rng::mix64;

/// SplitMix64's increment, the golden ratio's fractional part in 64 bits.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// The seed of job `index` of a batch whose base seed is `base`; at most
/// [`MAX_SEED`](crate::MAX_SEED) whatever the arguments.
pub fn job_seed(base: u64, index: u64) -> u64 {
    mix64(base.wrapping_add(index.wrapping_add(1).wrapping_mul(GOLDEN_GAMMA))) >> 11
}

/// Reads an optional seed as a spec's `seed` is read (`7` and `7.0` alike;
/// absent or `null` is `None`), for `#[serde(deserialize_with)]` on other
/// types that carry a seed. The range is checked where the request is
/// validated.
pub fn deserialize_seed<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    crate::integral::option_u64(deserializer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_SEED;
    use proptest::prelude::*;

    #[test]
    fn matches_the_shared_test_vectors() {
        let text = include_str!("../../../tests/vectors/job_seed.json");
        let doc: serde_json::Value = serde_json::from_str(text).unwrap();
        let vectors = doc["vectors"].as_array().unwrap();
        assert!(vectors.len() >= 10);
        for v in vectors {
            let (base, index) = (v["base"].as_u64().unwrap(), v["index"].as_u64().unwrap());
            assert_eq!(job_seed(base, index), v["seed"].as_u64().unwrap(), "{v}");
        }
    }

    #[test]
    fn is_splitmix64_reduced_to_53_bits() {
        // The reference sequence, stepped as SplitMix64 steps its state.
        let mut state: u64 = 2010;
        for index in 0..1000 {
            state = state.wrapping_add(GOLDEN_GAMMA);
            assert_eq!(job_seed(2010, index), mix64(state) >> 11);
        }
    }

    #[test]
    fn a_batch_of_a_hundred_thousand_jobs_has_distinct_seeds() {
        let mut seeds: Vec<u64> = (0..100_000).map(|i| job_seed(7, i)).collect();
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len(), 100_000);
    }

    proptest! {
        #[test]
        fn every_job_seed_is_a_valid_seed(base in 0..=MAX_SEED, index: u64) {
            prop_assert!(job_seed(base, index) <= MAX_SEED);
        }

        #[test]
        fn nearby_bases_share_no_seeds(base in 0..MAX_SEED, index in 0u64..1_000_000) {
            prop_assert_ne!(job_seed(base, index), job_seed(base + 1, index));
            // `base + index` would fail this: batch b + 1 would be batch b shifted.
            prop_assert_ne!(job_seed(base, index + 1), job_seed(base + 1, index));
        }
    }
}
