//! Where a command connects: the TARGET of `call`, `list`, `read` and `prompt`.
//!
//! A target is a URL (`http(s)://…`, `ws(s)://…`) given before the command's own operands, or a
//! server program to start, given after `--`. With `--`, the operands may come before it
//! (`tidewire call echo '{}' -- ./server`) or at the end of the command line
//! (`tidewire call -- ./server echo '{}'`); in the second form they are taken from the end.

use crate::error::CliError;

/// A server to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// `http://` or `https://`: Streamable HTTP.
    Http(String),
    /// `ws://` or `wss://`: WebSocket.
    WebSocket(String),
    /// A program to start, speaking MCP on its stdin and stdout.
    Stdio {
        /// The program.
        program: String,
        /// Its arguments.
        args: Vec<String>,
    },
}

impl Target {
    /// Parses a URL target.
    pub(crate) fn from_url(text: &str) -> Result<Self, CliError> {
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            Ok(Self::Http(text.to_owned()))
        } else if lower.starts_with("ws://") || lower.starts_with("wss://") {
            Ok(Self::WebSocket(text.to_owned()))
        } else {
            Err(CliError::new(format!(
                "`{text}` is not a target: give an http(s):// or ws(s):// URL, or `-- COMMAND ARGS…` \
                 to start a server and talk to it over stdio"
            )))
        }
    }

    /// How the target is named in messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Http(url) | Self::WebSocket(url) => url.clone(),
            Self::Stdio { program, .. } => format!("the server `{program}`"),
        }
    }
}

/// What a command takes after its target.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Operands {
    /// How many operands must be given.
    pub(crate) required: usize,
    /// One more, optional operand, recognised by this test when it has to be taken from the end
    /// of a server command line.
    pub(crate) optional: Option<fn(&str) -> bool>,
    /// What the operands are called, for messages (`TOOL [JSON-ARGS]`).
    pub(crate) usage: &'static str,
}

/// True for a JSON object argument (`{…}`).
pub(crate) fn looks_like_json_object(text: &str) -> bool {
    text.trim_start().starts_with('{')
}

/// Splits a command line into the target and the command's operands.
///
/// `before` are the positional arguments before `--`, `after` those after it.
pub(crate) fn split(
    before: Vec<String>,
    mut after: Vec<String>,
    operands: Operands,
) -> Result<(Target, Vec<String>), CliError> {
    let most = operands.required + usize::from(operands.optional.is_some());
    let check = |ops: Vec<String>| -> Result<Vec<String>, CliError> {
        if ops.len() < operands.required {
            Err(CliError::new(format!(
                "missing {}: the usage is TARGET {}",
                operands.usage, operands.usage
            )))
        } else if ops.len() > most {
            Err(CliError::new(format!(
                "too many arguments ({}): the usage is TARGET {}",
                ops.join(" "),
                operands.usage
            )))
        } else {
            Ok(ops)
        }
    };
    if after.is_empty() {
        let mut before = before.into_iter();
        let Some(url) = before.next() else {
            return Err(CliError::new(format!(
                "missing TARGET: give an http(s):// or ws(s):// URL, or `-- COMMAND ARGS…`, then {}",
                operands.usage
            )));
        };
        let target = Target::from_url(&url)?;
        return Ok((target, check(before.collect())?));
    }
    let ops = if before.is_empty() {
        // The operands are at the end of the server command line.
        let mut take = operands.required;
        if let Some(is_optional) = operands.optional
            && after.len() > take + 1
            && after.last().is_some_and(|last| is_optional(last))
        {
            take += 1;
        }
        if after.len() <= take {
            return Err(CliError::new(format!(
                "after `--` give the server command and then {}",
                operands.usage
            )));
        }
        after.split_off(after.len() - take)
    } else {
        before
    };
    let mut command = after.into_iter();
    let Some(program) = command.next() else {
        return Err(CliError::new("no server command after `--`"));
    };
    let target = Target::Stdio {
        program,
        args: command.collect(),
    };
    Ok((target, check(ops)?))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const CALL: Operands = Operands {
        required: 1,
        optional: Some(looks_like_json_object),
        usage: "TOOL [JSON-ARGS]",
    };

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn stdio(program: &str, args: &[&str]) -> Target {
        Target::Stdio {
            program: program.to_owned(),
            args: strings(args),
        }
    }

    #[test]
    fn urls_come_first() {
        let (target, ops) = split(strings(&["http://h/mcp", "echo", "{}"]), vec![], CALL).unwrap();
        assert_eq!(target, Target::Http("http://h/mcp".to_owned()));
        assert_eq!(ops, strings(&["echo", "{}"]));
        let (target, _) = split(strings(&["wss://h/ws", "echo"]), vec![], CALL).unwrap();
        assert_eq!(target, Target::WebSocket("wss://h/ws".to_owned()));
        let error = split(strings(&["ftp://h", "echo"]), vec![], CALL).unwrap_err();
        assert!(error.to_string().contains("not a target"), "{error}");
        let error = split(strings(&["http://h"]), vec![], CALL).unwrap_err();
        assert!(error.to_string().contains("missing TOOL"), "{error}");
        let error = split(strings(&["http://h", "a", "{}", "x"]), vec![], CALL).unwrap_err();
        assert!(error.to_string().contains("too many"), "{error}");
    }

    #[test]
    fn a_command_takes_its_operands_from_either_side() {
        let (target, ops) = split(
            strings(&["crawl", "{\"a\":1}"]),
            strings(&["srv", "serve", "--stdio"]),
            CALL,
        )
        .unwrap();
        assert_eq!(target, stdio("srv", &["serve", "--stdio"]));
        assert_eq!(ops, strings(&["crawl", "{\"a\":1}"]));

        let (target, ops) = split(
            vec![],
            strings(&["srv", "serve", "--stdio", "crawl", "{\"a\":1}"]),
            CALL,
        )
        .unwrap();
        assert_eq!(target, stdio("srv", &["serve", "--stdio"]));
        assert_eq!(ops, strings(&["crawl", "{\"a\":1}"]));

        let (target, ops) = split(vec![], strings(&["srv", "echo"]), CALL).unwrap();
        assert_eq!(target, stdio("srv", &[]));
        assert_eq!(ops, strings(&["echo"]));

        let error = split(vec![], strings(&["srv"]), CALL).unwrap_err();
        assert!(error.to_string().contains("server command"), "{error}");
    }
}
