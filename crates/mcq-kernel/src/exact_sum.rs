//! An exact accumulator for `f64` values: a wide fixed-point integer that
//! covers every finite double, so adding is integer addition — associative
//! and commutative to the bit.
//!
//! Chunk partials add their per-chunk floating-point sums here. Whatever the
//! order or grouping in which workers' partials are merged, the accumulated
//! integer is the same, and so is the `f64` read back from it.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Limbs of the two's-complement integer, least significant first.
const LIMBS: usize = 35;
/// Bit weight of limb 0, bit 0: `2^-1088` lies below the smallest subnormal
/// (`2^-1074`), and 35 limbs reach `2^1152`, leaving 128 bits of headroom
/// above `f64::MAX` for carries of up to 2^127 additions.
const LOW_EXP: i32 = -1088;

/// The exact sum of the `f64` values added to it.
///
/// Serialised as a compact string (`"-1f3ap-1024"`: sign, hexadecimal
/// magnitude, binary exponent) so that it survives JSON, which cannot carry
/// 64-bit integers faithfully.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ExactSum {
    limbs: [u64; LIMBS],
}

impl Default for ExactSum {
    fn default() -> Self {
        Self { limbs: [0; LIMBS] }
    }
}

impl fmt::Debug for ExactSum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ExactSum({} = {})", self.encode(), self.to_f64())
    }
}

impl ExactSum {
    /// Adds a finite `x` exactly. Non-finite values are ignored: the kernel
    /// never produces them (validation bounds every path value), and an
    /// accumulator must not be poisoned by one.
    pub fn add_f64(&mut self, x: f64) {
        if !x.is_finite() || x == 0.0 {
            return;
        }
        let bits = x.to_bits();
        let exp_field = ((bits >> 52) & 0x7ff) as i32;
        let frac = bits & ((1u64 << 52) - 1);
        // A double is mantissa * 2^(exp_field - 1075); subnormals have no
        // hidden bit and the exponent of the smallest normal.
        let (mantissa, exp) = if exp_field == 0 {
            (frac, -1074)
        } else {
            (frac | (1u64 << 52), exp_field - 1075)
        };
        let offset = (exp - LOW_EXP) as usize;
        let limb = offset / 64;
        let wide = u128::from(mantissa) << (offset % 64);
        let addend = [wide as u64, (wide >> 64) as u64];
        if x > 0.0 {
            self.add_at(limb, addend);
        } else {
            self.sub_at(limb, addend);
        }
    }

    /// True when nothing but zeros (or sums cancelling to zero) was added.
    pub fn is_zero(&self) -> bool {
        self.limbs.iter().all(|&l| l == 0)
    }

    /// Adds another exact sum.
    pub fn add(&mut self, other: &ExactSum) {
        let mut carry = false;
        for (a, &b) in self.limbs.iter_mut().zip(other.limbs.iter()) {
            let (s1, c1) = a.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *a = s2;
            carry = c1 || c2;
        }
    }

    fn add_at(&mut self, limb: usize, addend: [u64; 2]) {
        let mut carry = false;
        for (i, slot) in self.limbs.iter_mut().enumerate().skip(limb) {
            let b = if i - limb < 2 { addend[i - limb] } else { 0 };
            let (s1, c1) = slot.overflowing_add(b);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *slot = s2;
            carry = c1 || c2;
            if !carry && i > limb {
                break;
            }
        }
    }

    fn sub_at(&mut self, limb: usize, subtrahend: [u64; 2]) {
        let mut borrow = false;
        for (i, slot) in self.limbs.iter_mut().enumerate().skip(limb) {
            let b = if i - limb < 2 {
                subtrahend[i - limb]
            } else {
                0
            };
            let (s1, c1) = slot.overflowing_sub(b);
            let (s2, c2) = s1.overflowing_sub(u64::from(borrow));
            *slot = s2;
            borrow = c1 || c2;
            if !borrow && i > limb {
                break;
            }
        }
    }

    fn is_negative(&self) -> bool {
        self.limbs[LIMBS - 1] >> 63 == 1
    }

    fn magnitude(&self) -> [u64; LIMBS] {
        if !self.is_negative() {
            return self.limbs;
        }
        let mut out = [0u64; LIMBS];
        let mut carry = true;
        for (o, &l) in out.iter_mut().zip(self.limbs.iter()) {
            let (s, c) = (!l).overflowing_add(u64::from(carry));
            *o = s;
            carry = c;
        }
        out
    }

    /// The sum rounded to `f64` (within an ulp; a function of the exact
    /// value only, so equal sums always read back as equal doubles).
    pub fn to_f64(&self) -> f64 {
        let mag = self.magnitude();
        let top = mag.iter().rposition(|&l| l != 0).unwrap_or(0);
        // Tiny sums are formed scaled up by 2^128 so that the lowest limbs
        // (weights below the smallest subnormal) still count, then scaled down.
        let scale = if 64 * (top as i32) + LOW_EXP < 0 {
            128
        } else {
            0
        };
        let mut value = 0.0f64;
        for (i, &limb) in mag.iter().enumerate().rev() {
            if limb != 0 {
                value += limb as f64 * pow2(64 * i as i32 + LOW_EXP + scale);
            }
        }
        value *= pow2(-scale);
        if self.is_negative() { -value } else { value }
    }

    fn encode(&self) -> String {
        let mag = self.magnitude();
        let Some(hi) = mag.iter().rposition(|&l| l != 0) else {
            return "0".to_owned();
        };
        let lo = mag.iter().position(|&l| l != 0).unwrap_or(hi);
        let mut out = String::new();
        if self.is_negative() {
            out.push('-');
        }
        out.push_str(&format!("{:x}", mag[hi]));
        for limb in mag[lo..hi].iter().rev() {
            out.push_str(&format!("{limb:016x}"));
        }
        out.push_str(&format!("p{}", 64 * lo as i32 + LOW_EXP));
        out
    }

    fn decode(text: &str) -> Result<Self, String> {
        if text == "0" {
            return Ok(Self::default());
        }
        let (negative, rest) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (hex, exp) = rest
            .split_once('p')
            .ok_or_else(|| format!("exact sum {text:?}: expected <hex>p<exponent>"))?;
        let exp: i64 = exp
            .parse()
            .map_err(|_| format!("exact sum {text:?}: bad exponent"))?;
        let above = exp - i64::from(LOW_EXP);
        if above % 64 != 0 || !(0..64 * LIMBS as i64).contains(&above) {
            return Err(format!("exact sum {text:?}: exponent out of range"));
        }
        let lo = (above / 64) as usize;
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("exact sum {text:?}: bad hexadecimal digits"));
        }
        let mut limbs = [0u64; LIMBS];
        // Limbs from the least significant end of the digit string.
        let digits = hex.as_bytes();
        let mut end = digits.len();
        let mut index = lo;
        while end > 0 {
            let start = end.saturating_sub(16);
            if index >= LIMBS - 1 {
                return Err(format!("exact sum {text:?}: out of range"));
            }
            let chunk = std::str::from_utf8(&digits[start..end]).unwrap_or("0");
            limbs[index] = u64::from_str_radix(chunk, 16)
                .map_err(|_| format!("exact sum {text:?}: bad hexadecimal digits"))?;
            index += 1;
            end = start;
        }
        let mut sum = Self { limbs };
        if negative {
            let positive = sum.clone();
            sum = Self::default();
            let mut carry = true;
            for (o, &l) in sum.limbs.iter_mut().zip(positive.limbs.iter()) {
                let (s, c) = (!l).overflowing_add(u64::from(carry));
                *o = s;
                carry = c;
            }
        }
        Ok(sum)
    }
}

/// `2^e` as a double, saturating to 0 or infinity outside the range.
pub(crate) fn pow2(e: i32) -> f64 {
    if e > 1023 {
        f64::INFINITY
    } else if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else if e >= -1074 {
        f64::from_bits(1u64 << (e + 1074))
    } else {
        0.0
    }
}

impl Serialize for ExactSum {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.encode())
    }
}

impl<'de> Deserialize<'de> for ExactSum {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::decode(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sum_of(values: &[f64]) -> ExactSum {
        let mut s = ExactSum::default();
        for &v in values {
            s.add_f64(v);
        }
        s
    }

    #[test]
    fn cancels_exactly_where_floats_do_not() {
        let s = sum_of(&[1e300, 1.0, -1e300, 1e-300]);
        assert_eq!(s.to_f64(), 1.0 + 1e-300);
        // The exact value of the three doubles is 2^-55.
        assert_eq!(sum_of(&[0.1, 0.2, -0.3]).to_f64(), pow2(-55));
    }

    #[test]
    fn extremes_round_trip() {
        for v in [
            f64::MAX,
            -f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            1.0,
            -2.5,
        ] {
            let s = sum_of(&[v]);
            assert_eq!(s.to_f64(), v);
            let text = serde_json::to_string(&s).unwrap();
            let back: ExactSum = serde_json::from_str(&text).unwrap();
            assert_eq!(back, s, "{text}");
        }
    }

    #[test]
    fn malformed_strings_are_errors() {
        for bad in ["", "p", "zz", "1p3", "1p-1088x", "-", "1p99999", "gp-1088"] {
            assert!(ExactSum::decode(bad).is_err(), "{bad:?} accepted");
        }
    }

    proptest! {
        #[test]
        fn order_does_not_matter(values in prop::collection::vec(-1e200f64..1e200, 0..40), split in 0usize..40) {
            let forward = sum_of(&values);
            let mut reversed: Vec<f64> = values.clone();
            reversed.reverse();
            prop_assert_eq!(&forward, &sum_of(&reversed));
            let split = split.min(values.len());
            let mut left = sum_of(&values[..split]);
            left.add(&sum_of(&values[split..]));
            prop_assert_eq!(&forward, &left);
            let text = serde_json::to_string(&forward).unwrap();
            let back: ExactSum = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&back, &forward);
        }
    }
}
