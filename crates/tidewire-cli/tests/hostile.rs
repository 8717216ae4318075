//! A hostile server cannot drive the user's terminal: its progress message, log message and
//! logger name, tool text, error message and stderr carry escape sequences (OSC 52 writes the
//! clipboard, CSI 2J clears the screen), a C1 CSI, a bidirectional override and a bare carriage
//! return. On stderr they always show as escapes; on stdout they do on a terminal, and `--raw`
//! passes them through. The server is a small shell script that speaks just enough JSON-RPC.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};

use expectrl::process::unix::WaitStatus;
use expectrl::{Expect, Session};
use support::{BIN, LIMIT};

/// OSC 52 (write "Hello" to the clipboard) and CSI 2J (clear the screen), as JSON escapes.
const ATTACK_JSON: &str = r"\u001b]52;c;SGVsbG8=\u0007\u001b[2J";
/// The same as the characters a terminal would obey.
const ATTACK: &str = "\u{1b}]52;c;SGVsbG8=\u{7}\u{1b}[2J";
/// The same as it is shown instead.
const ATTACK_SHOWN: &str = r"\x1b]52;c;SGVsbG8=\x07\x1b[2J";

/// A stdio server of the session era: it writes the attack on its stderr, refuses the
/// `server/discover` probe as such a server does (-32601), answers `initialize`, and answers the
/// first `tools/call` with a log message, a progress report and `$HOSTILE_ANSWER` (the
/// response's `result` or `error` member). The texts come from the environment, written with
/// JSON escapes, so the shell never sees a control character.
const SCRIPT: &str = r#"
printf 'stderr \033]52;c;SGVsbG8=\007\033[2J\n' >&2
id_of() { printf '%s\n' "$1" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p'; }
IFS= read -r line || exit 1
case "$line" in *'"server/discover"'*)
  printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no such method"}}\n' "$(id_of "$line")"
  IFS= read -r line || exit 1 ;;
esac
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"hostile","version":"0"}}}\n' "$(id_of "$line")"
while IFS= read -r line; do
  case "$line" in *'"tools/call"'*) break ;; esac
done
id=$(id_of "$line")
printf '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"%s","data":"%s"}}\n' "$HOSTILE_LOGGER" "$HOSTILE_LOG"
printf '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1,"total":2,"message":"%s"}}\n' "$id" "$HOSTILE_STEP"
printf '{"jsonrpc":"2.0","id":%s,%s}\n' "$id" "$HOSTILE_ANSWER"
cat >/dev/null
"#;

/// The tool's text: the attack, then lines with a tab and a bare carriage return.
fn tool_text_json() -> String {
    format!(r"tool {ATTACK_JSON}\nsecond\tline\rthird\nthe end")
}

/// `tidewire call FLAGS… --show-stderr -- sh -c SCRIPT hostile`, with the server's texts in the
/// environment; `answer` is the response's `result` or `error` member.
fn hostile_call(flags: &[&str], answer: &str) -> Command {
    let mut command = Command::new(BIN);
    command
        .arg("call")
        .args(flags)
        .args(["--show-stderr", "--", "sh", "-c", SCRIPT, "hostile"])
        .env("HOSTILE_STEP", format!("step {ATTACK_JSON}"))
        .env("HOSTILE_LOGGER", r"evil\u202e")
        .env("HOSTILE_LOG", format!(r"log {ATTACK_JSON} \u009b2J"))
        .env("HOSTILE_ANSWER", answer);
    command
}

fn text_answer() -> String {
    format!(
        r#""result":{{"content":[{{"type":"text","text":"{}"}}]}}"#,
        tool_text_json()
    )
}

fn run(command: Command) -> Output {
    assert_cmd::Command::from_std(command)
        .timeout(LIMIT)
        .output()
        .expect("run tidewire")
}

/// No character that a terminal would act on (other than the line breaks that end lines).
fn assert_inert(what: &str, text: &str) {
    let active: Vec<char> = text
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        })
        .collect();
    assert!(active.is_empty(), "{what} has {active:?}:\n{text:?}");
}

#[test]
fn on_stderr_the_servers_text_shows_as_escapes() {
    let output = run(hostile_call(&[], &text_answer()));
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{err}");
    assert_inert("stderr", &err);
    for wanted in [
        format!("hostile: progress 1/2 step {ATTACK_SHOWN}"),
        format!(r"[info evil\u{{202e}}] log {ATTACK_SHOWN} \u{{9b}}2J"),
        format!("stderr {ATTACK_SHOWN}"),
    ] {
        assert!(err.contains(&wanted), "`{wanted}` missing from:\n{err}");
    }
    // Into a pipe, stdout is the tool's text as it came.
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("tool {ATTACK}\nsecond\tline\rthird\nthe end\n")
    );
}

#[test]
fn a_hostile_error_message_is_one_escaped_line() {
    let answer =
        format!(r#""error":{{"code":-32000,"message":"bad {ATTACK_JSON}\n\u009b31m\u202e"}}"#);
    let output = run(hostile_call(&["--quiet"], &answer));
    let err = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(output.stdout.is_empty());
    assert_inert("stderr", &err);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected:\n{err}");
    assert!(
        lines[0].contains(&format!(r"bad {ATTACK_SHOWN} \u{{9b}}31m\u{{202e}}")),
        "{err}"
    );
}

/// Runs the hostile call in a pseudo-terminal and returns all it showed, up to the end of the
/// tool's text.
fn on_a_terminal(flags: &[&str]) -> String {
    let mut session =
        Session::spawn(hostile_call(flags, &text_answer())).expect("spawn in a pseudo-terminal");
    session
        .get_process_mut()
        .set_window_size(200, 40)
        .expect("set the terminal size");
    session.set_expect_timeout(Some(LIMIT));
    let found = session
        .expect("the end")
        .unwrap_or_else(|e| panic!("the tool's text did not show: {e}"));
    let status = session.get_process().wait().expect("wait for tidewire");
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
    String::from_utf8_lossy(found.as_bytes()).into_owned()
}

#[test]
fn on_a_terminal_stdout_shows_escapes_too_unless_raw() {
    let shown = on_a_terminal(&[]);
    // The program's own styling and bar use SGR sequences and carriage returns; none of the
    // server's control characters reaches the terminal.
    for active in [
        "\u{1b}]52",
        "\u{1b}[2J",
        "\u{7}",
        "\u{9b}",
        "\u{202e}",
        "line\rthird",
    ] {
        assert!(
            !shown.contains(active),
            "{active:?} reached the terminal:\n{shown:?}"
        );
    }
    for wanted in [
        format!("tool {ATTACK_SHOWN}"),
        // The tab of the tool's text is kept; the bare carriage return is not.
        "second\tline\\rthird".to_owned(),
        format!("log {ATTACK_SHOWN}"),
        format!("stderr {ATTACK_SHOWN}"),
    ] {
        assert!(
            shown.contains(&wanted),
            "`{wanted}` missing from:\n{shown:?}"
        );
    }

    let raw = on_a_terminal(&["--raw"]);
    assert!(
        raw.contains(&format!("tool {ATTACK}")),
        "--raw passes the tool's text through:\n{raw:?}"
    );
    assert!(raw.contains("second\tline\rthird"), "{raw:?}");
    // stderr is escaped all the same.
    assert!(raw.contains(&format!("log {ATTACK_SHOWN}")), "{raw:?}");
    assert!(raw.contains(&format!("stderr {ATTACK_SHOWN}")), "{raw:?}");
}
