//! The queue's PL/pgSQL functions, one file each in `functions/`: the
//! current text of every function, next to the Rust that calls it.
//! Migrations are append-only, so the text PostgreSQL runs is whatever the
//! newest migration defining a function says; the test below keeps each
//! file equal to that text (see migrations/README.md).

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::fs;
    use std::path::{Path, PathBuf};

    fn crate_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// `(file name, text)` of every file in `dir` with extension `ext`,
    /// sorted by name (migrations: oldest first).
    fn files(dir: &Path, ext: &str) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|entry| entry.expect("directory entry").path())
            .filter(|path| path.extension().is_some_and(|e| e == ext))
            .map(|path| {
                let name = path
                    .file_name()
                    .expect("file name")
                    .to_string_lossy()
                    .into_owned();
                let text = fs::read_to_string(&path).expect("read file");
                (name, text)
            })
            .collect();
        out.sort();
        out
    }

    /// Whether `text` mentions `FUNCTION name` as a whole word
    /// (`mcq_complete` is not mentioned by `FUNCTION mcq_complete_and_claim`).
    fn mentions(text: &str, name: &str) -> bool {
        let needle = format!("FUNCTION {name}");
        text.match_indices(&needle).any(|(at, _)| {
            text[at + needle.len()..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
        })
    }

    /// Names of the functions `text` creates.
    fn created(text: &str) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for prefix in ["CREATE FUNCTION ", "CREATE OR REPLACE FUNCTION "] {
            for (at, _) in text.match_indices(prefix) {
                let rest = &text[at + prefix.len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(rest.len());
                names.insert(rest[..end].to_owned());
            }
        }
        names
    }

    #[test]
    fn each_function_file_is_the_text_of_the_migration_that_last_defines_it() {
        let migrations = files(&crate_dir().join("../../migrations/postgres"), "sql");
        let functions = files(&crate_dir().join("src/postgres/functions"), "sql");
        assert!(!migrations.is_empty() && !functions.is_empty());
        for (file, text) in &functions {
            let name = file.trim_end_matches(".sql");
            assert_eq!(
                created(text).into_iter().collect::<Vec<_>>(),
                vec![name.to_owned()],
                "functions/{file} defines exactly the function it is named after"
            );
            let (migration, body) = migrations
                .iter()
                .rev()
                .find(|(_, body)| mentions(body, name))
                .unwrap_or_else(|| panic!("no migration defines {name}"));
            assert!(
                body.contains(text.as_str()),
                "{migration} is the newest migration mentioning FUNCTION {name}, and it \
                 must contain functions/{file} verbatim: a migration that redefines a \
                 function carries the file's new text"
            );
        }
        // Every function that exists after the migrations has its file: one
        // whose newest mention creates it (rather than dropping it).
        let defined: BTreeSet<String> = migrations
            .iter()
            .flat_map(|(_, t)| created(t))
            .filter(|name| {
                migrations
                    .iter()
                    .rev()
                    .find(|(_, body)| mentions(body, name))
                    .is_some_and(|(_, body)| created(body).contains(name))
            })
            .collect();
        let with_files: BTreeSet<String> = functions
            .iter()
            .map(|(file, _)| file.trim_end_matches(".sql").to_owned())
            .collect();
        assert_eq!(defined, with_files, "one file per function");
    }

    #[test]
    fn a_mention_is_a_whole_name() {
        assert!(mentions("CREATE FUNCTION mcq_complete(", "mcq_complete"));
        assert!(!mentions(
            "CREATE FUNCTION mcq_complete_and_claim(",
            "mcq_complete"
        ));
        assert_eq!(
            created("CREATE OR REPLACE FUNCTION a_b(x int)\nCREATE FUNCTION c()"),
            ["a_b".to_owned(), "c".to_owned()].into()
        );
    }
}
