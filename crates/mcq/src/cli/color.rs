//! `--color auto|always|never`: whether mcq writes ANSI colours (clap's
//! messages, the logs, progress bars). `auto` colours a terminal only, and
//! not when `NO_COLOR` is set to anything but the empty string, so pipes
//! and log files get plain text.

use std::io::IsTerminal as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// The `--color` flag.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Color {
    /// Colour a terminal unless `NO_COLOR` is set.
    #[default]
    Auto,
    /// Always colour, even a pipe or a file.
    Always,
    /// Never colour.
    Never,
}

/// Whether standard error gets colours; set once by [`set`] at start.
static STDERR: AtomicBool = AtomicBool::new(false);

impl Color {
    /// The choice on the command line `args` (before clap has parsed it,
    /// so that clap's own messages follow it too).
    pub(crate) fn scan(args: &[std::ffi::OsString]) -> Color {
        let mut choice = Color::Auto;
        let mut words = args.iter().skip(1).filter_map(|a| a.to_str());
        while let Some(word) = words.next() {
            let value = match word {
                "--" => break,
                "--color" => words.next(),
                _ => word.strip_prefix("--color="),
            };
            if let Some(parsed) =
                value.and_then(|v| <Color as clap::ValueEnum>::from_str(v, true).ok())
            {
                choice = parsed;
            }
        }
        choice
    }

    /// Whether a stream colours under this choice.
    fn colours(self, is_terminal: bool) -> bool {
        match self {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => {
                is_terminal
                    && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
            }
        }
    }

    /// clap's setting for the same choice.
    pub(crate) fn for_clap(self) -> clap::ColorChoice {
        let stderr = self.colours(std::io::stderr().is_terminal());
        let stdout = self.colours(std::io::stdout().is_terminal());
        // clap writes help to stdout and errors to stderr; one setting
        // serves both, so colour only when both streams would.
        if stderr && stdout {
            clap::ColorChoice::Always
        } else {
            clap::ColorChoice::Never
        }
    }
}

/// Records the choice for the rest of the process.
pub(crate) fn set(choice: Color) {
    STDERR.store(
        choice.colours(std::io::stderr().is_terminal()),
        Ordering::Relaxed,
    );
}

/// Whether standard error (logs, progress bars) gets colours.
pub(crate) fn stderr() -> bool {
    STDERR.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::Color;

    fn scan(line: &str) -> Color {
        let args: Vec<std::ffi::OsString> = line.split_whitespace().map(Into::into).collect();
        Color::scan(&args)
    }

    #[test]
    fn the_flag_is_found_in_either_spelling_and_not_after_a_double_dash() {
        assert_eq!(scan("mcq status x"), Color::Auto);
        assert_eq!(scan("mcq --color never status x"), Color::Never);
        assert_eq!(scan("mcq status --color=always x"), Color::Always);
        assert_eq!(scan("mcq status -- --color never"), Color::Auto);
    }

    #[test]
    fn always_and_never_do_not_look_at_the_stream() {
        assert!(Color::Always.colours(false));
        assert!(!Color::Never.colours(true));
        assert!(!Color::Auto.colours(false));
    }
}
