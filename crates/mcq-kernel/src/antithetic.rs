//! Antithetic pairs: a path and its mirror, which goes up where the path's
//! uniform reflected (2^32 − 1 − x) is below the threshold. Mirroring needs
//! one uniform per step, so pairs cannot use the block tables: each step is
//! a 32-bit draw compared with a 32-bit threshold, two steps per 64-bit
//! draw.

use crate::blocks::SLOTS;
use crate::model::Model;
use crate::rng::{STATE_STEP, Stream, output};
use crate::simulate::{COUNT_COPIES, ChunkSums, LANES};

/// The 32-bit threshold of a Bernoulli(p) step: up when a 32-bit draw is
/// below it.
pub(crate) fn step_threshold(p: f64) -> u64 {
    ((p * 4_294_967_296.0).round() as u64).min(1 << 32)
}

/// Longest paths whose pairs are counted: a step of a pair has three
/// possible outcomes, and 3^8 = 6561 counters still fit in L1.
const MAX_COUNTED_PERIODS: u32 = 8;

/// Sums over `pairs` antithetic pairs of chunk `stream`.
pub(crate) fn antithetic_pairs(model: &Model, stream: Stream, pairs: u64) -> ChunkSums {
    if model.periods <= MAX_COUNTED_PERIODS {
        counted_pairs(model, stream, pairs)
    } else {
        walked_pairs(model, stream, pairs)
    }
}

/// One step of a path: a conditional move on the factors' bit patterns,
/// not a branch, which would be mispredicted on about half the steps.
#[inline(always)]
fn step(x: u32, threshold: u64, factors: (u64, u64), spot: &mut f64, sum: &mut f64) {
    *spot *= f64::from_bits(std::hint::select_unpredictable(
        u64::from(x) < threshold,
        factors.0,
        factors.1,
    ));
    *sum += *spot;
}

/// Pairs of paths longer than [`MAX_COUNTED_PERIODS`], simulated step by
/// step. Pair j reads draws j·⌈n/2⌉ .. (j + 1)·⌈n/2⌉ (the low half of the
/// last one when n is odd). `LANES` pairs are walked side by side, so the
/// CPU overlaps their multiply chains, and their sums are added in pair
/// order, so the chunk's sums are a fixed function of the chunk.
fn walked_pairs(model: &Model, stream: Stream, pairs: u64) -> ChunkSums {
    let threshold = step_threshold(model.p);
    let factors = (model.up.to_bits(), model.down.to_bits());
    let n = model.periods;
    let draws = u64::from(n.div_ceil(2));
    let mut s = ChunkSums::default();
    let mut add = |sum1: f64, sum2: f64| {
        let (y1, y2) = (model.payoff(sum1), model.payoff(sum2));
        let y = 0.5 * (y1 + y2);
        s.y += y;
        s.yy += y * y;
        s.pp += y1 * y1 + y2 * y2;
    };
    let mut first = 0u64;
    while first < pairs {
        // The last group may be partial: its extra lanes are walked but
        // not counted.
        let live = (pairs - first).min(LANES as u64) as usize;
        let mut state: [u64; LANES] =
            std::array::from_fn(|l| stream.state((first + l as u64) * draws));
        let mut spot = [[1.0f64; 2]; LANES];
        let mut sum = [[1.0f64; 2]; LANES];
        for _ in 0..n / 2 {
            for l in 0..LANES {
                let r = output(state[l]);
                state[l] = state[l].wrapping_add(STATE_STEP);
                for x in [r as u32, (r >> 32) as u32] {
                    step(x, threshold, factors, &mut spot[l][0], &mut sum[l][0]);
                    step(!x, threshold, factors, &mut spot[l][1], &mut sum[l][1]);
                }
            }
        }
        if n % 2 == 1 {
            for l in 0..LANES {
                let x = output(state[l]) as u32;
                step(x, threshold, factors, &mut spot[l][0], &mut sum[l][0]);
                step(!x, threshold, factors, &mut spot[l][1], &mut sum[l][1]);
            }
        }
        for [sum1, sum2] in &sum[..live] {
            add(*sum1, *sum2);
        }
        first += LANES as u64;
    }
    s
}

/// Pairs of paths of at most [`MAX_COUNTED_PERIODS`] steps. The chunk's
/// 32-bit draws are read in order (the low half of each 64-bit draw, then
/// the high half), n per pair, so two pairs use exactly n draws. A step of
/// a pair has three outcomes (path up, mirror up, or neither; with p > 1/2
/// both, or one of them), so a pair is one of 3^n outcomes: the chunk's
/// outcomes are counted and the sums formed once per outcome, in outcome
/// order, instead of walking and summing every pair.
fn counted_pairs(model: &Model, stream: Stream, pairs: u64) -> ChunkSums {
    let digits = Digits::new(step_threshold(model.p));
    let counts = match model.periods {
        1 => count_outcomes::<1>(stream, pairs, digits),
        2 => count_outcomes::<2>(stream, pairs, digits),
        3 => count_outcomes::<3>(stream, pairs, digits),
        4 => count_outcomes::<4>(stream, pairs, digits),
        5 => count_outcomes::<5>(stream, pairs, digits),
        6 => count_outcomes::<6>(stream, pairs, digits),
        7 => count_outcomes::<7>(stream, pairs, digits),
        _ => count_outcomes::<8>(stream, pairs, digits),
    };
    let mut sums = ChunkSums::default();
    let start = Replay {
        spot: [1.0; 2],
        sum: [1.0; 2],
    };
    start.visit(model, digits.offset, &counts, 0, 0, &mut sums);
    sums
}

/// The path and its mirror after the first steps of an outcome.
#[derive(Clone, Copy)]
struct Replay {
    spot: [f64; 2],
    sum: [f64; 2],
}

impl Replay {
    /// Adds the outcomes that start with `prefix` (its first `depth`
    /// steps), depth first and in outcome order. A prefix shared by many
    /// outcomes is walked once; each step is computed as a walked pair
    /// computes it.
    fn visit(
        self,
        model: &Model,
        offset: usize,
        counts: &Counts,
        depth: u32,
        prefix: usize,
        s: &mut ChunkSums,
    ) {
        if depth == model.periods {
            let count = counts.total(prefix);
            if count > 0 {
                let c = f64::from(count);
                let (y1, y2) = (model.payoff(self.sum[0]), model.payoff(self.sum[1]));
                let y = 0.5 * (y1 + y2);
                s.y += c * y;
                s.yy += c * (y * y);
                s.pp += c * (y1 * y1 + y2 * y2);
            }
            return;
        }
        for digit in 0..3 {
            let value = digit + offset;
            let mut next = self;
            for (path, up) in [value & 1 == 1, value & 2 == 2].into_iter().enumerate() {
                next.spot[path] *= if up { model.up } else { model.down };
                next.sum[path] += next.spot[path];
            }
            next.visit(model, offset, counts, depth + 1, 3 * prefix + digit, s);
        }
    }
}

/// Outcome counts, in `copies` interleaved copies (consecutive pairs
/// increment different copies; see `COUNT_COPIES`).
struct Counts {
    copies: usize,
    counts: Vec<u32>,
}

impl Counts {
    fn total(&self, outcome: usize) -> u32 {
        let at = outcome * self.copies;
        self.counts[at..at + self.copies].iter().sum()
    }
}

/// Counts the outcomes (base-3 numbers, first step most significant) of
/// `pairs` pairs of `N` steps; `N` is a constant so the loops unroll.
fn count_outcomes<const N: usize>(stream: Stream, pairs: u64, digits: Digits) -> Counts {
    let outcomes = 3usize.pow(N as u32);
    // Copies only while the table is small enough to stay in L1.
    let copies = if outcomes <= SLOTS { COUNT_COPIES } else { 1 };
    let mut counts = vec![0u32; outcomes * copies];
    let mut state = stream.state(0);
    for i in 0..pairs / 2 {
        let [a, b] = two_pairs::<N>(&mut state, digits);
        let copy = 2 * i as usize;
        counts[a * copies + copy % copies] += 1;
        counts[b * copies + (copy + 1) % copies] += 1;
    }
    if pairs % 2 == 1 {
        // The first pair of two more.
        counts[two_pairs::<N>(&mut state, digits)[0] * copies] += 1;
    }
    Counts { copies, counts }
}

/// The outcomes of the next two pairs: `N` draws, 2`N` 32-bit uniforms.
#[inline(always)]
fn two_pairs<const N: usize>(state: &mut u64, digits: Digits) -> [usize; 2] {
    let draws: [u64; N] = std::array::from_fn(|_| {
        let r = output(*state);
        *state = state.wrapping_add(STATE_STEP);
        r
    });
    let uniform = |k: usize| (draws[k / 2] >> (32 * (k % 2))) as u32;
    let outcome =
        |steps: std::ops::Range<usize>| steps.fold(0, |o, k| 3 * o + digits.of(uniform(k)));
    [outcome(0..N), outcome(N..2 * N)]
}

/// The outcome digit of a step: up + 2·(mirror up), minus 1 when p > 1/2
/// so that the three possible values are 0, 1 and 2.
#[derive(Clone, Copy)]
struct Digits {
    threshold: u64,
    offset: usize,
}

impl Digits {
    fn new(threshold: u64) -> Self {
        Self {
            threshold,
            offset: usize::from(threshold > 1 << 31),
        }
    }

    #[inline(always)]
    fn of(self, x: u32) -> usize {
        let up = |x: u32| usize::from(u64::from(x) < self.threshold);
        up(x) + 2 * up(!x) - self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;

    /// The sums of pairs walked one by one, each from its own uniforms.
    fn one_by_one(model: &Model, uniforms: impl Iterator<Item = Vec<u32>>) -> ChunkSums {
        let threshold = step_threshold(model.p);
        let factors = (model.up.to_bits(), model.down.to_bits());
        let mut s = ChunkSums::default();
        for pair in uniforms {
            let (mut spot, mut sum) = ([1.0f64; 2], [1.0f64; 2]);
            for &x in &pair {
                step(x, threshold, factors, &mut spot[0], &mut sum[0]);
                step(!x, threshold, factors, &mut spot[1], &mut sum[1]);
            }
            let (y1, y2) = (model.payoff(sum[0]), model.payoff(sum[1]));
            let y = 0.5 * (y1 + y2);
            s.y += y;
            s.yy += y * y;
            s.pp += y1 * y1 + y2 * y2;
        }
        s
    }

    fn halves(r: u64) -> [u32; 2] {
        [r as u32, (r >> 32) as u32]
    }

    fn model(interest: f64, periods: u32) -> Model {
        Model::new(&Spec {
            interest,
            periods,
            ..Spec::default()
        })
    }

    /// Counting gives the sums of walking the same pairs one by one, up to
    /// the order of additions. p at the defaults, above 1/2 and near 0.
    #[test]
    fn counted_pairs_match_pairs_walked_one_by_one() {
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
            let stream = Stream::new(9, 3);
            let pairs = 1001;
            let counted = counted_pairs(&model, stream, pairs);
            // Pair k reads the 32-bit uniforms k·n .. (k + 1)·n, in order.
            let uniforms: Vec<u32> = (0..pairs.div_ceil(2) * u64::from(n))
                .flat_map(|i| halves(stream.at(i)))
                .collect();
            let chunks = uniforms.chunks(n as usize).take(pairs as usize);
            let want = one_by_one(&model, chunks.map(<[u32]>::to_vec));
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
            for (got, want) in [
                (counted.y, want.y),
                (counted.yy, want.yy),
                (counted.pp, want.pp),
            ] {
                assert!(close(got, want), "{interest} {n}: {got} vs {want}");
            }
        }
    }

    /// Walking pairs side by side gives the bits of walking them one by one.
    #[test]
    fn walked_pairs_match_pairs_walked_one_by_one() {
        for (interest, n) in [(1.08, 9), (1.3, 10), (0.81, 20), (1.08, 33)] {
            let model = model(interest, n);
            let stream = Stream::new(4, 1);
            for pairs in [1, 6, 1001] {
                let walked = walked_pairs(&model, stream, pairs);
                // Pair j reads draws j·⌈n/2⌉ .. (j + 1)·⌈n/2⌉.
                let draws = u64::from(n.div_ceil(2));
                let uniforms = (0..pairs).map(|j| {
                    let pair = (0..draws).flat_map(|d| halves(stream.at(j * draws + d)));
                    pair.take(n as usize).collect()
                });
                let want = one_by_one(&model, uniforms);
                for (got, want) in [
                    (walked.y, want.y),
                    (walked.yy, want.yy),
                    (walked.pp, want.pp),
                ] {
                    assert_eq!(got.to_bits(), want.to_bits(), "{interest} {n} {pairs}");
                }
            }
        }
    }
}
