//! The Monte Carlo inner loops: one chunk of paths on one thread, summed in
//! the fixed order of the chunk's paths.

use crate::blocks::{BlockPlan, BlockTable, SLOTS};
use crate::model::{Model, call_delta, put_delta};
use crate::rng::{STATE_STEP, Stream, output};
use crate::spec::OptionKind;

/// Floating-point sums over one chunk's samples. `y` is the (undiscounted,
/// path-sum unit) payoff; `a` the arithmetic control (path sum minus its
/// mean); `g` the geometric control; `pp` the sum of squares of single-path
/// payoffs when samples are antithetic pairs; `d` the pathwise delta (see
/// `Model::delta`), summed only when the spec asks for delta.
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
    pub(crate) d: f64,
    pub(crate) dd: f64,
    pub(crate) da: f64,
    pub(crate) dg: f64,
}

/// Paths simulated side by side: independent dependency chains the CPU
/// can overlap (a lone path is a chain of dependent loads and multiplies).
pub(crate) const LANES: usize = 4;

/// The state of `LANES` paths in flight.
#[derive(Clone, Copy)]
struct Lanes {
    /// Weyl state of each lane's next draw.
    draw: [u64; LANES],
    spot: [f64; LANES],
    sum: [f64; LANES],
    /// W = Σ_i U_i (U_i = ups among the first i steps) of the blocks so
    /// far, each up counted once for every step left in the path, so the
    /// geometric control needs no running count of ups.
    weight: [u32; LANES],
}

impl Lanes {
    /// Paths `first ..` of the stream; path j's draws start at j·blocks.
    fn start(stream: Stream, first: u64, blocks: u64) -> Self {
        Self {
            draw: std::array::from_fn(|l| stream.state((first + l as u64) * blocks)),
            spot: [1.0; LANES],
            sum: [1.0; LANES],
            weight: [0; LANES],
        }
    }

    /// Advances every lane by one block of `table`, followed by `rest`
    /// more steps: an up at step i counts in U_i .. U_n, so the block adds
    /// its own weight plus its ups times `rest` to W.
    #[inline(always)]
    fn step<const GEO: bool>(&mut self, table: &BlockTable, rest: u32) {
        self.step_weighted::<GEO>(table, |pattern| {
            let packed = table.ups[pattern];
            rest * (packed & 0xffff) + (packed >> 16)
        });
    }

    /// Advances every lane by one block of `table`, whose pattern adds
    /// `weight(pattern)` to W.
    #[inline(always)]
    fn step_weighted<const GEO: bool>(
        &mut self,
        table: &BlockTable,
        weight: impl Fn(usize) -> u32,
    ) {
        for l in 0..LANES {
            let pattern = table.draw(output(self.draw[l]));
            self.draw[l] = self.draw[l].wrapping_add(STATE_STEP);
            let map = table.patterns[pattern];
            self.sum[l] += self.spot[l] * map.gain;
            self.spot[l] *= map.growth;
            if GEO {
                self.weight[l] += weight(pattern);
            }
        }
    }

    /// Advances every lane by a whole path of `B` blocks (2 ..=
    /// `MAX_FIXED_BLOCKS`), block b drawn from `tables[b]` and adding
    /// `weights[b][pattern]` to W (the integer `step` adds), without the
    /// loops of `walk`: the same operations.
    #[inline(always)]
    fn walk_fixed<const GEO: bool, const B: usize>(
        &mut self,
        tables: &[&BlockTable; B],
        weights: &[&[u32; SLOTS]; B],
    ) {
        for (table, weights) in tables.iter().zip(weights) {
            self.step_weighted::<GEO>(table, |pattern| weights[pattern]);
        }
    }

    #[inline(always)]
    fn walk<const GEO: bool>(&mut self, plan: &BlockPlan) {
        let mut rest = plan.long.steps * plan.long_count;
        if let Some(short) = &plan.short {
            rest += short.steps * plan.short_count;
        }
        for _ in 0..plan.long_count {
            rest -= plan.long.steps;
            self.step::<GEO>(&plan.long, rest);
        }
        if let Some(short) = &plan.short {
            for _ in 0..plan.short_count {
                rest -= short.steps;
                self.step::<GEO>(short, rest);
            }
        }
    }
}

/// The sums of the walked paths, one per lane (lane l sums paths l,
/// l + `LANES`, …), laid out field by field so a group of lanes is added
/// with vector operations.
#[derive(Clone, Copy, Default)]
struct LaneSums {
    y: [f64; LANES],
    yy: [f64; LANES],
    a: [f64; LANES],
    aa: [f64; LANES],
    ya: [f64; LANES],
    g: [f64; LANES],
    gg: [f64; LANES],
    yg: [f64; LANES],
    d: [f64; LANES],
    dd: [f64; LANES],
    da: [f64; LANES],
    dg: [f64; LANES],
}

impl LaneSums {
    /// Adds one path to every lane: path sums `sum`, geometric controls `g`.
    /// Each lane's sums take the operations of `ChunkSums::add_path`, in
    /// the same order, so the bits are those of adding the paths one by one.
    #[inline(always)]
    #[expect(
        clippy::needless_range_loop,
        reason = "`l` indexes several per-lane arrays; an iterator chain over them reads worse"
    )]
    fn add_paths<const ARITH: bool, const GEO: bool, const PUT: bool, const DELTA: bool>(
        &mut self,
        model: &Model,
        sum: &[f64; LANES],
        g: &[f64; LANES],
    ) {
        let y: [f64; LANES] = std::array::from_fn(|l| {
            // `model.payoff`, with the option kind resolved outside the loop.
            if PUT {
                (model.strike_sum - sum[l]).max(0.0)
            } else {
                (sum[l] - model.strike_sum).max(0.0)
            }
        });
        for l in 0..LANES {
            self.y[l] += y[l];
            self.yy[l] += y[l] * y[l];
        }
        if ARITH {
            for l in 0..LANES {
                let a = sum[l] - model.mean_sum;
                self.a[l] += a;
                self.aa[l] += a * a;
                self.ya[l] += y[l] * a;
            }
        }
        if GEO {
            for l in 0..LANES {
                self.g[l] += g[l];
                self.gg[l] += g[l] * g[l];
                self.yg[l] += y[l] * g[l];
            }
        }
        if DELTA {
            let d: [f64; LANES] = std::array::from_fn(|l| {
                if PUT {
                    put_delta(sum[l], model.strike_sum)
                } else {
                    call_delta(sum[l], model.strike_sum)
                }
            });
            for l in 0..LANES {
                self.d[l] += d[l];
                self.dd[l] += d[l] * d[l];
            }
            if ARITH {
                for l in 0..LANES {
                    self.da[l] += d[l] * (sum[l] - model.mean_sum);
                }
            }
            if GEO {
                for l in 0..LANES {
                    self.dg[l] += d[l] * g[l];
                }
            }
        }
    }

    /// Lane `l`'s sums.
    fn lane(&self, l: usize) -> ChunkSums {
        ChunkSums {
            y: self.y[l],
            yy: self.yy[l],
            a: self.a[l],
            aa: self.aa[l],
            ya: self.ya[l],
            g: self.g[l],
            gg: self.gg[l],
            yg: self.yg[l],
            pp: 0.0,
            d: self.d[l],
            dd: self.dd[l],
            da: self.da[l],
            dg: self.dg[l],
        }
    }
}

impl ChunkSums {
    #[inline(always)]
    fn add_path<const ARITH: bool, const GEO: bool, const DELTA: bool>(
        &mut self,
        model: &Model,
        sum: f64,
        g: f64,
    ) {
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
        if DELTA {
            let d = model.delta(sum);
            self.d += d;
            self.dd += d * d;
            if ARITH {
                self.da += d * (sum - model.mean_sum);
            }
            if GEO {
                self.dg += d * g;
            }
        }
    }

    /// Adds `count` paths of path sum `sum` and geometric control `g`.
    #[inline(always)]
    fn add_counted<const ARITH: bool, const GEO: bool, const DELTA: bool>(
        &mut self,
        model: &Model,
        count: u32,
        sum: f64,
        g: f64,
    ) {
        let c = f64::from(count);
        let y = model.payoff(sum);
        self.y += c * y;
        self.yy += c * (y * y);
        if ARITH {
            let a = sum - model.mean_sum;
            self.a += c * a;
            self.aa += c * (a * a);
            self.ya += c * (y * a);
        }
        if GEO {
            self.g += c * g;
            self.gg += c * (g * g);
            self.yg += c * (y * g);
        }
        if DELTA {
            let d = model.delta(sum);
            self.d += c * d;
            self.dd += c * (d * d);
            if ARITH {
                self.da += c * (d * (sum - model.mean_sum));
            }
            if GEO {
                self.dg += c * (d * g);
            }
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
        self.d += o.d;
        self.dd += o.dd;
        self.da += o.da;
        self.dg += o.dg;
    }
}

/// Simulates `paths` paths block by block, with the arithmetic control
/// (`ARITH`), the geometric control (`GEO`, table `geo`) and the pathwise
/// delta (`DELTA`) when asked; without `DELTA` the loops are those of a
/// kernel that knows no delta.
/// Path j reads draws j·B .. j·B + B of the stream (B blocks per path);
/// lane l sums paths l, l + LANES, …, and the lanes are added in order, so
/// the chunk's sums are a fixed function of the chunk.
pub(crate) fn block_paths<const ARITH: bool, const GEO: bool, const DELTA: bool>(
    model: &Model,
    plan: &BlockPlan,
    geo: &[f64],
    stream: Stream,
    paths: u64,
) -> ChunkSums {
    if plan.group > 0 {
        grouped_paths::<ARITH, GEO, DELTA>(model, plan, geo, stream, paths)
    } else if model.periods <= MAX_COUNTED_TWO_BLOCK_PERIODS {
        two_block_paths::<ARITH, GEO, DELTA>(model, plan, geo, stream, paths)
    } else {
        walked_paths::<ARITH, GEO, DELTA>(model, plan, geo, stream, paths)
    }
}

/// Paths walked block by block, `LANES` side by side.
fn walked_paths<const ARITH: bool, const GEO: bool, const DELTA: bool>(
    model: &Model,
    plan: &BlockPlan,
    geo: &[f64],
    stream: Stream,
    paths: u64,
) -> ChunkSums {
    // One loop per option kind and for paths of two, three and four
    // blocks: the payoff's branch and the block loops stay out of the path
    // loop.
    let put = model.option == OptionKind::Put;
    match (put, plan.long_count + plan.short_count) {
        (false, 2) => walked::<ARITH, GEO, DELTA, false, 2>(model, plan, geo, stream, paths),
        (true, 2) => walked::<ARITH, GEO, DELTA, true, 2>(model, plan, geo, stream, paths),
        (false, 3) => walked::<ARITH, GEO, DELTA, false, 3>(model, plan, geo, stream, paths),
        (true, 3) => walked::<ARITH, GEO, DELTA, true, 3>(model, plan, geo, stream, paths),
        (false, 4) => walked::<ARITH, GEO, DELTA, false, 4>(model, plan, geo, stream, paths),
        (true, 4) => walked::<ARITH, GEO, DELTA, true, 4>(model, plan, geo, stream, paths),
        (false, _) => walked::<ARITH, GEO, DELTA, false, 0>(model, plan, geo, stream, paths),
        (true, _) => walked::<ARITH, GEO, DELTA, true, 0>(model, plan, geo, stream, paths),
    }
}

/// The walk of `walked_paths`: paths of `B` blocks (2 ..=
/// `MAX_FIXED_BLOCKS`) take the unrolled walk, `B` = 0 the block loops.
fn walked<
    const ARITH: bool,
    const GEO: bool,
    const DELTA: bool,
    const PUT: bool,
    const B: usize,
>(
    model: &Model,
    plan: &BlockPlan,
    geo: &[f64],
    stream: Stream,
    paths: u64,
) -> ChunkSums {
    let blocks = u64::from(plan.long_count + plan.short_count);
    // The plan's tables of each block, when it has `B` blocks (any table
    // fills the arrays otherwise; they are not used).
    let fixed = B > 0 && plan.weights.len() == B;
    let tables: [&BlockTable; B] = std::array::from_fn(|b| plan.table(b as u32));
    let weights: [&[u32; SLOTS]; B] =
        std::array::from_fn(|b| plan.weights.get(b).map_or(&*plan.long.ups, |w| &**w));
    let walk = |lanes: &mut Lanes| {
        if fixed {
            lanes.walk_fixed::<GEO, B>(&tables, &weights);
        } else {
            lanes.walk::<GEO>(plan);
        }
    };
    // W never exceeds the table's last index; clamping instead of
    // checking keeps a branch out of the loop.
    let geo: &[f64] = if geo.is_empty() { &[0.0] } else { geo };
    let last = geo.len() - 1;
    let control = |lanes: &Lanes| -> [f64; LANES] {
        std::array::from_fn(|l| {
            if GEO {
                geo[(lanes.weight[l] as usize).min(last)]
            } else {
                0.0
            }
        })
    };
    let mut sums = LaneSums::default();
    let full = paths - paths % LANES as u64;
    let mut first = 0u64;
    while first < full {
        let mut lanes = Lanes::start(stream, first, blocks);
        walk(&mut lanes);
        sums.add_paths::<ARITH, GEO, PUT, DELTA>(model, &lanes.sum, &control(&lanes));
        first += LANES as u64;
    }
    let mut lane_sums: [ChunkSums; LANES] = std::array::from_fn(|l| sums.lane(l));
    if full < paths {
        // A last, partial group: its extra lanes are simulated but not
        // counted.
        let mut lanes = Lanes::start(stream, full, blocks);
        walk(&mut lanes);
        let g = control(&lanes);
        for l in 0..(paths - full) as usize {
            lane_sums[l].add_path::<ARITH, GEO, DELTA>(model, lanes.sum[l], g[l]);
        }
    }
    let mut total = ChunkSums::default();
    for lane in &lane_sums {
        total.add(lane);
    }
    total
}

/// Copies of the pattern counts: consecutive paths increment different
/// copies, so a run of equal patterns (common when there are only a few)
/// does not chain every increment through the previous one's store.
pub(crate) const COUNT_COPIES: usize = 4;

/// Paths of a single block (at most `MAX_BLOCK_STEPS` periods), drawn
/// `plan.group` at a time: group g of the chunk reads draw g. Such a path is
/// one of the 2^n patterns and every sum is a function of the pattern, so
/// the chunk's patterns are counted and the sums formed once per pattern, in
/// pattern order. Per draw: one alias look-up and one increment; per-path
/// bookkeeping would otherwise dominate short paths (several ns per path
/// against a budget of 1 ns per path-step).
#[expect(
    clippy::needless_range_loop,
    reason = "`copy` indexes the inner array of the counts; the pattern indexes the outer"
)]
fn grouped_paths<const ARITH: bool, const GEO: bool, const DELTA: bool>(
    model: &Model,
    plan: &BlockPlan,
    geo: &[f64],
    stream: Stream,
    paths: u64,
) -> ChunkSums {
    let table = &plan.long;
    let joint_table = plan.joint.as_ref().unwrap_or(table);
    let (n, group) = (table.steps, u64::from(plan.group));
    let mut state = stream.state(0);
    let mut draw = || {
        let pattern = joint_table.draw(output(state));
        state = state.wrapping_add(STATE_STEP);
        pattern
    };
    let mut joint_counts = [[0u32; COUNT_COPIES]; SLOTS];
    let groups = paths / group;
    for _ in 0..groups / COUNT_COPIES as u64 {
        for copy in 0..COUNT_COPIES {
            joint_counts[draw()][copy] += 1;
        }
    }
    for copy in 0..(groups % COUNT_COPIES as u64) as usize {
        joint_counts[draw()][copy] += 1;
    }
    // Split joint patterns into the patterns of their paths.
    let mask = (1usize << n) - 1;
    let mut counts = [0u32; SLOTS];
    let mut add = |joint: usize, paths: u64, count: u32| {
        for i in 0..paths as u32 {
            counts[(joint >> (i * n)) & mask] += count;
        }
    };
    for (joint, copies) in joint_counts.iter().enumerate().take(1 << joint_table.steps) {
        let count: u32 = copies.iter().sum();
        if count > 0 {
            add(joint, group, count);
        }
    }
    // A last, partial group: the first paths of one more draw.
    if !paths.is_multiple_of(group) {
        add(draw(), paths % group, 1);
    }

    let mut s = ChunkSums::default();
    for (pattern, &count) in counts.iter().enumerate().take(1 << n) {
        if count == 0 {
            continue;
        }
        // As the block loop computes it: spot 1, sum 1, then sum += spot·gain.
        let sum = 1.0 + table.patterns[pattern].gain;
        let weight = (table.ups[pattern] >> 16) as usize;
        s.add_counted::<ARITH, GEO, DELTA>(
            model,
            count,
            sum,
            geo.get(weight).copied().unwrap_or(0.0),
        );
    }
    s
}

/// Longest paths counted as two blocks: 2^15 patterns (128 KiB of counts;
/// at 16 the counts and the per-pattern pass cost more than they save).
/// Between 11 and 20 periods a path is two blocks, so the per-path work of
/// the controls (payoff, both controls, eight sums) weighs on few steps;
/// counting replaces it with one increment, as for one-block paths.
const MAX_COUNTED_TWO_BLOCK_PERIODS: u32 = 15;

/// Paths of two blocks (11 ..= `MAX_COUNTED_TWO_BLOCK_PERIODS` periods).
/// Path j reads draws 2j and 2j + 1, as a walk does; its pattern is the
/// pair of block patterns, counted, and the sums are formed once per
/// pattern, in pattern order, from the values a walk would compute.
fn two_block_paths<const ARITH: bool, const GEO: bool, const DELTA: bool>(
    model: &Model,
    plan: &BlockPlan,
    geo: &[f64],
    stream: Stream,
    paths: u64,
) -> ChunkSums {
    let first = &plan.long;
    let second = plan.short.as_ref().unwrap_or(&plan.long);
    debug_assert_eq!(plan.long_count + plan.short_count, 2);
    let shift = first.steps;
    let mut counts = vec![0u32; 1 << (first.steps + second.steps)];
    let mut state = stream.state(0);
    for _ in 0..paths {
        let a = first.draw(output(state));
        state = state.wrapping_add(STATE_STEP);
        let b = second.draw(output(state));
        state = state.wrapping_add(STATE_STEP);
        counts[a | b << shift] += 1;
    }
    let mut s = ChunkSums::default();
    for (pattern, &count) in counts.iter().enumerate() {
        if count == 0 {
            continue;
        }
        let (a, b) = (pattern & ((1 << shift) - 1), pattern >> shift);
        let (pa, pb) = (first.patterns[a], second.patterns[b]);
        // As the block loop computes it: spot 1, sum 1, then per block
        // sum += spot·gain and spot ·= growth.
        let sum = (1.0 + pa.gain) + pa.growth * pb.gain;
        let (ua, ub) = (first.ups[a], second.ups[b]);
        let weight = ((ua >> 16) + second.steps * (ua & 0xffff) + (ub >> 16)) as usize;
        s.add_counted::<ARITH, GEO, DELTA>(
            model,
            count,
            sum,
            geo.get(weight).copied().unwrap_or(0.0),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Spec;
    use crate::geometric::GeometricControl;

    /// Counting two-block paths gives the sums of walking the same paths,
    /// up to the order of additions: same draws, same per-path values.
    /// Each accumulator of `got` with the same one of `want`.
    fn pairs(got: &ChunkSums, want: &ChunkSums) -> [(f64, f64); 12] {
        [
            (got.y, want.y),
            (got.yy, want.yy),
            (got.a, want.a),
            (got.aa, want.aa),
            (got.ya, want.ya),
            (got.g, want.g),
            (got.gg, want.gg),
            (got.yg, want.yg),
            (got.d, want.d),
            (got.dd, want.dd),
            (got.da, want.da),
            (got.dg, want.dg),
        ]
    }

    #[test]
    fn two_block_paths_match_walked_paths() {
        for (interest, n) in [(1.08, 11), (1.3, 12), (0.81, 13), (1.08, 15)] {
            let model = Model::new(&Spec {
                interest,
                periods: n,
                ..Spec::default()
            });
            let plan = BlockPlan::new(&model);
            let geo = GeometricControl::new(&model).payoff;
            let stream = Stream::new(6, 4);
            for paths in [1, 7, 1003] {
                let got = two_block_paths::<true, true, true>(&model, &plan, &geo, stream, paths);
                let want = walked_paths::<true, true, true>(&model, &plan, &geo, stream, paths);
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
                for (a, b) in pairs(&got, &want) {
                    assert!(close(a, b), "{interest} {n} {paths}: {a} vs {b}");
                }
            }
        }
    }

    /// Walking lanes with vector sums and W accumulated per block gives
    /// the bits of walking the same paths one by one, each lane summing
    /// paths l, l + LANES, … and the lanes added in order: calls and puts,
    /// two, three and four blocks, full and partial last groups.
    #[test]
    fn walked_paths_match_paths_walked_one_by_one() {
        use crate::spec::OptionKind;
        for (option, n) in [
            (OptionKind::Call, 17),
            (OptionKind::Put, 16),
            (OptionKind::Call, 23),
            (OptionKind::Put, 33),
        ] {
            let model = Model::new(&Spec {
                option,
                periods: n,
                ..Spec::default()
            });
            let plan = BlockPlan::new(&model);
            let geo = GeometricControl::new(&model).payoff;
            let stream = Stream::new(3, 9);
            let blocks = u64::from(plan.long_count + plan.short_count);
            let tables: Vec<&BlockTable> =
                std::iter::repeat_n(&plan.long, plan.long_count as usize)
                    .chain(std::iter::repeat_n(
                        plan.short.as_ref().unwrap_or(&plan.long),
                        plan.short_count as usize,
                    ))
                    .collect();
            for paths in [1, 6, 1003] {
                let got = walked_paths::<true, true, true>(&model, &plan, &geo, stream, paths);
                let mut lanes = [ChunkSums::default(); LANES];
                for j in 0..paths {
                    let (mut spot, mut sum, mut ups, mut weight) = (1.0, 1.0, 0u32, 0u32);
                    for (b, table) in tables.iter().enumerate() {
                        let pattern = table.draw(stream.at(j * blocks + b as u64));
                        sum += spot * table.patterns[pattern].gain;
                        spot *= table.patterns[pattern].growth;
                        let packed = table.ups[pattern];
                        weight += table.steps * ups + (packed >> 16);
                        ups += packed & 0xffff;
                    }
                    lanes[j as usize % LANES].add_path::<true, true, true>(
                        &model,
                        sum,
                        geo[weight as usize],
                    );
                }
                let mut want = ChunkSums::default();
                for lane in &lanes {
                    want.add(lane);
                }
                for (a, b) in pairs(&got, &want) {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "{option:?} {n} {paths}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// Counting grouped paths gives the sums of taking the same paths one
    /// by one (path i of group g: bits i·n .. (i + 1)·n of draw g), up to
    /// the order of additions.
    #[test]
    fn grouped_paths_match_paths_taken_one_by_one() {
        for (interest, n) in [(1.08, 1), (1.08, 3), (1.3, 4), (0.81, 7), (1.08, 10)] {
            let model = Model::new(&Spec {
                interest,
                periods: n,
                ..Spec::default()
            });
            let plan = BlockPlan::new(&model);
            let geo = GeometricControl::new(&model).payoff;
            let stream = Stream::new(5, 2);
            for paths in [1, 7, 1003] {
                let got = grouped_paths::<true, true, true>(&model, &plan, &geo, stream, paths);
                let joint = plan.joint.as_ref().unwrap_or(&plan.long);
                let group = u64::from(plan.group);
                let mut want = ChunkSums::default();
                for j in 0..paths {
                    let pattern = joint.draw(stream.at(j / group)) >> ((j % group) as u32 * n)
                        & ((1 << n) - 1);
                    let sum = 1.0 + plan.long.patterns[pattern].gain;
                    let g = geo[(plan.long.ups[pattern] >> 16) as usize];
                    want.add_path::<true, true, true>(&model, sum, g);
                }
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1.0);
                for (a, b) in pairs(&got, &want) {
                    assert!(close(a, b), "{interest} {n} {paths}: {a} vs {b}");
                }
            }
        }
    }
}
