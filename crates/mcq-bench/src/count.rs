//! Parsing of counts written the way people write them on a command line:
//! `1000000`, `1_000_000`, `1e6`, `2.5e6`.

use anyhow::{Context, bail};

/// Parses a positive whole count. Accepts digits with `_` separators and
/// scientific notation whose value is a whole number (`1e6`, `2.5e3`);
/// rejects zero, negatives, fractions and values beyond `u64`.
pub fn parse_count(text: &str) -> anyhow::Result<u64> {
    let cleaned: String = text.trim().chars().filter(|c| *c != '_').collect();
    if cleaned.is_empty() {
        bail!("expected a count such as 1000000, 1_000_000 or 1e6, got an empty value");
    }
    let value = if cleaned.chars().all(|c| c.is_ascii_digit()) {
        cleaned
            .parse::<u64>()
            .with_context(|| format!("{text:?} is too large for a count"))?
    } else {
        let float: f64 = cleaned.parse().map_err(|_| {
            anyhow::anyhow!("{text:?} is not a count (try 1000000, 1_000_000 or 1e6)")
        })?;
        // 2^64 is exactly representable, so this bound check is exact; NaN and
        // infinities fall outside the range too.
        if !(0.0..18_446_744_073_709_551_616.0).contains(&float) {
            bail!("{text:?} is out of range for a count");
        }
        if float.fract() != 0.0 {
            bail!("{text:?} is not a whole number");
        }
        float as u64
    };
    if value == 0 {
        bail!("{text:?}: the count must be at least 1");
    }
    Ok(value)
}

/// Parses a comma-separated list of counts (`1e3,1e4,1e5`), rejecting empty items.
pub fn parse_count_list(text: &str) -> anyhow::Result<Vec<u64>> {
    text.split(',')
        .map(|item| parse_count(item).with_context(|| format!("in the list {text:?}")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_usual_spellings() {
        assert_eq!(parse_count("1000000").unwrap(), 1_000_000);
        assert_eq!(parse_count("1_000_000").unwrap(), 1_000_000);
        assert_eq!(parse_count("1e6").unwrap(), 1_000_000);
        assert_eq!(parse_count("2.5e3").unwrap(), 2_500);
        assert_eq!(parse_count(" 7 ").unwrap(), 7);
        assert_eq!(
            parse_count_list("1e3,1e4, 100").unwrap(),
            vec![1_000, 10_000, 100]
        );
    }

    #[test]
    fn rejects_malformed_counts() {
        for bad in [
            "",
            "0",
            "-5",
            "1.5",
            "1e-3",
            "abc",
            "1e30",
            "NaN",
            "inf",
            "99999999999999999999",
            "1,,2",
        ] {
            assert!(parse_count_list(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
