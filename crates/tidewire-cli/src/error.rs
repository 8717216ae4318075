//! How a command ends: exit codes, and errors that print as one clear line.

use std::fmt;
use std::process::ExitCode;

/// What a command that ran to its end reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Everything worked: exit 0.
    Success,
    /// The tool ran and reported an error (`isError`): exit 1.
    ToolError,
    /// The user cancelled with Ctrl-C: exit 130.
    Cancelled,
}

impl Outcome {
    pub(crate) fn exit_code(self) -> ExitCode {
        match self {
            Self::Success => ExitCode::SUCCESS,
            Self::ToolError => ExitCode::from(1),
            Self::Cancelled => ExitCode::from(CANCELLED),
        }
    }
}

/// The exit status after Ctrl-C, as shells report a process ended by SIGINT.
pub(crate) const CANCELLED: u8 = 130;

/// A failure of the protocol, the transport or the command line: printed as one line, exit 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CliError {
    message: String,
}

impl CliError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// `context: cause`, where the cause is an error with its whole `source()` chain.
    pub(crate) fn with_cause(context: impl fmt::Display, cause: &dyn std::error::Error) -> Self {
        Self::new(format!("{context}: {}", describe(cause)))
    }

    /// The same error, with a hint of what to try next.
    #[must_use]
    pub(crate) fn hint(self, hint: &str) -> Self {
        Self::new(format!("{} ({hint})", self.message))
    }

    pub(crate) fn exit_code(&self) -> ExitCode {
        ExitCode::from(2)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// An error and its causes on one line, each cause once (some errors print their cause in
/// `Display` and also return it from `source()`).
pub(crate) fn describe(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = cause.source();
    }
    // One line, whatever the causes contain, without a dangling `: ` from an empty detail.
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    line.trim_end_matches([':', ' ']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);
    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("could not start")
        }
    }
    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn causes_are_joined_once_on_one_line() {
        let error = Outer(std::io::Error::other("no such\nfile"));
        assert_eq!(describe(&error), "could not start: no such file");
        let error = CliError::with_cause("cannot connect", &error);
        assert_eq!(
            error.to_string(),
            "cannot connect: could not start: no such file"
        );
    }
}
