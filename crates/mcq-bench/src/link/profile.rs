//! Link profiles: how much delay, jitter, rate limit and loss a relay adds.
//!
//! Built-in profiles (sources in `docs/bench.md`): `loopback` (none),
//! `same-az`, `cross-az`, `cross-region`, `wan-2010`; or a custom
//! `rtt=20ms,jitter=2ms,rate=100mbit,loss=0.1%`.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

/// What a link adds to a TCP connection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinkProfile {
    /// Built-in name, or `custom`.
    pub name: String,
    /// Round-trip time added (half in each direction).
    #[serde(serialize_with = "as_ms")]
    pub rtt: Duration,
    /// Standard deviation of the added round-trip time.
    #[serde(serialize_with = "as_ms")]
    pub jitter: Duration,
    /// Rate limit of each direction of each connection, bits per second.
    pub rate_bits_per_s: Option<f64>,
    /// Probability that a chunk of data is lost and retransmitted.
    pub loss: f64,
}

fn as_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

const fn ms(micros: u64) -> Duration {
    Duration::from_micros(micros)
}

/// Names of the built-in profiles, for messages and docs.
pub const BUILT_IN: [&str; 5] = [
    "loopback",
    "same-az",
    "cross-az",
    "cross-region",
    "wan-2010",
];

impl LinkProfile {
    /// No emulation: the relay is not started at all.
    pub fn loopback() -> Self {
        Self::built_in("loopback", ms(0), ms(0), None)
    }

    fn built_in(name: &str, rtt: Duration, jitter: Duration, rate: Option<f64>) -> Self {
        Self {
            name: name.to_owned(),
            rtt,
            jitter,
            rate_bits_per_s: rate,
            loss: 0.0,
        }
    }

    /// Whether the link adds nothing (no relay needed).
    pub fn is_loopback(&self) -> bool {
        self.rtt.is_zero()
            && self.jitter.is_zero()
            && self.rate_bits_per_s.is_none()
            && self.loss == 0.0
    }
}

impl fmt::Display for LinkProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_loopback() {
            return write!(f, "{} (no emulation)", self.name);
        }
        write!(
            f,
            "{} (rtt {} ms ± {} ms",
            self.name,
            self.rtt.as_secs_f64() * 1e3,
            self.jitter.as_secs_f64() * 1e3
        )?;
        if let Some(rate) = self.rate_bits_per_s {
            write!(f, ", {} Mbit/s", rate / 1e6)?;
        }
        if self.loss > 0.0 {
            write!(f, ", loss {}%", self.loss * 100.0)?;
        }
        f.write_str(")")
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(n) = text.strip_suffix("us") {
        (n, 1e-6)
    } else if let Some(n) = text.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        return Err(format!("{text:?} needs a unit: us, ms or s (e.g. 20ms)"));
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 20ms)"))?;
    if !(value.is_finite() && value >= 0.0 && value * scale <= 60.0) {
        return Err(format!("{text:?} must lie between 0 and 60 s"));
    }
    // Whole nanoseconds, rounded: 123us is 123,000 ns, not 122,999.
    Ok(Duration::from_nanos((value * scale * 1e9).round() as u64))
}

fn parse_rate(text: &str) -> Result<f64, String> {
    let lower = text.to_ascii_lowercase();
    let (number, scale) = [("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)]
        .into_iter()
        .find_map(|(unit, scale)| lower.strip_suffix(unit).map(|n| (n.to_owned(), scale)))
        .ok_or_else(|| format!("{text:?} needs a unit: bit, kbit, mbit or gbit (e.g. 100mbit)"))?;
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a rate (e.g. 100mbit)"))?;
    let bits = value * scale;
    if !(bits.is_finite() && (1e3..=1e12).contains(&bits)) {
        return Err(format!("{text:?} must lie between 1kbit and 1000gbit"));
    }
    Ok(bits)
}

fn parse_loss(text: &str) -> Result<f64, String> {
    let number = text
        .strip_suffix('%')
        .ok_or_else(|| format!("{text:?} needs a % sign (e.g. 0.1%)"))?;
    let percent: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a percentage (e.g. 0.1%)"))?;
    if !(percent.is_finite() && (0.0..=50.0).contains(&percent)) {
        return Err(format!("{text:?} must lie between 0% and 50%"));
    }
    Ok(percent / 100.0)
}

/// Parses a built-in profile's name or `rtt=…,jitter=…,rate=…,loss=…`
/// (every key optional, none repeated), answering bad input with what was
/// expected.
pub fn parse_link(text: &str) -> Result<LinkProfile, String> {
    let text = text.trim();
    let built_in = match text {
        "loopback" => Some(LinkProfile::loopback()),
        "same-az" => Some(LinkProfile::built_in("same-az", ms(500), ms(50), None)),
        "cross-az" => Some(LinkProfile::built_in("cross-az", ms(1500), ms(300), None)),
        "cross-region" => Some(LinkProfile::built_in(
            "cross-region",
            ms(70_000),
            ms(5000),
            None,
        )),
        "wan-2010" => Some(LinkProfile::built_in(
            "wan-2010",
            ms(40_000),
            ms(5000),
            Some(24e6),
        )),
        _ => None,
    };
    if let Some(profile) = built_in {
        return Ok(profile);
    }
    if !text.contains('=') {
        return Err(format!(
            "unknown link profile {text:?}; expected one of {} or rtt=20ms,jitter=2ms,rate=100mbit,loss=0.1%",
            BUILT_IN.join(", ")
        ));
    }
    let mut profile = LinkProfile {
        name: "custom".to_owned(),
        ..LinkProfile::loopback()
    };
    let mut seen: Vec<&str> = Vec::new();
    for part in text.split(',') {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not key=value (keys: rtt, jitter, rate, loss)"))?;
        let (key, value) = (key.trim(), value.trim());
        if seen.contains(&key) {
            return Err(format!("{key} is given twice in {text:?}"));
        }
        seen.push(key);
        match key {
            "rtt" => profile.rtt = parse_duration(value)?,
            "jitter" => profile.jitter = parse_duration(value)?,
            "rate" => profile.rate_bits_per_s = Some(parse_rate(value)?),
            "loss" => profile.loss = parse_loss(value)?,
            _ => {
                return Err(format!(
                    "unknown link setting {key:?}; expected rtt, jitter, rate or loss"
                ));
            }
        }
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn built_in_profiles_and_a_custom_one() {
        for name in BUILT_IN {
            assert_eq!(parse_link(name).unwrap().name, name);
        }
        assert!(parse_link("loopback").unwrap().is_loopback());
        let cross = parse_link("cross-az").unwrap();
        assert_eq!((cross.rtt, cross.jitter), (ms(1500), ms(300)));
        let custom = parse_link("rtt=20ms,jitter=2ms,rate=100mbit,loss=0.1%").unwrap();
        assert_eq!(custom.rtt, Duration::from_millis(20));
        assert_eq!(custom.jitter, Duration::from_millis(2));
        assert_eq!(custom.rate_bits_per_s, Some(1e8));
        assert!((custom.loss - 0.001).abs() < 1e-15);
        assert_eq!(
            custom.to_string(),
            "custom (rtt 20 ms ± 2 ms, 100 Mbit/s, loss 0.1%)"
        );
    }

    #[test]
    fn bad_input_says_what_was_expected() {
        for (text, expected) in [
            ("moon", "unknown link profile"),
            ("rtt=20", "needs a unit"),
            ("rtt=fastms", "not a duration"),
            ("rtt=-1ms", "between 0 and 60 s"),
            ("rate=100", "needs a unit"),
            ("rate=0.1bit", "between 1kbit"),
            ("loss=0.1", "% sign"),
            ("loss=80%", "between 0% and 50%"),
            ("delay=1ms", "unknown link setting"),
            ("rtt=1ms,rtt=2ms", "given twice"),
            ("rtt=1ms,", "not key=value"),
        ] {
            let err = parse_link(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    proptest! {
        #[test]
        fn custom_profiles_round_trip(
            rtt_us in 0u64..60_000_000,
            jitter_us in 0u64..1_000_000,
            mbit in 1u32..100_000,
            loss_permille in 0u32..500,
        ) {
            let text = format!(
                "rtt={rtt_us}us,jitter={jitter_us}us,rate={mbit}mbit,loss={}%",
                f64::from(loss_permille) / 10.0
            );
            let p = parse_link(&text).unwrap();
            prop_assert_eq!(p.rtt, Duration::from_micros(rtt_us));
            prop_assert_eq!(p.jitter, Duration::from_micros(jitter_us));
            prop_assert_eq!(p.rate_bits_per_s, Some(f64::from(mbit) * 1e6));
            prop_assert!((p.loss - f64::from(loss_permille) / 1000.0).abs() < 1e-12);
        }

        #[test]
        fn any_text_parses_or_explains(text in ".{0,40}") {
            match parse_link(&text) {
                Ok(p) => prop_assert!(p.loss <= 0.5 && p.rtt <= Duration::from_secs(60)),
                Err(e) => prop_assert!(!e.is_empty()),
            }
        }

        #[test]
        fn keys_in_any_order_give_the_same_profile(rtt in 0u32..1000, jitter in 0u32..100) {
            let a = parse_link(&format!("rtt={rtt}ms,jitter={jitter}ms")).unwrap();
            let b = parse_link(&format!("jitter={jitter}ms,rtt={rtt}ms")).unwrap();
            prop_assert_eq!(a, b);
        }
    }
}
