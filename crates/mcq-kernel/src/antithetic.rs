//! Antithetic pairs: a path and its mirror, which goes up where the path's
//! uniform, reflected, is below p. Pairs are drawn block by block from the
//! pair tables of `pair_blocks` (one 64-bit draw and one alias look-up per
//! block of up to six steps of both paths, no per-step uniform), and pairs
//! of at most eight steps are counted instead of walked, as short single
//! paths are in `simulate`.

use crate::blocks::SLOTS;
use crate::model::Model;
#[cfg(test)]
use crate::pair_blocks::outcome;
use crate::pair_blocks::{PairPlan, PairTable};
use crate::rng::{STATE_STEP, Stream, output};
use crate::simulate::{COUNT_COPIES, ChunkSums, LANES};

/// Sums over `pairs` antithetic pairs of chunk `stream`; with `DELTA`, also
/// of the pairs' pathwise deltas (the mean of the two paths').
pub(crate) fn antithetic_pairs<const DELTA: bool>(
    model: &Model,
    plan: &PairPlan,
    stream: Stream,
    pairs: u64,
) -> ChunkSums {
    if !plan.sums.is_empty() {
        counted_pairs::<DELTA>(model, plan, stream, pairs)
    } else {
        walked_pairs::<DELTA>(model, plan, stream, pairs)
    }
}

/// `LANES` pairs in flight: eight independent multiply chains.
struct PairLanes {
    /// Weyl state of each lane's next draw.
    draw: [u64; LANES],
    /// Spot and running sum of the path (0) and of its mirror (1).
    spot: [[f64; 2]; LANES],
    sum: [[f64; 2]; LANES],
}

impl PairLanes {
    /// Pairs `first ..` of the stream; pair j's draws start at j·blocks.
    fn start(stream: Stream, first: u64, blocks: u64) -> Self {
        Self {
            draw: std::array::from_fn(|l| stream.state((first + l as u64) * blocks)),
            spot: [[1.0; 2]; LANES],
            sum: [[1.0; 2]; LANES],
        }
    }

    /// Advances every lane by one pair block of `table`.
    #[inline(always)]
    fn step(&mut self, table: &PairTable) {
        for l in 0..LANES {
            let map = table.maps(table.draw(output(self.draw[l])));
            self.draw[l] = self.draw[l].wrapping_add(STATE_STEP);
            for path in 0..2 {
                self.sum[l][path] += self.spot[l][path] * map.gain[path];
                self.spot[l][path] *= map.growth[path];
            }
        }
    }

    fn walk(&mut self, plan: &PairPlan) {
        for _ in 0..plan.long_count {
            self.step(&plan.long);
        }
        if let Some(short) = &plan.short {
            for _ in 0..plan.short_count {
                self.step(short);
            }
        }
    }
}

/// Pairs of paths longer than one pair block. Pair j reads draws
/// j·B .. (j + 1)·B (B blocks per pair). `LANES` pairs are walked side by
/// side and their sums added in pair order, so the chunk's sums are a fixed
/// function of the chunk.
fn walked_pairs<const DELTA: bool>(
    model: &Model,
    plan: &PairPlan,
    stream: Stream,
    pairs: u64,
) -> ChunkSums {
    let blocks = u64::from(plan.long_count + plan.short_count);
    let mut s = ChunkSums::default();
    let mut first = 0u64;
    while first < pairs {
        // The last group may be partial: its extra lanes are walked but
        // not counted.
        let live = (pairs - first).min(LANES as u64) as usize;
        let mut lanes = PairLanes::start(stream, first, blocks);
        lanes.walk(plan);
        for &[sum1, sum2] in &lanes.sum[..live] {
            let (y1, y2) = (model.payoff(sum1), model.payoff(sum2));
            let y = 0.5 * (y1 + y2);
            s.y += y;
            s.yy += y * y;
            s.pp += y1 * y1 + y2 * y2;
            if DELTA {
                let d = 0.5 * (model.delta(sum1) + model.delta(sum2));
                s.d += d;
                s.dd += d * d;
            }
        }
        first += LANES as u64;
    }
    s
}

/// Pairs of at most `MAX_COUNTED_PAIR_STEPS` steps. A pair is then one of
/// 3^n outcomes and every sum is a function of it, so the chunk's outcomes
/// are counted and the sums formed once per outcome, in outcome order.
/// Draws are read in order: a unit of `plan.group` pairs is one or two
/// blocks (the second block's steps are the high base-3 digits), and pair
/// i of a unit takes digits i·n .. (i + 1)·n.
fn counted_pairs<const DELTA: bool>(
    model: &Model,
    plan: &PairPlan,
    stream: Stream,
    pairs: u64,
) -> ChunkSums {
    let n = model.periods;
    let group = u64::from(plan.group.max(1));
    let second = plan.short.as_ref().unwrap_or(&plan.long);
    let two = plan.long_count + plan.short_count == 2;
    let weight = 3usize.pow(plan.long.steps);
    let mut state = stream.state(0);
    let mut draw = |table: &PairTable| {
        let o = table.draw(output(state));
        state = state.wrapping_add(STATE_STEP);
        o
    };
    let mut unit = || {
        let first = draw(&plan.long);
        if two {
            first + weight * draw(second)
        } else {
            first
        }
    };
    let units = 3usize.pow(plan.group * n);
    // Copies while the table is small: consecutive units increment
    // different copies, so a run of equal outcomes (common when there are
    // few) does not chain every increment through the previous store.
    let copies = if units <= SLOTS { COUNT_COPIES } else { 1 };
    let (shift, mask) = (copies.trailing_zeros(), copies - 1);
    let mut unit_counts = vec![0u32; units * copies];
    for i in 0..pairs / group {
        unit_counts[unit() << shift | (i as usize & mask)] += 1;
    }
    // Split units into the outcomes of their pairs.
    let outcomes = 3usize.pow(n);
    let mut counts = vec![0u32; outcomes];
    let mut split = |joint: usize, pairs: u64, count: u32| {
        let mut rest = joint;
        for _ in 0..pairs {
            counts[rest % outcomes] += count;
            rest /= outcomes;
        }
    };
    for (o, copies) in unit_counts.chunks_exact(copies).enumerate() {
        let count: u32 = copies.iter().sum();
        if count > 0 {
            split(o, group, count);
        }
    }
    // A last, partial unit: the first pairs of one more.
    if !pairs.is_multiple_of(group) {
        split(unit(), pairs % group, 1);
    }

    let mut s = ChunkSums::default();
    for (&count, &[sum1, sum2]) in counts.iter().zip(&plan.sums) {
        if count == 0 {
            continue;
        }
        let c = f64::from(count);
        let (y1, y2) = (model.payoff(sum1), model.payoff(sum2));
        let y = 0.5 * (y1 + y2);
        s.y += c * y;
        s.yy += c * (y * y);
        s.pp += c * (y1 * y1 + y2 * y2);
        if DELTA {
            let d = 0.5 * (model.delta(sum1) + model.delta(sum2));
            s.d += c * d;
            s.dd += c * (d * d);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    /// The sums of pairs walked one at a time, each pair's path sums given.
    fn one_by_one(model: &Model, sums: impl Iterator<Item = [f64; 2]>) -> ChunkSums {
        let mut s = ChunkSums::default();
        for [sum1, sum2] in sums {
            let (y1, y2) = (model.payoff(sum1), model.payoff(sum2));
            let y = 0.5 * (y1 + y2);
            s.y += y;
            s.yy += y * y;
            s.pp += y1 * y1 + y2 * y2;
            let d = 0.5 * (model.delta(sum1) + model.delta(sum2));
            s.d += d;
            s.dd += d * d;
        }
        s
    }

    fn model(interest: f64, periods: u32) -> Model {
        Model::new(&Spec {
            interest,
            periods,
            ..Spec::default()
        })
    }

    /// Counting gives the sums of taking the same pairs one by one (pair i
    /// of unit u: digits i·n .. (i + 1)·n of unit u's outcome, the second
    /// block's digits above the first's), up to the order of additions.
    /// p at the defaults, above 1/2 and near 0; one- and two-block pairs.
    #[test]
    fn counted_pairs_match_pairs_taken_one_by_one() {
        for (interest, n) in [
            (1.08, 1),
            (1.08, 4),
            (1.3, 5),
            (0.81, 6),
            (1.2, 3),
            (1.08, 7),
            (1.3, 8),
        ] {
            let model = model(interest, n);
            let plan = PairPlan::new(&model);
            let stream = Stream::new(9, 3);
            let blocks = u64::from(plan.long_count + plan.short_count);
            let second = plan.short.as_ref().unwrap_or(&plan.long);
            for pairs in [1, 5, 1001] {
                let counted = counted_pairs::<true>(&model, &plan, stream, pairs);
                let group = u64::from(plan.group);
                let outcomes = 3usize.pow(n);
                let sums = (0..pairs).map(|j| {
                    let u = j / group;
                    let mut drawn = plan.long.draw(stream.at(u * blocks));
                    if blocks == 2 {
                        drawn +=
                            3usize.pow(plan.long.steps) * second.draw(stream.at(u * blocks + 1));
                    }
                    let o = drawn / outcomes.pow((j % group) as u32) % outcomes;
                    let (path, mirror, _) = outcome(model.p, n, o);
                    [path, mirror].map(|pattern| {
                        let mut spot_and_sum = (1.0, 1.0);
                        for k in 0..n {
                            let up = pattern >> k & 1 == 1;
                            spot_and_sum.0 *= if up { model.up } else { model.down };
                            spot_and_sum.1 += spot_and_sum.0;
                        }
                        spot_and_sum.1
                    })
                });
                let want = one_by_one(&model, sums);
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
                for (got, want) in [
                    (counted.y, want.y),
                    (counted.yy, want.yy),
                    (counted.pp, want.pp),
                    (counted.d, want.d),
                    (counted.dd, want.dd),
                ] {
                    assert!(close(got, want), "{interest} {n} {pairs}: {got} vs {want}");
                }
            }
        }
    }

    /// Walking pairs side by side gives the bits of walking them one by one,
    /// pair j from draws j·B .. (j + 1)·B.
    #[test]
    fn walked_pairs_match_pairs_walked_one_by_one() {
        for (interest, n) in [(1.08, 9), (1.3, 10), (0.81, 20), (1.08, 33)] {
            let model = model(interest, n);
            let plan = PairPlan::new(&model);
            let stream = Stream::new(4, 1);
            let blocks = u64::from(plan.long_count + plan.short_count);
            let tables: Vec<&PairTable> = std::iter::repeat_n(&plan.long, plan.long_count as usize)
                .chain(std::iter::repeat_n(
                    plan.short.as_ref().unwrap_or(&plan.long),
                    plan.short_count as usize,
                ))
                .collect();
            for pairs in [1, 6, 1001] {
                let walked = walked_pairs::<true>(&model, &plan, stream, pairs);
                let sums = (0..pairs).map(|j| {
                    let (mut spot, mut sum) = ([1.0f64; 2], [1.0f64; 2]);
                    for (b, table) in tables.iter().enumerate() {
                        let map = table.maps(table.draw(stream.at(j * blocks + b as u64)));
                        for path in 0..2 {
                            sum[path] += spot[path] * map.gain[path];
                            spot[path] *= map.growth[path];
                        }
                    }
                    sum
                });
                let want = one_by_one(&model, sums);
                for (got, want) in [
                    (walked.y, want.y),
                    (walked.yy, want.yy),
                    (walked.pp, want.pp),
                    (walked.d, want.d),
                    (walked.dd, want.dd),
                ] {
                    assert_eq!(got.to_bits(), want.to_bits(), "{interest} {n} {pairs}");
                }
            }
        }
    }
}
