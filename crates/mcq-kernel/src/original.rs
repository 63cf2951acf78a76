//! A faithful port of the original sample's loop, kept only as the baseline
//! of `mcq bench kernel`: one uniform double per step from a standard
//! sequential generator, and a branch on it. It is neither reproducible
//! across threads nor fast; the kernel replaces it.
//!
//! Two generators: [`NetRandom`], the algorithm of .NET's `System.Random`
//! that the original C# sample called (the faithful baseline), and
//! [`Xoshiro256`], a fast modern generator, to show how much of the cost is
//! the generator and how much the mispredicted branch.
//!
//! The branch is kept a conditional jump on purpose (see
//! [`Sample::price_net`]); [`Sample::price_net_select`] is the same loop
//! with the branch replaced by a select, which is what LLVM makes of a
//! plain `if`/`else` — not the original, shown only to isolate what the
//! mispredicted branch costs.

/// A source of uniform doubles in [0, 1).
pub trait Uniform {
    /// The next uniform double.
    fn next_f64(&mut self) -> f64;
}

/// The subtractive lagged-Fibonacci generator (Knuth's ran3, as in
/// Numerical Recipes) behind .NET Framework's `System.Random`: 55 words of
/// state, `NextDouble` = next 31-bit sample / (2^31 − 1).
#[derive(Debug, Clone)]
pub struct NetRandom {
    state: [i32; 56],
    next: usize,
    next_p: usize,
}

impl NetRandom {
    const MBIG: i32 = i32::MAX;
    const MSEED: i32 = 161_803_398;

    /// The generator `new Random(seed)` would create.
    pub fn new(seed: i32) -> Self {
        let mut state = [0i32; 56];
        let subtraction = if seed == i32::MIN {
            i32::MAX
        } else {
            seed.abs()
        };
        let mut mj = Self::MSEED - subtraction;
        state[55] = mj;
        let mut mk = 1i32;
        for i in 1..55 {
            let ii = (21 * i) % 55;
            state[ii] = mk;
            mk = mj - mk;
            if mk < 0 {
                mk += Self::MBIG;
            }
            mj = state[ii];
        }
        for _ in 1..5 {
            for i in 1..56 {
                state[i] = state[i].wrapping_sub(state[1 + (i + 30) % 55]);
                if state[i] < 0 {
                    state[i] += Self::MBIG;
                }
            }
        }
        Self {
            state,
            next: 0,
            next_p: 21,
        }
    }

    fn sample(&mut self) -> i32 {
        self.next = if self.next >= 55 { 1 } else { self.next + 1 };
        self.next_p = if self.next_p >= 55 {
            1
        } else {
            self.next_p + 1
        };
        let mut value = self.state[self.next] - self.state[self.next_p];
        if value == Self::MBIG {
            value -= 1;
        }
        if value < 0 {
            value += Self::MBIG;
        }
        self.state[self.next] = value;
        value
    }
}

impl Uniform for NetRandom {
    fn next_f64(&mut self) -> f64 {
        f64::from(self.sample()) * (1.0 / f64::from(Self::MBIG))
    }
}

/// xoshiro256++ (Blackman and Vigna), the generator behind `rand`'s
/// `SmallRng` on 64-bit targets: a typical "standard PRNG".
#[derive(Debug, Clone)]
pub struct Xoshiro256 {
    s: [u64; 4],
}

impl Xoshiro256 {
    /// A generator whose state is expanded from `seed` with SplitMix64.
    pub fn new(seed: u64) -> Self {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            crate::rng::mix64(z)
        };
        Self {
            s: [next(), next(), next(), next()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
}

impl Uniform for Xoshiro256 {
    /// A uniform double in [0, 1) with 53 random bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The inputs of one call of the original sample's pricing function.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Spot price S0.
    pub initial: f64,
    /// Strike K.
    pub exercise: f64,
    /// Up factor per period.
    pub up: f64,
    /// Down factor per period.
    pub down: f64,
    /// Gross interest factor per period.
    pub interest: f64,
    /// Steps per path.
    pub periods: u32,
    /// Paths.
    pub runs: u64,
    /// A call (else a put) on the arithmetic average.
    pub call: bool,
}

impl Sample {
    /// The original sample's defaults with `periods` and `runs`: a call with
    /// initial 30, exercise 30, up 1.4, down 0.8, interest 1.08.
    pub fn defaults(periods: u32, runs: u64) -> Self {
        Self {
            initial: crate::DEFAULT_INITIAL,
            exercise: crate::DEFAULT_EXERCISE,
            up: crate::DEFAULT_UP,
            down: crate::DEFAULT_DOWN,
            interest: crate::DEFAULT_INTEREST,
            periods,
            runs,
            call: true,
        }
    }

    /// The original loop with .NET's generator, seeded like
    /// `new Random(seed)`: the faithful baseline. The step is a conditional
    /// jump on the uniform, as .NET's JIT compiled the original `if`/`else`,
    /// so it is mispredicted on about half the steps, as it was there.
    ///
    /// Not generic on purpose: it is compiled here, with the kernel's
    /// optimisation level, whoever calls it.
    pub fn price_net(&self, rng: &mut NetRandom) -> f64 {
        self.price::<true>(rng)
    }

    /// [`Sample::price_net`] with the step's branch replaced by a
    /// branch-free select (compare and blend), the code LLVM emits for a
    /// plain `if`/`else` here. Not faithful: a reference that shows how much
    /// of the original loop's cost is the mispredicted branch.
    pub fn price_net_select(&self, rng: &mut NetRandom) -> f64 {
        self.price::<false>(rng)
    }

    /// The original loop, branch and all, with xoshiro256++ instead of
    /// .NET's generator (see [`Sample::price_net`]).
    pub fn price_xoshiro(&self, rng: &mut Xoshiro256) -> f64 {
        self.price::<true>(rng)
    }

    /// The original estimator: `runs` paths, one uniform per step, a branch
    /// on it (`BRANCH`; a select otherwise), the average including the
    /// start, the mean payoff discounted. Returns the price (no error
    /// estimate, as in the original).
    #[inline(always)]
    fn price<const BRANCH: bool>(&self, rng: &mut impl Uniform) -> f64 {
        let Self {
            initial,
            exercise,
            up,
            down,
            interest,
            periods,
            runs,
            call,
        } = *self;
        let p = (interest - down) / (up - down);
        let mut total = 0.0;
        for _ in 0..runs {
            let mut price = initial;
            let mut sum = initial;
            for _ in 0..periods {
                let u = rng.next_f64();
                if !BRANCH {
                    price *= std::hint::select_unpredictable(u < p, up, down);
                } else if u < p {
                    price *= up;
                } else {
                    // Keeps the if/else a conditional jump, as .NET's JIT
                    // compiled it: left alone, LLVM turns the two arms into
                    // a branch-free select (compare and blend), which never
                    // mispredicts and is not the loop being ported. An empty
                    // `black_box(())` is an inline-asm barrier with no
                    // instructions; LLVM may not execute it speculatively,
                    // so it cannot if-convert the arms. The disassembly
                    // shows `ucomisd` + `ja` on the uniform (docs/kernel.md).
                    std::hint::black_box(());
                    price *= down;
                }
                sum += price;
            }
            let average = sum / f64::from(periods + 1);
            total += if call {
                (average - exercise).max(0.0)
            } else {
                (exercise - average).max(0.0)
            };
        }
        total / runs as f64 / interest.powi(periods as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_generators_give_the_right_price_roughly() {
        // 20k paths: standard error about 0.0165 * sqrt(50) = 0.12.
        let exact = 9.530286028882;
        let sample = Sample::defaults(20, 20_000);
        let a = sample.price_net(&mut NetRandom::new(1));
        let b = sample.price_xoshiro(&mut Xoshiro256::new(1));
        assert!(
            (a - exact).abs() < 0.5 && (b - exact).abs() < 0.5,
            "{a} {b}"
        );
    }

    #[test]
    fn branch_and_select_compute_the_same_bits() {
        // p at the defaults, near 0 and near 1.
        for interest in [1.08, 0.8001, 1.3999] {
            let sample = Sample {
                interest,
                ..Sample::defaults(20, 5_000)
            };
            assert_eq!(
                sample.price_net(&mut NetRandom::new(3)).to_bits(),
                sample.price_net_select(&mut NetRandom::new(3)).to_bits(),
                "interest {interest}"
            );
        }
    }

    #[test]
    fn net_random_is_uniform() {
        let mut rng = NetRandom::new(42);
        let n = 100_000;
        let mean = (0..n).map(|_| rng.next_f64()).sum::<f64>() / f64::from(n);
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
    }
}
