//! Records the commit the benchmark was built from, so every output can
//! name it: `MCQ_COMMIT` is `git rev-parse --short=12 HEAD` (with `-dirty`
//! when tracked files differ from it), or `unknown` outside a git checkout.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).map_or_else(
        || "unknown".to_owned(),
        |hash| {
            let dirty = Command::new("git")
                .args(["diff", "--quiet", "HEAD", "--"])
                .status()
                .is_ok_and(|s| !s.success());
            if dirty { format!("{hash}-dirty") } else { hash }
        },
    );
    println!("cargo:rustc-env=MCQ_COMMIT={commit}");
    // A new commit moves HEAD (or the branch it names, logged in logs/HEAD).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/logs/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
