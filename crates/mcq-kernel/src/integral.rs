//! Whole-number spec fields read as JSON Schema reads them: `20` and
//! `20.0` are the same integer, while `20.5`, negative numbers and numbers
//! past the type's range are refused. serde alone refuses `20.0`, which a
//! client that keeps every number as a double (JavaScript) may send.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserializer;
use serde::de::{self, Visitor};

/// Reads a `u32` written as an integer or as an integral number.
pub(crate) fn u32<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    deserializer.deserialize_any(Whole::<u32>::new(u64::from(u32::MAX)))
}

/// Reads an optional `u64` (absent or `null` is `None`) written as an
/// integer or as an integral number.
pub(crate) fn option_u64<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    deserializer.deserialize_option(Maybe)
}

/// A whole number of type `T`, whose largest value is `max`.
struct Whole<T> {
    max: u64,
    kind: PhantomData<T>,
}

impl<T> Whole<T> {
    fn new(max: u64) -> Self {
        Whole {
            max,
            kind: PhantomData,
        }
    }
}

impl<T: TryFrom<u64>> Visitor<'_> for Whole<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a whole number from 0 to {}", self.max)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        T::try_from(v).map_err(|_| E::invalid_value(de::Unexpected::Unsigned(v), &self))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        u64::try_from(v)
            .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            .and_then(|v| self.visit_u64(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // 2^64 is the first double past u64::MAX; every integral double
        // below it converts exactly.
        if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "an integral double in [0, 2^64) converts exactly"
            )]
            let whole = v as u64;
            T::try_from(whole).map_err(|_| E::invalid_value(de::Unexpected::Float(v), &self))
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }
}

/// An optional whole `u64`.
struct Maybe;

impl<'de> Visitor<'de> for Maybe {
    type Value = Option<u64>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number from 0 to 18446744073709551615, or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Option<u64>, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<u64>, D::Error> {
        deserializer
            .deserialize_any(Whole::<u64>::new(u64::MAX))
            .map(Some)
    }
}

#[cfg(test)]
mod tests {
    use crate::Spec;

    fn spec(json: &str) -> Result<Spec, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn integral_numbers_are_integers() {
        let s = spec(r#"{"periods": 20.0, "runs": 1e6, "seed": 7.0}"#).unwrap();
        assert_eq!((s.periods, s.runs, s.seed), (20, Some(1_000_000), Some(7)));
        let s = spec(r#"{"runs": null, "seed": null}"#).unwrap();
        assert_eq!((s.runs, s.seed), (None, None));
        assert_eq!(spec(r#"{"periods": 12}"#).unwrap().periods, 12);
    }

    #[test]
    fn fractions_negatives_and_overflows_are_refused() {
        for bad in [
            r#"{"periods": 20.5}"#,
            r#"{"periods": -1}"#,
            r#"{"periods": 4294967296}"#,
            r#"{"periods": "20"}"#,
            r#"{"runs": -5}"#,
            r#"{"runs": 1e30}"#,
            r#"{"runs": 123456789012345678901234567890}"#,
            r#"{"seed": 0.5}"#,
            r#"{"seed": true}"#,
        ] {
            assert!(spec(bad).is_err(), "{bad}");
        }
    }
}
