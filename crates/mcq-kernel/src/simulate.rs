//! The Monte Carlo inner loops: one chunk of paths on one thread, summed in
//! the fixed order of the chunk's paths.

use crate::blocks::{BlockPlan, BlockTable};
use crate::model::Model;
use crate::rng::{STATE_STEP, Stream, output};

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

/// Paths simulated side by side: independent dependency chains the CPU
/// can overlap (a lone path is a chain of dependent loads and multiplies).
const LANES: usize = 4;

/// The state of `LANES` paths in flight.
#[derive(Clone, Copy)]
struct Lanes {
    /// Weyl state of each lane's next draw.
    draw: [u64; LANES],
    spot: [f64; LANES],
    sum: [f64; LANES],
    /// Up moves so far and W = Σ_i U_i, for the geometric control.
    ups: [u32; LANES],
    weight: [u32; LANES],
}

impl Lanes {
    /// Paths `first ..` of the stream; path j's draws start at j·blocks.
    fn start(stream: Stream, first: u64, blocks: u64) -> Self {
        Self {
            draw: std::array::from_fn(|l| stream.state((first + l as u64) * blocks)),
            spot: [1.0; LANES],
            sum: [1.0; LANES],
            ups: [0; LANES],
            weight: [0; LANES],
        }
    }

    /// Advances every lane by one block of `table`.
    #[inline(always)]
    fn step<const GEO: bool>(&mut self, table: &BlockTable) {
        for l in 0..LANES {
            let pattern = table.draw(output(self.draw[l]));
            self.draw[l] = self.draw[l].wrapping_add(STATE_STEP);
            let map = table.patterns[pattern];
            self.sum[l] += self.spot[l] * map.gain;
            self.spot[l] *= map.growth;
            if GEO {
                let packed = table.ups[pattern];
                self.weight[l] += table.steps * self.ups[l] + (packed >> 16);
                self.ups[l] += packed & 0xffff;
            }
        }
    }

    #[inline(always)]
    fn walk<const GEO: bool>(&mut self, plan: &BlockPlan) {
        for _ in 0..plan.long_count {
            self.step::<GEO>(&plan.long);
        }
        if let Some(short) = &plan.short {
            for _ in 0..plan.short_count {
                self.step::<GEO>(short);
            }
        }
    }
}

impl ChunkSums {
    #[inline(always)]
    fn add_path<const ARITH: bool, const GEO: bool>(&mut self, model: &Model, sum: f64, g: f64) {
        let y = model.payoff(sum);
        self.y += y;
        self.yy += y * y;
        if ARITH {
            let a = sum - model.mean_sum;
            self.a += a;
            self.aa += a * a;
            self.ya += y * a;
        }
        if GEO {
            self.g += g;
            self.gg += g * g;
            self.yg += y * g;
        }
    }

    fn add(&mut self, o: &ChunkSums) {
        self.y += o.y;
        self.yy += o.yy;
        self.a += o.a;
        self.aa += o.aa;
        self.ya += o.ya;
        self.g += o.g;
        self.gg += o.gg;
        self.yg += o.yg;
        self.pp += o.pp;
    }
}

/// Simulates `paths` paths block by block, with the arithmetic control
/// (`ARITH`) and the geometric control (`GEO`, table `geo`) when asked.
/// Path j reads draws j·B .. j·B + B of the stream (B blocks per path);
/// lane l sums paths l, l + LANES, …, and the lanes are added in order, so
/// the chunk's sums are a fixed function of the chunk.
#[expect(
    clippy::needless_range_loop,
    reason = "`l` indexes three parallel per-lane arrays; an iterator chain over them reads worse"
)]
pub(crate) fn block_paths<const ARITH: bool, const GEO: bool>(
    model: &Model,
    plan: &BlockPlan,
    geo: &[f64],
    stream: Stream,
    paths: u64,
) -> ChunkSums {
    let blocks = u64::from(plan.long_count + plan.short_count);
    let mut lanes_sums = [ChunkSums::default(); LANES];
    let mut first = 0u64;
    while first < paths {
        // The last group may be partial: its extra lanes are simulated
        // (cheaper than a separate loop) but not counted.
        let live = (paths - first).min(LANES as u64) as usize;
        let mut lanes = Lanes::start(stream, first, blocks);
        lanes.walk::<GEO>(plan);
        for l in 0..live {
            let g = if GEO {
                geo.get(lanes.weight[l] as usize).copied().unwrap_or(0.0)
            } else {
                0.0
            };
            lanes_sums[l].add_path::<ARITH, GEO>(model, lanes.sum[l], g);
        }
        first += LANES as u64;
    }
    let mut total = ChunkSums::default();
    for lane in &lanes_sums {
        total.add(lane);
    }
    total
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
    // A conditional move on the bit patterns, not a branch: the branch
    // would be mispredicted on about half the steps (and x86 has no
    // conditional move for float registers, so a float select branches).
    let (up, down) = (up.to_bits(), down.to_bits());
    let step = |x: u32, spot: &mut f64, sum: &mut f64| {
        *spot *= f64::from_bits(std::hint::select_unpredictable(
            u64::from(x) < threshold,
            up,
            down,
        ));
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
