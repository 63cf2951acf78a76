//! The places a batch can run: in this process on one thread or all cores,
//! or through the HTTP service and its queue.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Where a trial's calls are computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Platform {
    /// In-process, one thread, one call after the other (the original "local" run).
    #[serde(rename = "local-1")]
    Local1,
    /// In-process on a rayon pool with one thread per core.
    #[serde(rename = "local-all")]
    LocalAll,
    /// Through the HTTP API, the queue and its workers.
    #[serde(rename = "service")]
    Service,
}

impl Platform {
    /// Every platform, in the order tables and charts show them.
    pub const ALL: [Platform; 3] = [Platform::Local1, Platform::LocalAll, Platform::Service];

    /// The name used on the command line and in every output file.
    pub fn name(self) -> &'static str {
        match self {
            Platform::Local1 => "local-1",
            Platform::LocalAll => "local-all",
            Platform::Service => "service",
        }
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Platform {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Platform::ALL
            .into_iter()
            .find(|p| p.name() == text.trim())
            .ok_or_else(|| {
                format!("unknown platform {text:?}; expected local-1, local-all or service")
            })
    }
}

/// Parses `local-1,local-all,service` into a sorted list without duplicates.
pub fn parse_platforms(text: &str) -> Result<Vec<Platform>, String> {
    let mut platforms = text
        .split(',')
        .map(str::parse)
        .collect::<Result<Vec<Platform>, _>>()?;
    platforms.sort();
    platforms.dedup();
    Ok(platforms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_bad_names_are_rejected() {
        for p in Platform::ALL {
            assert_eq!(p.name().parse::<Platform>().unwrap(), p);
            assert_eq!(serde_json::to_string(&p).unwrap(), format!("\"{p}\""));
        }
        assert_eq!(
            parse_platforms("service,local-1,service").unwrap(),
            vec![Platform::Local1, Platform::Service]
        );
        assert!(parse_platforms("local-2").is_err());
        assert!(parse_platforms("").is_err());
    }
}
