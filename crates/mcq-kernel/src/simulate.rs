//! The Monte Carlo inner loops: one chunk of paths on one thread, summed in
//! the fixed order of the chunk's paths.

use crate::blocks::{BlockPlan, BlockTable};
use crate::model::Model;
use crate::rng::Stream;

/// Floating-point sums over one chunk's samples. `y` is the (undiscounted,
/// path-sum unit) payoff; `a` the arithmetic control (path sum minus its
/// mean); `g` the geometric control; `pp` the sum of squares of single-path
/// payoffs when samples are antithetic pairs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ChunkSums {
    pub(crate) y: f64,
    pub(crate) yy: f64,
    pub(crate) a: f64,
    pub(crate) aa: f64,
    pub(crate) ya: f64,
    pub(crate) g: f64,
    pub(crate) gg: f64,
    pub(crate) yg: f64,
    pub(crate) pp: f64,
}

/// Advances (spot, sum, k, w) through `count` blocks of `table`.
#[inline(always)]
fn walk<const GEO: bool>(
    table: &BlockTable,
    count: u32,
    stream: Stream,
    index: &mut u64,
    state: &mut (f64, f64, u32, u32),
) {
    for _ in 0..count {
        let pattern = table.draw(stream.at(*index));
        *index += 1;
        let map = table.patterns[pattern];
        state.1 += state.0 * map.gain;
        state.0 *= map.growth;
        if GEO {
            let packed = table.ups[pattern];
            state.3 += table.steps * state.2 + (packed >> 16);
            state.2 += packed & 0xffff;
        }
    }
}

/// Simulates `paths` paths block by block, with the arithmetic control
/// (`ARITH`) and the geometric control (`GEO`, table `geo`) when asked.
pub(crate) fn block_paths<const ARITH: bool, const GEO: bool>(
    model: &Model,
    plan: &BlockPlan,
    geo: &[f64],
    stream: Stream,
    paths: u64,
) -> ChunkSums {
    let mut s = ChunkSums::default();
    let mut index = 0u64;
    for _ in 0..paths {
        let mut state = (1.0f64, 1.0f64, 0u32, 0u32);
        walk::<GEO>(&plan.long, plan.long_count, stream, &mut index, &mut state);
        if let Some(short) = &plan.short {
            walk::<GEO>(short, plan.short_count, stream, &mut index, &mut state);
        }
        let sum = state.1;
        let y = model.payoff(sum);
        s.y += y;
        s.yy += y * y;
        if ARITH {
            let a = sum - model.mean_sum;
            s.a += a;
            s.aa += a * a;
            s.ya += y * a;
        }
        if GEO {
            let g = geo.get(state.3 as usize).copied().unwrap_or(0.0);
            s.g += g;
            s.gg += g * g;
            s.yg += y * g;
        }
    }
    s
}

/// The 32-bit threshold of a Bernoulli(p) step: up when a 32-bit draw is
/// below it.
pub(crate) fn step_threshold(p: f64) -> u64 {
    ((p * 4_294_967_296.0).round() as u64).min(1 << 32)
}

/// Simulates `pairs` antithetic pairs with one 32-bit draw per step: a
/// path goes up when the draw x is below the threshold, its mirror when
/// !x (that is 2^32 − 1 − x, the reflected uniform) is.
pub(crate) fn antithetic_pairs(model: &Model, stream: Stream, pairs: u64) -> ChunkSums {
    let threshold = step_threshold(model.p);
    let (up, down) = (model.up, model.down);
    let n = model.periods;
    let mut s = ChunkSums::default();
    let mut index = 0u64;
    let step = |x: u32, spot: &mut f64, sum: &mut f64| {
        *spot *= if u64::from(x) < threshold { up } else { down };
        *sum += *spot;
    };
    for _ in 0..pairs {
        let (mut s1, mut sum1, mut s2, mut sum2) = (1.0f64, 1.0f64, 1.0f64, 1.0f64);
        // Two steps per 64-bit draw.
        for _ in 0..n / 2 {
            let r = stream.at(index);
            index += 1;
            for x in [r as u32, (r >> 32) as u32] {
                step(x, &mut s1, &mut sum1);
                step(!x, &mut s2, &mut sum2);
            }
        }
        if n % 2 == 1 {
            let x = stream.at(index) as u32;
            index += 1;
            step(x, &mut s1, &mut sum1);
            step(!x, &mut s2, &mut sum2);
        }
        let (y1, y2) = (model.payoff(sum1), model.payoff(sum2));
        let y = 0.5 * (y1 + y2);
        s.y += y;
        s.yy += y * y;
        s.pp += y1 * y1 + y2 * y2;
    }
    s
}
