//! `mcq bench scale` refuses what it cannot run with a usage error (exit
//! 2) that says what to give instead, before it connects or prints.

use super::mcq;

#[test]
fn bad_flags_are_rejected_with_a_clear_message() {
    for (args, expected) in [
        (
            &["--database-url", "sqlite:/tmp/mcq-scale.sqlite"][..],
            "needs PostgreSQL",
        ),
        (&["--database-url", "mcq.sqlite"][..], "give postgres://"),
        (
            &[
                "--database-url",
                "postgres://127.0.0.1:1/x",
                "--db-pool-size",
                "1",
            ][..],
            "db-pool-size",
        ),
        (
            &[
                "--database-url",
                "postgres://127.0.0.1:1/x",
                "--workers",
                "0",
            ][..],
            "workers",
        ),
        (
            &[
                "--database-url",
                "postgres://127.0.0.1:1/x",
                "--workers",
                "4,16,4",
            ][..],
            "4 is listed twice",
        ),
        (
            &[
                "--database-url",
                "postgres://127.0.0.1:1/x",
                "--fleet-url",
                "sqlite:fleet.sqlite",
            ][..],
            "give postgres://",
        ),
        (
            &[
                "--database-url",
                "postgres://127.0.0.1:1/x",
                "--db-pool-mode",
                "pooled",
            ][..],
            "not a pool mode",
        ),
        (
            &["--database-url", "postgres://127.0.0.1:1/x", "--poll", "0"][..],
            "not from 10ms to 60s",
        ),
        (
            &[
                "--database-url",
                "postgres://127.0.0.1:1/x",
                "--prefetch-ms",
                "10001",
            ][..],
            "0..=10000",
        ),
        (
            &[
                "--database-url",
                "postgres://127.0.0.1:1/x",
                "--prefetch-ms=-5",
            ][..],
            "--prefetch-ms",
        ),
    ] {
        let output = mcq()
            .args(["bench", "scale"])
            .args(args)
            .env_remove("DATABASE_URL")
            .output()
            .expect("run mcq");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: expected {expected:?} in\n{stderr}"
        );
        assert!(
            output.stdout.is_empty(),
            "{args:?} printed before refusing: {}",
            String::from_utf8_lossy(&output.stdout)
        );
    }
}
