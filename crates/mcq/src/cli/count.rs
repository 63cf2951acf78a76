//! The one parser of counts on mcq's command line (`--runs`, `--count`,
//! `--calls`, `--jobs`, …): `1000000`, `1_000_000`, `1e6` and `2.5e6` all
//! work, in every command, with the flag's range checked in the same place.

use std::ops::RangeInclusive;

/// Parses a whole, non-negative count. Accepts digits with `_` separators
/// and scientific notation whose value is a whole number (`1e6`, `2.5e3`);
/// rejects negatives, fractions and values beyond `u64`.
pub(crate) fn parse_count(text: &str) -> Result<u64, String> {
    let cleaned: String = text.trim().chars().filter(|c| *c != '_').collect();
    if cleaned.is_empty() {
        return Err("expected a count such as 1000000, 1_000_000 or 1e6, got nothing".into());
    }
    if cleaned.chars().all(|c| c.is_ascii_digit()) {
        return cleaned
            .parse::<u64>()
            .map_err(|_| format!("{text:?} is too large for a count"));
    }
    let float: f64 = cleaned
        .parse()
        .map_err(|_| format!("{text:?} is not a count (try 1000000, 1_000_000 or 1e6)"))?;
    // 2^64 is exactly representable, so this bound check is exact; NaN and
    // infinities fall outside the range too.
    if !(0.0..18_446_744_073_709_551_616.0).contains(&float) {
        return Err(format!("{text:?} is out of range for a count"));
    }
    if float.fract() != 0.0 {
        return Err(format!("{text:?} is not a whole number"));
    }
    Ok(float as u64)
}

/// A clap value parser for a count flag within `range`, as the integer type
/// the flag is stored in: `#[arg(long, value_parser = count::<u32>(1..=100_000))]`.
pub(crate) fn count<T>(
    range: RangeInclusive<u64>,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: TryFrom<u64> + Clone + Send + Sync + 'static,
{
    move |text| {
        let value = parse_count(text)?;
        if !range.contains(&value) {
            return Err(format!(
                "{value} is not in {}..={}",
                range.start(),
                range.end()
            ));
        }
        T::try_from(value).map_err(|_| format!("{value} is too large"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_usual_spellings() {
        assert_eq!(parse_count("1000000"), Ok(1_000_000));
        assert_eq!(parse_count("1_000_000"), Ok(1_000_000));
        assert_eq!(parse_count("1e6"), Ok(1_000_000));
        assert_eq!(parse_count("1E6"), Ok(1_000_000));
        assert_eq!(parse_count("2.5e3"), Ok(2_500));
        assert_eq!(parse_count(" 7 "), Ok(7));
        assert_eq!(parse_count("0"), Ok(0));
    }

    #[test]
    fn rejects_malformed_counts() {
        for bad in [
            "",
            "-5",
            "1.5",
            "1e-3",
            "abc",
            "1e30",
            "NaN",
            "inf",
            "99999999999999999999",
        ] {
            assert!(parse_count(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn ranges_and_target_types_are_checked() {
        let calls = count::<u32>(1..=100_000);
        assert_eq!(calls("1e5"), Ok(100_000));
        let err = calls("0").unwrap_err();
        assert!(err.contains("0 is not in 1..=100000"), "{err}");
        assert!(calls("1e6").is_err());
        let narrow = count::<u8>(0..=1000);
        assert!(narrow("300").unwrap_err().contains("too large"));
    }
}
