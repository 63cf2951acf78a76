//! A strict parser of the Prometheus text exposition format (0.0.4), for
//! tests that scrape real processes: a scrape that a Prometheus server
//! would reject, or would read differently, is an error here.
//!
//! Checked: the syntax of every line (names, label escapes, values,
//! timestamps); one `# TYPE` per family, before its samples, of a known
//! type; samples of a family kept together; no series twice; histograms
//! with increasing `le` bounds, non-decreasing cumulative counts, a `+Inf`
//! bucket equal to `_count`, and a `_sum`.

use std::collections::{BTreeMap, HashSet};

/// Why a scrape was refused: the line (1-based) and what is wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// Line number, from 1; 0 for a rule about a whole family.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Its name (a histogram's samples end in `_bucket`, `_sum`, `_count`).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// The samples of one metric family, with its type and help.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Family {
    /// `counter`, `gauge`, `histogram`, `summary` or `untyped`.
    pub kind: String,
    /// The `# HELP` text, unescaped.
    pub help: Option<String>,
    /// Its samples, in the order given.
    pub samples: Vec<Sample>,
}

/// A parsed scrape: families by name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scrape {
    /// Every family, by its name (a histogram's without suffix).
    pub families: BTreeMap<String, Family>,
}

impl Scrape {
    /// The family named `name` (a histogram's base name).
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.get(name)
    }

    /// Every sample named `name` (`x_bucket` included), whatever its family.
    pub fn samples<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Sample> + 'a {
        self.families
            .values()
            .flat_map(|f| f.samples.iter())
            .filter(move |s| s.name == name)
    }

    /// Whether some sample is named `name`.
    pub fn has_sample(&self, name: &str) -> bool {
        self.samples(name).next().is_some()
    }

    /// The sum of the samples named `name` whose labels include every
    /// pair of `labels`; 0 when none does.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples(name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
            })
            .map(|s| s.value)
            .sum()
    }
}

const TYPES: &[&str] = &["counter", "gauge", "histogram", "summary", "untyped"];

/// Parses a whole scrape.
pub fn parse(text: &str) -> Result<Scrape, ParseError> {
    let mut scrape = Scrape::default();
    // Families whose samples have been seen, and the one being read.
    let mut closed: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    let mut series: HashSet<(String, BTreeMap<String, String>)> = HashSet::new();
    for (index, line) in text.split('\n').enumerate() {
        let n = index + 1;
        let err = |message: String| ParseError { line: n, message };
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            match (words.next(), words.next(), words.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    check_name(name).map_err(err)?;
                    let kind = kind.trim();
                    if !TYPES.contains(&kind) {
                        return Err(err(format!("unknown type {kind:?} of {name}")));
                    }
                    let family = scrape.families.entry(name.to_owned()).or_default();
                    if !family.kind.is_empty() {
                        return Err(err(format!("a second TYPE line for {name}")));
                    }
                    if !family.samples.is_empty() || closed.contains(name) {
                        return Err(err(format!("TYPE of {name} after its samples")));
                    }
                    family.kind = kind.to_owned();
                }
                (Some("HELP"), Some(name), help) => {
                    check_name(name).map_err(err)?;
                    let help = unescape(help.unwrap_or(""), false).map_err(err)?;
                    let family = scrape.families.entry(name.to_owned()).or_default();
                    if family.help.replace(help).is_some() {
                        return Err(err(format!("a second HELP line for {name}")));
                    }
                }
                _ => {}
            }
            continue;
        }
        let sample = parse_sample(line).map_err(err)?;
        let family_name = family_of(&scrape, &sample.name);
        if current.as_deref() != Some(family_name.as_str()) {
            if closed.contains(&family_name) {
                return Err(err(format!(
                    "samples of {family_name} are not kept together"
                )));
            }
            if let Some(previous) = current.replace(family_name.clone()) {
                closed.insert(previous);
            }
        }
        if !series.insert((sample.name.clone(), sample.labels.clone())) {
            return Err(err(format!(
                "series {} {:?} twice",
                sample.name, sample.labels
            )));
        }
        let family = scrape.families.entry(family_name).or_default();
        if family.kind.is_empty() {
            family.kind = "untyped".into();
        }
        family.samples.push(sample);
    }
    for (name, family) in &scrape.families {
        if family.kind == "histogram" {
            check_histogram(name, family).map_err(|message| ParseError { line: 0, message })?;
        }
    }
    Ok(scrape)
}

/// The family a sample name belongs to: a histogram's or summary's for
/// its suffixed samples, else its own.
fn family_of(scrape: &Scrape, name: &str) -> String {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && scrape.families.get(base).is_some_and(|f| {
                f.kind == "histogram" || (f.kind == "summary" && suffix != "_bucket")
            })
        {
            return base.to_owned();
        }
    }
    name.to_owned()
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample needs a value")?;
    let name = &line[..name_end];
    check_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner;
        loop {
            rest = rest.trim_start_matches(' ');
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=').ok_or("a label without `=`")?;
            let label = rest[..eq].trim();
            check_label(label)?;
            rest = rest[eq + 1..]
                .strip_prefix('"')
                .ok_or_else(|| format!("the value of label {label} is not quoted"))?;
            let (value, after) = quoted(rest)?;
            if labels.insert(label.to_owned(), value).is_some() {
                return Err(format!("label {label} twice"));
            }
            rest = after.trim_start_matches(' ');
            if let Some(after) = rest.strip_prefix(',') {
                rest = after;
            } else if !rest.starts_with('}') {
                return Err("labels must be separated by `,`".into());
            }
        }
    }
    let mut fields = rest.split(' ').filter(|f| !f.is_empty());
    let value = fields.next().ok_or("a sample needs a value")?;
    let value = parse_value(value)?;
    if let Some(timestamp) = fields.next() {
        timestamp
            .parse::<i64>()
            .map_err(|_| format!("bad timestamp {timestamp:?}"))?;
    }
    if let Some(extra) = fields.next() {
        return Err(format!("unexpected {extra:?} after the value"));
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// A label value up to its closing quote, unescaped, and what follows it.
fn quoted(text: &str) -> Result<(String, &str), String> {
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => return Ok((unescape(&text[..i], true)?, &text[i + 1..])),
            '\n' => break,
            _ => {}
        }
    }
    Err("an unterminated label value".into())
}

/// Undoes `\\`, `\n` (and `\"` in label values); any other escape is an error.
fn unescape(text: &str, quotes: bool) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quotes => out.push('"'),
            other => return Err(format!("bad escape \\{}", other.unwrap_or(' '))),
        }
    }
    Ok(out)
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        _ if text
            .bytes()
            .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
        {
            text.parse().map_err(|_| format!("bad value {text:?}"))
        }
        _ => Err(format!("bad value {text:?}")),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    let ok = name.bytes().enumerate().all(|(i, b)| {
        b.is_ascii_alphabetic() || b == b'_' || b == b':' || (i > 0 && b.is_ascii_digit())
    });
    if ok && !name.is_empty() {
        Ok(())
    } else {
        Err(format!("bad metric name {name:?}"))
    }
}

fn check_label(label: &str) -> Result<(), String> {
    let ok = label
        .bytes()
        .enumerate()
        .all(|(i, b)| b.is_ascii_alphabetic() || b == b'_' || (i > 0 && b.is_ascii_digit()));
    if ok && !label.is_empty() && !label.starts_with("__") {
        Ok(())
    } else {
        Err(format!("bad label name {label:?}"))
    }
}

/// Per label set: buckets ordered by `le`, counts cumulative, `+Inf`
/// equal to `_count`, and a `_sum`.
fn check_histogram(name: &str, family: &Family) -> Result<(), String> {
    /// One label set's buckets (`le`, count), `_count`, and whether a `_sum` came.
    type Series = (Vec<(f64, f64)>, Option<f64>, bool);
    let mut by_set: BTreeMap<BTreeMap<String, String>, Series> = BTreeMap::new();
    for sample in &family.samples {
        let mut labels = sample.labels.clone();
        let le = labels.remove("le");
        let entry = by_set.entry(labels).or_default();
        match sample.name.strip_prefix(name) {
            Some("_bucket") => {
                let le = le.ok_or_else(|| format!("{name}_bucket without le"))?;
                entry.0.push((parse_value(&le)?, sample.value));
            }
            Some("_count") => entry.1 = Some(sample.value),
            Some("_sum") => entry.2 = true,
            _ => return Err(format!("{} in histogram {name}", sample.name)),
        }
    }
    for (labels, (buckets, count, sum)) in by_set {
        let set = format!("{name} {labels:?}");
        if !buckets
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1)
        {
            return Err(format!("{set}: buckets out of order or not cumulative"));
        }
        match buckets.last() {
            Some(&(le, inf)) if le == f64::INFINITY && Some(inf) == count => {}
            _ => return Err(format!("{set}: no +Inf bucket equal to _count")),
        }
        if !sum {
            return Err(format!("{set}: no _sum"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "# HELP a_total Things, with a \\\\ and a \\n.\n\
        # TYPE a_total counter\n\
        a_total{route=\"/v1/jobs/{id}\",status=\"200\"} 3\n\
        a_total{route=\"say \\\"hi\\\"\",status=\"404\"} 1 1700000000000\n\
        \n\
        # TYPE h_seconds histogram\n\
        h_seconds_bucket{le=\"0.1\"} 1\n\
        h_seconds_bucket{le=\"1\"} 2\n\
        h_seconds_bucket{le=\"+Inf\"} 2\n\
        h_seconds_sum 0.75\n\
        h_seconds_count 2\n\
        untyped_one -1.5e-3\n";

    #[test]
    fn a_well_formed_scrape_is_read_exactly() {
        let scrape = parse(GOOD).expect("valid");
        let a = scrape.family("a_total").expect("a_total");
        assert_eq!(a.kind, "counter");
        assert_eq!(a.help.as_deref(), Some("Things, with a \\ and a \n."));
        assert_eq!(scrape.sum("a_total", &[]), 4.0);
        assert_eq!(scrape.sum("a_total", &[("route", "say \"hi\"")]), 1.0);
        assert_eq!(scrape.sum("a_total", &[("route", "/v1/jobs/{id}")]), 3.0);
        assert_eq!(scrape.family("h_seconds").expect("h").samples.len(), 5);
        assert!(scrape.has_sample("h_seconds_bucket"));
        assert_eq!(scrape.family("untyped_one").expect("u").kind, "untyped");
        assert_eq!(scrape.sum("untyped_one", &[]), -1.5e-3);
    }

    #[test]
    fn malformed_scrapes_are_refused() {
        for (bad, why) in [
            ("1abc 1\n", "name starting with a digit"),
            ("a{b=\"c} 1\n", "unterminated label value"),
            ("a{b=c} 1\n", "unquoted label value"),
            ("a{b=\"c\" d=\"e\"} 1\n", "labels without a comma"),
            ("a{__b=\"c\"} 1\n", "reserved label name"),
            ("a{b=\"\\x\"} 1\n", "unknown escape"),
            ("a{b=\"1\",b=\"2\"} 1\n", "label twice"),
            ("a one\n", "value not a number"),
            ("a 1 2 3\n", "trailing field"),
            ("a 1 x\n", "timestamp not an integer"),
            ("a\n", "no value"),
            ("a 1\na 2\n", "series twice"),
            ("a 1\nb 1\na{x=\"y\"} 1\n", "family split"),
            ("# TYPE a wobble\na 1\n", "unknown type"),
            ("# TYPE a gauge\n# TYPE a gauge\na 1\n", "TYPE twice"),
            ("a 1\n# TYPE a gauge\n", "TYPE after samples"),
            (
                "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
                "counts not cumulative",
            ),
            (
                "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",
                "no +Inf bucket",
            ),
            (
                "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",
                "+Inf differs from _count",
            ),
            (
                "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
                "no _sum",
            ),
        ] {
            assert!(parse(bad).is_err(), "accepted ({why}): {bad:?}");
        }
    }
}
