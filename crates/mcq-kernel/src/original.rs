//! A faithful port of the original sample's loop, kept only as the baseline
//! of `mcq bench kernel`: one uniform double per step from a standard
//! sequential generator, and a branch on it. It is neither reproducible
//! across threads nor fast; the kernel replaces it.

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
        Self { s: [next(), next(), next(), next()] }
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

    /// A uniform double in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// The original estimator: `runs` paths, one uniform per step, a branch on
/// it, the average including the start, the mean payoff discounted.
/// Returns the price (no error estimate, as in the original).
#[expect(clippy::too_many_arguments, reason = "mirrors the original sample's signature")]
pub fn original_price(
    initial: f64,
    exercise: f64,
    up: f64,
    down: f64,
    interest: f64,
    periods: u32,
    runs: u64,
    call: bool,
    rng: &mut Xoshiro256,
) -> f64 {
    let p = (interest - down) / (up - down);
    let mut total = 0.0;
    for _ in 0..runs {
        let mut price = initial;
        let mut sum = initial;
        for _ in 0..periods {
            if rng.next_f64() < p {
                price *= up;
            } else {
                price *= down;
            }
            sum += price;
        }
        let average = sum / f64::from(periods + 1);
        total += if call { (average - exercise).max(0.0) } else { (exercise - average).max(0.0) };
    }
    total / runs as f64 / interest.powi(periods as i32)
}
