//! Sampling several steps at once. A block of `m` steps moves the state
//! (spot S, running sum Σ) by an affine map chosen among 2^m patterns:
//! S ← S·g and Σ ← Σ + S·h, where g is the product of the step factors and
//! h the sum of their running products. A pattern is drawn with Walker's
//! alias method from one 64-bit random number: the top `m` bits pick a
//! column, the low 32 bits decide between the column's own pattern and its
//! alias. So a 20-step path costs two random numbers instead of twenty
//! branches, and the probabilities keep 32 bits of resolution (bias ~1e-9).

use crate::model::{Model, powi};

/// Largest block: 2^10 patterns keep a table (24 KiB) inside L1.
pub(crate) const MAX_BLOCK_STEPS: u32 = 10;
/// Entries of every table: patterns of the largest block.
pub(crate) const SLOTS: usize = 1 << MAX_BLOCK_STEPS;

/// The affine map of one pattern, and its up-move counts for the
/// geometric average.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Pattern {
    /// Product of the step factors: S ← S·growth.
    pub(crate) growth: f64,
    /// Sum of the running products: Σ ← Σ + S·gain.
    pub(crate) gain: f64,
}

impl Pattern {
    /// The map of `pattern` (bit j set = step j + 1 goes up) over `steps`
    /// steps, computed as a walk computes it: spot 1, then spot ·= factor
    /// and gain += spot per step.
    pub(crate) fn of(model: &Model, steps: u32, pattern: usize) -> Self {
        let (mut growth, mut gain) = (1.0, 0.0);
        for j in 0..steps {
            growth *= if pattern >> j & 1 == 1 {
                model.up
            } else {
                model.down
            };
            gain += growth;
        }
        Self { growth, gain }
    }
}

/// One alias-table column: keep `own` when the 32-bit draw is below
/// `threshold`, else take `alias`.
#[derive(Debug, Clone, Copy, Default)]
struct Column {
    threshold: u32,
    own: u16,
    alias: u16,
}

/// Walker's alias table over at most [`SLOTS`] outcomes. The columns are
/// padded to a power of two (padding has probability 0) and then repeated
/// to fill all [`SLOTS`], so the column is always the top
/// `MAX_BLOCK_STEPS` bits of the draw: a constant shift, no mask and no
/// division in the loops.
#[derive(Debug, Clone)]
pub(crate) struct AliasTable {
    columns: Box<[Column; SLOTS]>,
}

/// Right shift that leaves the top `MAX_BLOCK_STEPS` bits of a draw.
const COLUMN_SHIFT: u32 = 64 - MAX_BLOCK_STEPS;

impl AliasTable {
    /// The k = 2^b columns drawing outcome i with probability
    /// `probability[i]` (normalised here), reporting it as `label(i)`.
    fn columns(probability: &[f64], label: impl Fn(usize) -> u16) -> (Box<[Column; SLOTS]>, u32) {
        debug_assert!((2..=SLOTS).contains(&probability.len()));
        let bits = usize::BITS - (probability.len() - 1).leading_zeros();
        let mut padded = probability.to_vec();
        padded.resize(1 << bits, 0.0);
        let mut columns = alias_columns(&padded);
        for column in columns.iter_mut().take(padded.len()) {
            // Padding is never drawn: its threshold is 0, so its column
            // always yields its alias, a real outcome.
            column.own = label(usize::from(column.own));
            column.alias = label(usize::from(column.alias));
        }
        (columns, bits)
    }

    /// The table of `probability`, each of its k columns repeated
    /// [`SLOTS`]/k times in a row: column c of the full table is column
    /// c·k/[`SLOTS`], the one the top log2(k) bits of the draw pick. So
    /// a draw picks the column (and pattern) it picked before the columns
    /// were repeated, and seeded results keep their bits.
    pub(crate) fn new(probability: &[f64], label: impl Fn(usize) -> u16) -> Self {
        let (mut columns, bits) = Self::columns(probability, label);
        let repeat = MAX_BLOCK_STEPS - bits;
        // Downwards: column c reads column c >> repeat ≤ c, not yet rewritten.
        for column in (0..SLOTS).rev() {
            columns[column] = columns[column >> repeat];
        }
        Self { columns }
    }

    /// The table of `probability` with its k columns repeated cyclically:
    /// column c of the full table is column c mod k of the k-column one,
    /// so every column keeps probability 1/k.
    pub(crate) fn replicated(probability: &[f64], label: impl Fn(usize) -> u16) -> Self {
        let (mut columns, bits) = Self::columns(probability, label);
        let used = 1usize << bits;
        for column in used..SLOTS {
            columns[column] = columns[column % used];
        }
        Self { columns }
    }

    /// The label of the outcome drawn by the 64 random bits `r`: the top
    /// bits pick a column, the low 32 bits its own outcome or its alias.
    #[inline(always)]
    pub(crate) fn draw(&self, r: u64) -> u16 {
        let column = self.columns[(r >> COLUMN_SHIFT) as usize];
        std::hint::select_unpredictable((r as u32) < column.threshold, column.own, column.alias)
    }
}

#[cfg(test)]
impl AliasTable {
    /// The threshold of column `column`, to weigh draws exactly in tests.
    pub(crate) fn threshold(&self, column: usize) -> u32 {
        self.columns[column].threshold
    }
}

/// The alias table of one block length.
#[derive(Debug, Clone)]
pub(crate) struct BlockTable {
    /// Steps per block.
    pub(crate) steps: u32,
    alias: AliasTable,
    /// Affine maps, indexed by pattern (bit j set = step j + 1 goes up).
    pub(crate) patterns: Box<[Pattern; SLOTS]>,
    /// Per pattern: up moves `k` in the low 16 bits and the position-
    /// weighted count Σ_j x_j (m − j + 1) in the high 16 bits, from which
    /// the geometric average's exponent is accumulated in integers.
    pub(crate) ups: Box<[u32; SLOTS]>,
}

impl BlockTable {
    /// The table of blocks of `steps` steps (1 ..= MAX_BLOCK_STEPS).
    pub(crate) fn new(model: &Model, steps: u32) -> Self {
        debug_assert!((1..=MAX_BLOCK_STEPS).contains(&steps));
        let count = 1usize << steps;
        let (p, q) = (model.p, 1.0 - model.p);
        let mut patterns = Box::new([Pattern::default(); SLOTS]);
        let mut ups = Box::new([0u32; SLOTS]);
        let mut probability = vec![0.0; count];
        for pattern in 0..count {
            let (mut k, mut weighted) = (0u32, 0u32);
            for j in 0..steps {
                if pattern >> j & 1 == 1 {
                    k += 1;
                    weighted += steps - j;
                }
            }
            patterns[pattern] = Pattern::of(model, steps, pattern);
            ups[pattern] = k | weighted << 16;
            probability[pattern] = powi(p, k) * powi(q, steps - k);
        }
        Self {
            steps,
            alias: AliasTable::new(&probability, |pattern| pattern as u16),
            patterns,
            ups,
        }
    }

    /// The pattern drawn by the 64 random bits `r`.
    #[inline(always)]
    pub(crate) fn draw(&self, r: u64) -> usize {
        usize::from(self.alias.draw(r)) & (SLOTS - 1)
    }
}

/// Vose's construction of the alias columns; only basic float operations,
/// in a fixed order, so every machine builds the same table.
fn alias_columns(probability: &[f64]) -> Box<[Column; SLOTS]> {
    let count = probability.len();
    let total: f64 = probability.iter().sum();
    let mut scaled: Vec<f64> = probability
        .iter()
        .map(|x| x / total * count as f64)
        .collect();
    let mut columns = Box::new([Column::default(); SLOTS]);
    let (mut small, mut large): (Vec<usize>, Vec<usize>) =
        (0..count).partition(|&i| scaled[i] < 1.0);
    while let (Some(&s), Some(&l)) = (small.last(), large.last()) {
        small.pop();
        columns[s] = Column {
            threshold: threshold(scaled[s]),
            own: s as u16,
            alias: l as u16,
        };
        scaled[l] = (scaled[l] + scaled[s]) - 1.0;
        if scaled[l] < 1.0 {
            large.pop();
            small.push(l);
        }
    }
    // What remains has probability one up to rounding.
    for i in small.into_iter().chain(large) {
        columns[i] = Column {
            threshold: u32::MAX,
            own: i as u16,
            alias: i as u16,
        };
    }
    columns
}

fn threshold(probability: f64) -> u32 {
    let scaled = (probability * 4_294_967_296.0).round();
    if scaled >= 4_294_967_295.0 {
        u32::MAX
    } else {
        scaled.max(0.0) as u32
    }
}

/// How a path of `n` steps is cut into blocks: `long_count` blocks of
/// `long.steps` steps, then `short_count` blocks of one step fewer.
///
/// Paths of one block (n ≤ `MAX_BLOCK_STEPS`) are drawn `group` at a time:
/// `group` = ⌊MAX_BLOCK_STEPS / n⌋ consecutive paths are one block of
/// group·n steps (steps are independent, so their joint pattern is a pattern
/// of that longer block), path i of the group taking pattern bits
/// i·n .. (i + 1)·n. One draw then serves up to 10 one-period paths.
#[derive(Debug, Clone)]
pub(crate) struct BlockPlan {
    pub(crate) long: BlockTable,
    pub(crate) long_count: u32,
    pub(crate) short: Option<BlockTable>,
    pub(crate) short_count: u32,
    /// Paths per draw when a path is one block; 0 otherwise.
    pub(crate) group: u32,
    /// The table of a block of group·n steps, when `group` > 1 (with
    /// `group` = 1 it is `long`).
    pub(crate) joint: Option<BlockTable>,
    /// For paths of 2 ..= [`MAX_FIXED_BLOCKS`] blocks, one table per block
    /// of the path: what each pattern of that block adds to W (its own
    /// position-weighted ups plus its ups times the steps after it), so a
    /// walk adds one looked-up number per block. Empty otherwise.
    pub(crate) weights: Vec<Box<[u32; SLOTS]>>,
}

/// Most blocks of the paths whose walk has a loop of its own, unrolled
/// (two to four blocks: 11–40 periods).
pub(crate) const MAX_FIXED_BLOCKS: u32 = 4;

impl BlockPlan {
    /// Cuts `model.periods` steps into the fewest blocks of near-equal size.
    pub(crate) fn new(model: &Model) -> Self {
        let n = model.periods;
        let blocks = n.div_ceil(MAX_BLOCK_STEPS);
        let long_steps = n.div_ceil(blocks);
        let short_count = blocks * long_steps - n;
        let long_count = blocks - short_count;
        let short = (short_count > 0).then(|| BlockTable::new(model, long_steps - 1));
        let group = if blocks == 1 { MAX_BLOCK_STEPS / n } else { 0 };
        let mut plan = Self {
            long: BlockTable::new(model, long_steps),
            long_count,
            short,
            short_count,
            group,
            joint: (group > 1).then(|| BlockTable::new(model, group * n)),
            weights: Vec::new(),
        };
        if (2..=MAX_FIXED_BLOCKS).contains(&blocks) {
            let mut rest = n;
            for b in 0..blocks {
                let table = plan.table(b);
                rest -= table.steps;
                let mut weights = Box::new([0u32; SLOTS]);
                for (weight, &packed) in weights.iter_mut().zip(table.ups.iter()) {
                    *weight = rest * (packed & 0xffff) + (packed >> 16);
                }
                plan.weights.push(weights);
            }
        }
        plan
    }

    /// The table of block `b` of a path (the long blocks come first).
    pub(crate) fn table(&self, b: u32) -> &BlockTable {
        match &self.short {
            Some(short) if b >= self.long_count => short,
            _ => &self.long,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    #[test]
    fn alias_table_reproduces_the_pattern_probabilities() {
        let model = Model::new(&Spec {
            periods: 3,
            ..Spec::default()
        });
        let table = BlockTable::new(&model, 3);
        // Every (column, 32-bit draw) pair, weighted exactly.
        let mut mass = [0.0f64; 8];
        for column in 0..8u64 {
            // Column `column` of 8, repeated 128 times from 128·column.
            let c = table.alias.columns[(column << 7) as usize];
            let below = f64::from(c.threshold) / 4_294_967_296.0;
            mass[usize::from(c.own)] += below / 8.0;
            mass[usize::from(c.alias)] += (1.0 - below) / 8.0;
            assert_eq!(table.draw(column << 61), usize::from(c.own));
        }
        for (pattern, m) in mass.iter().enumerate() {
            let k = (pattern as u32).count_ones();
            let want = model.p.powi(k as i32) * (1.0 - model.p).powi(3 - k as i32);
            assert!((m - want).abs() < 1e-9, "pattern {pattern}: {m} vs {want}");
        }
    }

    #[test]
    fn plans_cover_every_step() {
        for n in 1..=100 {
            let model = Model::new(&Spec {
                periods: n,
                ..Spec::default()
            });
            let plan = BlockPlan::new(&model);
            let short_steps = plan.short.as_ref().map_or(0, |t| t.steps);
            assert_eq!(
                plan.long_count * plan.long.steps + plan.short_count * short_steps,
                n,
                "n = {n}"
            );
            assert!(plan.long.steps <= MAX_BLOCK_STEPS);
            // One-block paths are drawn in groups that fill a block.
            let joint_steps = plan.joint.as_ref().map_or(plan.long.steps, |t| t.steps);
            if n <= MAX_BLOCK_STEPS {
                assert_eq!(plan.group, MAX_BLOCK_STEPS / n, "n = {n}");
                assert_eq!(joint_steps, plan.group * n, "n = {n}");
            } else {
                assert_eq!(plan.group, 0, "n = {n}");
            }
        }
    }
}
