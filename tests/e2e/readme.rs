//! The README's examples, pasted in order: its shell blocks of the pricing,
//! service and API sections run with `bash -euo pipefail` against a real
//! `mcq serve` on a temporary SQLite file, and every block must exit 0.
//!
//! Left out, by section: "Install" and "Quick start" (a release build, the
//! demo and the whole test suite: minutes each, and the suite would run
//! itself) and "With PostgreSQL and many workers" (it starts its own
//! PostgreSQL and processes; the process tests cover that set-up). A block
//! preceded by `<!-- readme-test: skip (reason) -->` is left out too: the
//! one that starts the server, which the test starts itself.

use std::path::Path;
use std::process::Command;

use super::server::{Server, TempDir, mcq_binary};

/// The `##`/`###` sections whose shell blocks run.
const RUN: &[&str] = &[
    "Pricing on one machine",
    "Running the service",
    "The HTTP API",
];

/// The marker that leaves the next block out.
const SKIP: &str = "<!-- readme-test: skip";

/// A shell block of the README: the section it is in and its text.
#[derive(Debug)]
struct Block {
    section: String,
    line: usize,
    text: String,
    skipped: bool,
}

/// Every ```sh block with the innermost heading above it.
fn sh_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut section = String::new();
    let mut current: Option<Block> = None;
    let mut skip_next = false;
    for (number, line) in markdown.lines().enumerate() {
        if let Some(block) = current.as_mut() {
            if line.trim_start().starts_with("```") {
                blocks.extend(current.take());
            } else {
                block.text.push_str(line);
                block.text.push('\n');
            }
            continue;
        }
        if let Some(heading) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            section = heading.trim().to_owned();
        } else if line.trim() == "```sh" {
            current = Some(Block {
                section: section.clone(),
                line: number + 1,
                text: String::new(),
                skipped: skip_next,
            });
        }
        if !line.trim().is_empty() {
            skip_next = line.trim_start().starts_with(SKIP);
        }
    }
    blocks
}

/// Whether `tool` is on the PATH.
fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|out| out.status.success())
}

#[test]
fn readme_blocks_run_in_order_against_a_real_server() {
    let missing: Vec<&str> = ["bash", "curl", "jq"]
        .into_iter()
        .filter(|tool| !have(tool))
        .collect();
    if !missing.is_empty() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the README test needs {missing:?} (.ci/run installs them)"
        );
        eprintln!("skipping the README test: {missing:?} not installed");
        return;
    }
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("read README.md");
    let blocks: Vec<Block> = sh_blocks(&readme)
        .into_iter()
        .filter(|b| RUN.contains(&b.section.as_str()) && !b.skipped)
        .collect();
    // The test cannot pass by finding nothing: the examples it exists for.
    let all: String = blocks.iter().map(|b| b.text.as_str()).collect();
    for example in [
        "mcq price",
        "mcq submit",
        "--quiet",
        "mcq status",
        "curl",
        "jq -r .id",
    ] {
        assert!(all.contains(example), "no README block runs {example:?}");
    }

    let dir = TempDir::new();
    let server = Server::start(&dir.sqlite_url(), &[]);
    let bin_dir = mcq_binary()
        .parent()
        .expect("the binary's directory")
        .to_owned();
    let path = std::env::join_paths(std::iter::once(bin_dir).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .expect("PATH");
    // One script, so that a block sees what earlier ones set (ids), with a
    // marker before each block to name the one that failed.
    let mut script = String::new();
    for (i, block) in blocks.iter().enumerate() {
        script.push_str(&format!("echo '@@ block {i}' >&2\n{}", block.text));
    }
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", &script])
        .current_dir(&dir.0)
        .env("PATH", path)
        .env("MCQ_SERVER", &server.base_url)
        .env("RUST_LOG", "warn")
        .env("NO_COLOR", "1")
        .env_remove("DATABASE_URL")
        .env_remove("MCQ_LISTEN")
        .output()
        .expect("run bash");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let failed: usize = stderr
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("@@ block "))
            .and_then(|n| n.trim().parse().ok())
            .expect("a block marker");
        let block = &blocks[failed];
        panic!(
            "README.md line {} ({}) exited with {}:\n{}\n--- stdout ---\n{}\n--- stderr ---\n{stderr}",
            block.line,
            block.section,
            out.status,
            block.text,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let ran = stderr
        .lines()
        .filter(|l| l.starts_with("@@ block "))
        .count();
    assert_eq!(ran, blocks.len(), "every block ran:\n{stderr}");
}

#[test]
fn blocks_know_their_section_and_the_skip_marker() {
    let text = "## A\n```sh\none\n```\n### B\n<!-- readme-test: skip (x) -->\n```sh\ntwo\n```\n\n```sh\nthree\n```\n";
    let blocks = sh_blocks(text);
    let seen: Vec<(&str, &str, bool)> = blocks
        .iter()
        .map(|b| (b.section.as_str(), b.text.trim(), b.skipped))
        .collect();
    assert_eq!(
        seen,
        [
            ("A", "one", false),
            ("B", "two", true),
            ("B", "three", false)
        ]
    );
}
