//! Whether a database holds the schema this binary needs: the migrations
//! embedded in it against those recorded in the database's
//! `_sqlx_migrations` table. Readiness probes ask this, so that a process
//! pointed at an empty or half-migrated database says it is not ready
//! instead of answering every call with an error.

use std::collections::BTreeMap;
use std::fmt;

use sqlx::migrate::Migrator;

/// How a database's schema stands against the migrations of this binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaStatus {
    /// Every migration this binary embeds is applied. Later ones may be
    /// too: during a rolling upgrade older processes keep running on a
    /// schema that newer releases have expanded.
    Ready,
    /// No migration was ever applied: an empty database, or not mcq's.
    Missing,
    /// Some migrations this binary needs are not applied yet.
    Behind {
        /// Versions this binary embeds that the database lacks, ascending.
        missing: Vec<i64>,
    },
    /// A migration started and failed part-way; it needs a person.
    Dirty {
        /// The version that failed.
        version: i64,
    },
}

impl SchemaStatus {
    /// True when this binary can use the database.
    pub fn is_ready(&self) -> bool {
        matches!(self, SchemaStatus::Ready)
    }

    /// Compares the versions this binary embeds (`needed`) with the
    /// `applied` rows of `_sqlx_migrations` as `(version, success)`;
    /// `applied` is `None` when that table does not exist.
    pub(crate) fn compare(
        needed: impl IntoIterator<Item = i64>,
        applied: Option<Vec<(i64, bool)>>,
    ) -> SchemaStatus {
        let Some(applied) = applied else {
            return SchemaStatus::Missing;
        };
        let applied: BTreeMap<i64, bool> = applied.into_iter().collect();
        if let Some((&version, _)) = applied.iter().find(|(_, success)| !**success) {
            return SchemaStatus::Dirty { version };
        }
        if applied.is_empty() {
            return SchemaStatus::Missing;
        }
        let mut missing: Vec<i64> = needed
            .into_iter()
            .filter(|version| !applied.contains_key(version))
            .collect();
        missing.sort_unstable();
        if missing.is_empty() {
            SchemaStatus::Ready
        } else {
            SchemaStatus::Behind { missing }
        }
    }

    /// The versions of the up migrations `migrator` embeds.
    pub(crate) fn needed(migrator: &Migrator) -> impl Iterator<Item = i64> + '_ {
        migrator
            .iter()
            .filter(|m| !m.migration_type.is_down_migration())
            .map(|m| m.version)
    }
}

impl fmt::Display for SchemaStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaStatus::Ready => f.write_str("the schema is up to date"),
            SchemaStatus::Missing => {
                f.write_str("the database has no mcq schema: run `mcq migrate`")
            }
            SchemaStatus::Behind { missing } => {
                let list: Vec<String> = missing.iter().map(i64::to_string).collect();
                write!(
                    f,
                    "the schema lacks migration(s) {} that this binary needs: run `mcq migrate`",
                    list.join(", ")
                )
            }
            SchemaStatus::Dirty { version } => write!(
                f,
                "migration {version} failed part-way; repair it before running `mcq migrate` again"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SchemaStatus;

    /// Rows of `_sqlx_migrations` as `(version, success)`, if the table exists.
    type Applied = Option<Vec<(i64, bool)>>;

    #[test]
    fn status_follows_the_applied_versions() {
        let needed = [1, 2, 3];
        let ok =
            |versions: &[i64]| -> Applied { Some(versions.iter().map(|&v| (v, true)).collect()) };
        let cases: Vec<(Applied, SchemaStatus)> = vec![
            (None, SchemaStatus::Missing),
            (Some(vec![]), SchemaStatus::Missing),
            (ok(&[1, 2, 3]), SchemaStatus::Ready),
            // A newer release's migration does not make an older binary unready.
            (ok(&[1, 2, 3, 4]), SchemaStatus::Ready),
            (
                ok(&[1]),
                SchemaStatus::Behind {
                    missing: vec![2, 3],
                },
            ),
            (ok(&[2, 3]), SchemaStatus::Behind { missing: vec![1] }),
            (
                Some(vec![(1, true), (2, true), (3, false)]),
                SchemaStatus::Dirty { version: 3 },
            ),
        ];
        for (applied, expected) in cases {
            assert_eq!(
                SchemaStatus::compare(needed, applied.clone()),
                expected,
                "{applied:?}"
            );
        }
    }

    #[test]
    fn every_embedded_migration_is_needed() {
        static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");
        let needed: Vec<i64> = SchemaStatus::needed(&MIGRATOR).collect();
        assert_eq!(needed.len(), MIGRATOR.iter().count());
        assert!(!needed.is_empty());
    }

    #[test]
    fn messages_say_what_to_do() {
        assert!(SchemaStatus::Missing.to_string().contains("mcq migrate"));
        let behind = SchemaStatus::Behind {
            missing: vec![7, 8],
        };
        assert!(behind.to_string().contains("7, 8"), "{behind}");
        assert!(SchemaStatus::Ready.is_ready());
        assert!(!behind.is_ready());
    }
}
