//! Sampling several steps of an antithetic pair at once, as `blocks` does
//! for single paths.
//!
//! A pair's mirror goes up where the path's uniform, reflected, is below
//! p. So one step of a pair has three outcomes: with p ≤ ½ the path goes up
//! (probability p), the mirror goes up (p), or neither (1 − 2p); with p > ½
//! both go up (2p − 1), or only the path (1 − p), or only the mirror
//! (1 − p). A block of m steps of a pair is one of 3^m outcomes, each a pair
//! of single-path patterns, and is drawn with one alias look-up from one
//! 64-bit number, exactly like a block of a single path. The mirror is a
//! function of the same draw, so a pair costs what two blocked paths cost
//! instead of one comparison per step.

use crate::blocks::{AliasTable, Pattern, SLOTS};
use crate::model::{Model, powi};

/// Largest block of a pair: 3^6 = 729 outcomes fit the 1024 columns of an
/// alias table (8 KiB); with their maps (32 bytes each, 23 KiB) a table
/// still about fits a 32 KiB L1 data cache. 3^7 would not.
pub(crate) const MAX_PAIR_BLOCK_STEPS: u32 = 6;

/// The three outcomes of one step of a pair, as (probability, path up,
/// mirror up), in digit order.
fn step_outcomes(p: f64) -> [(f64, bool, bool); 3] {
    if p <= 0.5 {
        [
            (1.0 - 2.0 * p, false, false),
            (p, true, false),
            (p, false, true),
        ]
    } else {
        [
            (2.0 * p - 1.0, true, true),
            (1.0 - p, true, false),
            (1.0 - p, false, true),
        ]
    }
}

/// The outcome of `steps` steps of a pair, numbered in base 3 (the digit of
/// step k has weight 3^k), as the path's and the mirror's patterns (bit k
/// set = step k + 1 goes up) and its probability.
pub(crate) fn outcome(p: f64, steps: u32, outcome: usize) -> (usize, usize, f64) {
    let steps_of = step_outcomes(p);
    let (mut path, mut mirror, mut digits, mut rest) = (0, 0, [0u32; 3], outcome);
    for k in 0..steps {
        let digit = rest % 3;
        rest /= 3;
        let (_, path_up, mirror_up) = steps_of[digit];
        path |= usize::from(path_up) << k;
        mirror |= usize::from(mirror_up) << k;
        digits[digit] += 1;
    }
    let probability = (0..3).fold(1.0, |q, d| q * powi(steps_of[d].0, digits[d]));
    (path, mirror, probability)
}

/// The affine maps of the path and of its mirror over one pair block,
/// laid out as two vectors of two lanes, so a walk applies both with two
/// aligned loads.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(16))]
pub(crate) struct PairMap {
    /// Products of the step factors: spot ·= growth, per path.
    pub(crate) growth: [f64; 2],
    /// Sums of the running products: sum += spot·gain, per path.
    pub(crate) gain: [f64; 2],
}

/// The alias table of pair blocks of one length, labelled by outcome
/// number, with the maps of every outcome.
#[derive(Debug, Clone)]
pub(crate) struct PairTable {
    /// Steps per block.
    pub(crate) steps: u32,
    alias: AliasTable,
    /// By outcome number (3^steps used).
    maps: Box<[PairMap; SLOTS]>,
}

impl PairTable {
    fn new(model: &Model, steps: u32) -> Self {
        debug_assert!((1..=MAX_PAIR_BLOCK_STEPS).contains(&steps));
        let outcomes = 3usize.pow(steps);
        let mut maps = Box::new([PairMap::default(); SLOTS]);
        let mut probability = vec![0.0; outcomes];
        for o in 0..outcomes {
            let (path, mirror, q) = outcome(model.p, steps, o);
            let [a, b] = [path, mirror].map(|pattern| Pattern::of(model, steps, pattern));
            maps[o] = PairMap {
                growth: [a.growth, b.growth],
                gain: [a.gain, b.gain],
            };
            probability[o] = q;
        }
        Self {
            steps,
            // Padding columns are never drawn; any label will do.
            alias: AliasTable::replicated(&probability, |o| o.min(outcomes - 1) as u16),
            maps,
        }
    }

    /// The outcome number drawn by the 64 random bits `r`.
    #[inline(always)]
    pub(crate) fn draw(&self, r: u64) -> usize {
        usize::from(self.alias.draw(r)) & (SLOTS - 1)
    }

    /// The maps of outcome `outcome`.
    #[inline(always)]
    pub(crate) fn maps(&self, outcome: usize) -> &PairMap {
        &self.maps[outcome & (SLOTS - 1)]
    }
}

/// Longest pairs that are counted instead of walked: a pair of n steps is
/// one of 3^n outcomes, and 3^8 = 6561 counters still fit in L1.
pub(crate) const MAX_COUNTED_PAIR_STEPS: u32 = 8;

/// How pairs of `n`-step paths are cut into blocks: `long_count` blocks of
/// `long.steps` steps, then `short_count` blocks of one step fewer; pair j
/// of a chunk reads draws j·B .. (j + 1)·B (B blocks).
///
/// Pairs of at most [`MAX_COUNTED_PAIR_STEPS`] steps are counted (`sums`
/// is then filled and the tables report outcome numbers). A pair of at most
/// [`MAX_PAIR_BLOCK_STEPS`] steps is one block, and `group` =
/// ⌊MAX_PAIR_BLOCK_STEPS / n⌋ consecutive pairs are drawn as one block of
/// group·n steps (`long`), pair i of the group taking base-3 digits
/// i·n .. (i + 1)·n: one draw then serves up to six 1-step pairs.
#[derive(Debug, Clone)]
pub(crate) struct PairPlan {
    pub(crate) long: PairTable,
    pub(crate) long_count: u32,
    pub(crate) short: Option<PairTable>,
    pub(crate) short_count: u32,
    /// Pairs per block group when counted (1 when a pair is two blocks).
    pub(crate) group: u32,
    /// When counted: the path sums of the path and of the mirror of each
    /// outcome of a pair, by outcome number.
    pub(crate) sums: Vec<[f64; 2]>,
}

impl PairPlan {
    /// Cuts `model.periods` steps into the fewest pair blocks of near-equal
    /// size, and tabulates the outcomes of pairs short enough to count.
    pub(crate) fn new(model: &Model) -> Self {
        let n = model.periods;
        let counted = n <= MAX_COUNTED_PAIR_STEPS;
        let group = if n <= MAX_PAIR_BLOCK_STEPS {
            MAX_PAIR_BLOCK_STEPS / n
        } else {
            1
        };
        let steps = group * n;
        let blocks = steps.div_ceil(MAX_PAIR_BLOCK_STEPS);
        let long_steps = steps.div_ceil(blocks);
        let short_count = blocks * long_steps - steps;
        let sums = if counted {
            (0..3usize.pow(n))
                .map(|o| {
                    let (path, mirror, _) = outcome(model.p, n, o);
                    // As a walk computes it: spot 1, sum 1, then sum += spot·gain.
                    [path, mirror].map(|pattern| 1.0 + Pattern::of(model, n, pattern).gain)
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            long: PairTable::new(model, long_steps),
            long_count: blocks - short_count,
            short: (short_count > 0).then(|| PairTable::new(model, long_steps - 1)),
            short_count,
            group: if counted { group } else { 0 },
            sums,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    fn model(interest: f64) -> Model {
        Model::new(&Spec {
            interest,
            periods: 3,
            ..Spec::default()
        })
    }

    /// Over all 3^m outcomes the path and the mirror each follow the
    /// single-path law (pattern with k ups: p^k q^(m − k)), and with p ≤ ½
    /// they never go up together: the mirror is the path's reflection.
    #[test]
    fn outcomes_give_both_paths_the_single_path_law() {
        for interest in [1.08, 1.1, 0.801, 1.3999, 1.3] {
            let p = model(interest).p;
            let m = 4;
            let (mut path_law, mut mirror_law) = ([0.0f64; 16], [0.0f64; 16]);
            for o in 0..81 {
                let (path, mirror, q) = outcome(p, m, o);
                path_law[path] += q;
                mirror_law[mirror] += q;
                if p <= 0.5 {
                    assert_eq!(path & mirror, 0, "{interest}: both up at once");
                } else {
                    assert_eq!(path | mirror, 15, "{interest}: both down at once");
                }
            }
            for pattern in 0..16 {
                let k = (pattern as u32).count_ones();
                let want = p.powi(k as i32) * (1.0 - p).powi((m - k) as i32);
                for law in [path_law, mirror_law] {
                    assert!((law[pattern] - want).abs() < 1e-15, "{interest} {pattern}");
                }
            }
        }
    }

    /// Drawing with every column (the top 10 bits) and both sides of its
    /// threshold gives the outcome probabilities (32-bit resolution);
    /// padding is never drawn.
    #[test]
    fn pair_tables_draw_the_outcome_probabilities() {
        for interest in [1.08, 1.3, 1.1] {
            let model = model(interest);
            for steps in [1, 3, 5, 6] {
                let table = PairTable::new(&model, steps);
                let mut mass = vec![0.0f64; 3usize.pow(steps)];
                let weight = 1.0 / SLOTS as f64;
                for column in 0..SLOTS {
                    let top = (column as u64) << 54;
                    let threshold = table.alias.threshold(column);
                    let below = f64::from(threshold) / 4_294_967_296.0;
                    if threshold > 0 {
                        mass[table.draw(top)] += below * weight;
                    }
                    let r = top | u64::from(u32::MAX);
                    mass[table.draw(r)] += (1.0 - below) * weight;
                }
                for (o, m) in mass.iter().enumerate() {
                    let want = outcome(model.p, steps, o).2;
                    assert!(
                        (m - want).abs() < 1e-9,
                        "{interest} {steps} {o}: {m} vs {want}"
                    );
                    // The maps are those of the outcome's two paths.
                    let (path, mirror, _) = outcome(model.p, steps, o);
                    let map = table.maps(o);
                    for (lane, pattern) in [path, mirror].into_iter().enumerate() {
                        let single = Pattern::of(&model, steps, pattern);
                        assert_eq!(map.growth[lane], single.growth);
                        assert_eq!(map.gain[lane], single.gain);
                    }
                }
            }
        }
    }

    #[test]
    fn pair_plans_cover_every_step() {
        for n in 1..=60 {
            let model = Model::new(&Spec {
                periods: n,
                ..Spec::default()
            });
            let plan = PairPlan::new(&model);
            let short = plan.short.as_ref().map_or(0, |t| t.steps);
            let steps = plan.long_count * plan.long.steps + plan.short_count * short;
            assert!(plan.long.steps <= MAX_PAIR_BLOCK_STEPS);
            if n <= MAX_COUNTED_PAIR_STEPS {
                assert_eq!(steps, plan.group * n, "n = {n}");
                assert_eq!(plan.sums.len(), 3usize.pow(n));
                let group = if n <= MAX_PAIR_BLOCK_STEPS { 6 / n } else { 1 };
                assert_eq!(plan.group, group, "n = {n}");
            } else {
                assert_eq!(steps, n, "n = {n}");
                assert!(plan.group == 0 && plan.sums.is_empty());
            }
        }
    }
}
