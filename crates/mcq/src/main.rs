//! The `mcq` command: price locally, run the service and its workers,
//! submit and watch batches, and measure local against distributed.

mod cli;

fn main() -> std::process::ExitCode {
    let cli = match cli::parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let result = cli::run(cli);
    if let Err(err) = &result {
        if cli::json_log() {
            tracing::error!(error = %describe(err), "stopped by an error");
        } else {
            eprintln!("error: {}", describe(err));
        }
    }
    cli::exit::code(&result)
}

/// The error and its causes, each said once. Libraries often repeat their
/// source in their own message (sqlx's database errors did so three times
/// over), so a cause whose text is already in the message is left out.
/// sqlx ends PostgreSQL's errors with the line of PostgreSQL's C source
/// that raised them ("at line 374"), which reads like a line of the user's
/// input: that ending is dropped before the comparison.
fn describe(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        let part = without_source_line(&part);
        if text.contains(part) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(part);
    }
    text
}

/// `text` without a trailing " at line N".
fn without_source_line(text: &str) -> &str {
    match text.rsplit_once(" at line ") {
        Some((said, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => said,
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::describe;

    /// An error that repeats its source in its message, like sqlx's.
    #[derive(Debug)]
    struct Wrapped(std::io::Error);

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "error communicating with database: {}", self.0)
        }
    }

    impl std::error::Error for Wrapped {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let err = anyhow::Error::new(Wrapped(refused)).context("connecting to postgres://db");
        assert_eq!(
            describe(&err),
            "connecting to postgres://db: error communicating with database: refused"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(describe(&plain), "outer: inner");
    }

    /// PostgreSQL's source line, which sqlx appends, is no line of the
    /// user's: it is never said, and a cause that differs from the message
    /// only by it is said once.
    #[test]
    fn postgres_source_lines_are_left_out() {
        let err = anyhow::anyhow!("relation \"batches\" already exists at line 1164")
            .context("error returned from database: relation \"batches\" already exists")
            .context("migrating");
        assert_eq!(
            describe(&err),
            "migrating: error returned from database: relation \"batches\" already exists"
        );
        let err = anyhow::anyhow!("syntax error at line 3 of the file, at line 12");
        assert_eq!(describe(&err), "syntax error at line 3 of the file,");
        let err = anyhow::anyhow!("nothing at line end");
        assert_eq!(describe(&err), "nothing at line end");
    }
}
