//! `tidewire call`, `list`, `read`, `prompt` and `demo` as a script meets them: exit codes,
//! `--json` output, plain progress lines without a terminal, and one-line errors. Against the
//! demo server over stdio and over HTTP (Streamable HTTP, legacy SSE, WebSocket), and against
//! the Python SDK's peer server when it is installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;

use serde_json::Value;
use support::{BIN, HttpServer, LIMIT, crawl_args, stdio_server};
use tidewire_tests::external::python_peers;

/// `tidewire ARGS…`, bounded in time.
fn tidewire(args: &[String]) -> Output {
    assert_cmd::Command::new(BIN)
        .args(args)
        .timeout(LIMIT)
        .output()
        .expect("run tidewire")
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// `ARGS… -- <tidewire> serve --stdio OPERANDS…`
fn over_stdio(args: &[&str], operands: &[&str]) -> Vec<String> {
    let mut all = strings(args);
    all.extend(stdio_server());
    all.extend(strings(operands));
    all
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Exit status 2, nothing on stdout, and exactly one line on stderr; returns that line.
fn one_line_error(output: &Output) -> String {
    let err = stderr(output);
    assert_eq!(output.status.code(), Some(2), "stderr: {err}");
    assert!(output.stdout.is_empty(), "stdout: {}", stdout(output));
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line expected:\n{err}");
    assert!(lines[0].starts_with("tidewire: "), "{err}");
    lines[0].to_owned()
}

#[test]
fn call_over_stdio_prints_the_text_and_exits_0() {
    let output = tidewire(&over_stdio(&["call"], &["echo", r#"{"text":"héllo 🌊"}"#]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "héllo 🌊\n");

    // The operands may also come before `--`.
    let mut args = strings(&["call", "echo", r#"{"text":"before"}"#]);
    args.extend(stdio_server());
    let output = tidewire(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "before\n");
}

#[test]
fn call_speaks_either_era() {
    for era in ["modern", "auto", "legacy"] {
        let output = tidewire(&over_stdio(
            &["call", "--era", era],
            &["crawl", r#"{"urls":["a","b"],"delay_ms":1}"#],
        ));
        assert!(output.status.success(), "{era}: {}", stderr(&output));
        assert_eq!(stdout(&output), "Crawled 2 URLs\n", "{era}");
        assert!(
            stderr(&output).contains("2/2"),
            "{era}: progress shows: {}",
            stderr(&output)
        );
    }
    // No sampling handler in the program: a stateless server says -32021, clearly.
    let output = tidewire(&over_stdio(
        &["call", "--era", "modern"],
        &["sample", r#"{"prompt":"x"}"#],
    ));
    assert!(!output.status.success());
    assert!(stderr(&output).contains("-32021"), "{}", stderr(&output));
    let refused = tidewire(&strings(&[
        "call",
        "--era",
        "sometime",
        "http://127.0.0.1:9/mcp",
        "echo",
    ]));
    assert_eq!(refused.status.code(), Some(2));
}

#[test]
fn without_a_terminal_progress_is_plain_lines_and_quiet_silences_it() {
    let args = crawl_args(3, 1);
    let output = tidewire(&over_stdio(&["call", "--json"], &["crawl", &args]));
    assert!(output.status.success(), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).expect("--json prints JSON");
    assert_eq!(result["content"][0]["text"], "Crawled 3 URLs");
    let err = stderr(&output);
    for step in 1..=3 {
        let line =
            format!("crawl: progress {step}/3 Fetching https://example.com/page/{step} ({step}/3)");
        assert!(err.contains(&line), "`{line}` missing from:\n{err}");
    }
    assert!(
        !err.contains('\u{1b}'),
        "no escape codes without a terminal:\n{err:?}"
    );

    let output = tidewire(&over_stdio(&["call", "--quiet"], &["crawl", &args]));
    assert!(output.status.success());
    assert_eq!(stdout(&output), "Crawled 3 URLs\n");
    assert!(output.stderr.is_empty(), "{}", stderr(&output));
}

#[test]
fn logs_print_on_stderr_and_the_result_on_stdout() {
    let output = tidewire(&over_stdio(&["call"], &["test_tool_with_logging"]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "Tool with logging executed successfully\n");
    let err = stderr(&output);
    assert!(err.contains("[info] Tool execution started"), "{err}");
    assert!(err.contains("[info] Tool execution completed"), "{err}");
}

#[test]
fn the_servers_stderr_shows_only_on_request() {
    // The line is written before the server starts, so it is read long before the call ends.
    let script = format!("echo hello from the server >&2; exec '{BIN}' serve --stdio");
    let args = |show: bool| {
        let mut args = strings(&["call"]);
        if show {
            args.push("--show-stderr".to_owned());
        }
        args.extend(strings(&[
            "--",
            "sh",
            "-c",
            &script,
            "echo",
            r#"{"text":"x"}"#,
        ]));
        args
    };
    let shown = tidewire(&args(true));
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(
        stderr(&shown).contains("hello from the server"),
        "{}",
        stderr(&shown)
    );
    let hidden = tidewire(&args(false));
    assert!(hidden.status.success(), "{}", stderr(&hidden));
    assert!(hidden.stderr.is_empty(), "{}", stderr(&hidden));
}

#[test]
fn a_tool_error_exits_1_and_json_shows_is_error() {
    let output = tidewire(&over_stdio(&["call", "--json"], &["test_error_handling"]));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(result["isError"], true);
    assert!(stderr(&output).contains("the tool `test_error_handling` reported an error"));
}

#[test]
fn a_timeout_gives_up_with_one_line_and_exit_2() {
    let output = tidewire(&over_stdio(
        &["call", "--timeout", "0.3"],
        &["crawl", &crawl_args(5, 1000)],
    ));
    let line = one_line_error(&output);
    assert!(line.contains("`crawl` gave no result in time"), "{line}");
}

#[test]
fn images_are_saved_to_files_whose_paths_are_printed() {
    let dir = std::env::temp_dir().join(format!("tidewire-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let save = format!("--save-dir={}", dir.display());
    let output = tidewire(&over_stdio(&["call", &save], &["test_image_content"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    let path = text
        .trim()
        .strip_prefix("[image image/png saved to ")
        .and_then(|rest| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("unexpected output: {text}"));
    let bytes = std::fs::read(path).expect("the saved file");
    assert_eq!(&bytes[..4], b"\x89PNG", "a PNG file");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn saved_files_are_new_files_no_one_else_can_predict_or_plant() {
    use std::os::unix::fs::PermissionsExt;

    let base = std::env::temp_dir().join(format!("tidewire-cli-save-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let saved_path = |output: &Output| -> std::path::PathBuf {
        let text = stdout(output);
        text.trim()
            .strip_prefix("[image image/png saved to ")
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or_else(|| panic!("unexpected output: {text}"))
            .into()
    };

    // By default: a new directory of its own, mode 0700, under the temporary directory, with
    // another name on every run.
    let default_run = || {
        let output = assert_cmd::Command::new(BIN)
            .args(over_stdio(&["call"], &["test_image_content"]))
            .env("TMPDIR", &base)
            .timeout(LIMIT)
            .output()
            .expect("run tidewire");
        assert!(output.status.success(), "{}", stderr(&output));
        saved_path(&output)
    };
    let (first, second) = (default_run(), default_run());
    let dir = first.parent().unwrap().to_path_buf();
    assert_eq!(dir.parent(), Some(base.as_path()));
    assert_ne!(
        second.parent(),
        Some(dir.as_path()),
        "a new directory per run"
    );
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
    assert_eq!(&std::fs::read(&first).unwrap()[..4], b"\x89PNG");

    // With --save-dir: a link planted at the first name and a file at the second are left
    // alone; the content goes to a new file.
    let victim = base.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, base.join("tidewire-test_image_content-1.png")).unwrap();
    let existing = base.join("tidewire-test_image_content-2.png");
    std::fs::write(&existing, b"keep").unwrap();
    let save = format!("--save-dir={}", base.display());
    let output = tidewire(&over_stdio(&["call", &save], &["test_image_content"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let path = saved_path(&output);
    assert_eq!(path, base.join("tidewire-test_image_content-3.png"));
    assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(std::fs::read(&existing).unwrap(), b"keep");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn absurd_durations_are_one_line_usage_errors() {
    for value in ["1e30", "-1", "0", "NaN", "inf", "ten", "1e-12"] {
        let output = tidewire(&strings(&[
            "call",
            "--timeout",
            value,
            "http://127.0.0.1:1/mcp",
            "echo",
        ]));
        let line = one_line_error(&output);
        assert!(
            line.contains("--timeout") && line.contains(value),
            "{value}: {line}"
        );
    }
    // A unit is fine; the call then fails for want of a server, not a usage error.
    let output = tidewire(&strings(&[
        "call",
        "--timeout",
        "2m",
        "http://127.0.0.1:1/mcp",
        "echo",
    ]));
    let line = one_line_error(&output);
    assert!(line.contains("the connection was refused"), "{line}");
}

#[test]
fn errors_exit_2_with_one_clear_line() {
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            over_stdio(&["call"], &["no_such_tool"]),
            "unknown tool: no_such_tool",
        ),
        (
            over_stdio(&["call"], &["echo", "{\"text\":"]),
            "JSON-ARGS is not valid JSON",
        ),
        (
            strings(&["call", "http://127.0.0.1:1/mcp", "echo", "[1]"]),
            "must be a JSON object",
        ),
        (
            strings(&["call", "--", "/no/such/server", "echo"]),
            "could not start the server program `/no/such/server`",
        ),
        (
            strings(&["call", "http://127.0.0.1:1/mcp", "echo"]),
            "the connection was refused",
        ),
        (
            strings(&["call", "ftp://example.com", "echo"]),
            "is not a target",
        ),
        (strings(&["call", "http://127.0.0.1:1/mcp"]), "missing TOOL"),
        (
            strings(&["list", "http://127.0.0.1:1/mcp", "widgets"]),
            "cannot list `widgets`: choose tools, resources or prompts",
        ),
        (
            strings(&[
                "call",
                "--header",
                "no-colon",
                "http://127.0.0.1:1/mcp",
                "echo",
            ]),
            "NAME:VALUE",
        ),
        (
            strings(&["call", "http://127.0.0.1:1/mcp", "echo", "{}", "extra"]),
            "too many arguments",
        ),
        // The server process exits at once: the handshake fails and says so.
        (
            strings(&[
                "call",
                "--",
                "sh",
                "-c",
                "echo the server broke >&2; exit 3",
                "echo",
            ]),
            "cannot connect to the server `sh`",
        ),
    ];
    for (args, wanted) in cases {
        let output = tidewire(&args);
        let line = one_line_error(&output);
        assert!(
            line.contains(wanted),
            "{args:?}: `{wanted}` missing from: {line}"
        );
    }
}

/// `list` into a pipe whose reader has gone (as `| head` leaves it) ends normally: `print!`
/// used to panic on the broken pipe.
#[test]
fn a_closed_stdout_is_no_panic() {
    // The reader closes its end at once, long before `list` has its table.
    let script = "\"$0\" \"$@\" | (exec 0<&-; sleep 0.2)";
    let mut args = strings(&["-c", script, BIN, "list"]);
    args.extend(stdio_server());
    let output = assert_cmd::Command::new("sh")
        .args(&args)
        .timeout(LIMIT)
        .output()
        .expect("run sh");
    let err = stderr(&output);
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn list_read_and_prompt_over_stdio() {
    let output = tidewire(&over_stdio(&["list", "--json"], &["tools"]));
    assert!(output.status.success(), "{}", stderr(&output));
    let listed: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for wanted in [
        "echo",
        "crawl",
        "crawl_status",
        "test_simple_text",
        "json_schema_2020_12_tool",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }

    let output = tidewire(&over_stdio(&["list"], &[]));
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    let header = table.lines().next().unwrap();
    for column in ["NAME", "TITLE", "DESCRIPTION", "ARGUMENTS"] {
        assert!(header.contains(column), "{header}");
    }
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("crawl ") && l.contains("delay_ms*, urls*")),
        "{table}"
    );
    assert!(
        table
            .trim_end()
            .ends_with(&format!("{} tools", names.len())),
        "{table}"
    );

    let output = tidewire(&over_stdio(&["list"], &["resources"]));
    assert!(
        stdout(&output).contains("test://template/{id}/data"),
        "{}",
        stdout(&output)
    );

    let output = tidewire(&over_stdio(&["read"], &["test://static-text"]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "This is the content of the static text resource.\n"
    );

    let output = tidewire(&over_stdio(
        &["prompt", "--json"],
        &["test_prompt_with_arguments", r#"{"arg1":"a","arg2":"b"}"#],
    ));
    assert!(output.status.success(), "{}", stderr(&output));
    let prompt: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(
        prompt["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='a', arg2='b'"
    );

    let output = tidewire(&over_stdio(&["read"], &["test://nothing-here"]));
    let line = one_line_error(&output);
    assert!(
        line.contains("reading test://nothing-here failed"),
        "{line}"
    );
}

/// Issue 27: `tidewire call URL` defaulted to `--era legacy` and failed against a server of the
/// 2026-07-28 revision only. With no `--era` it now works against a modern-only and a
/// session-only server alike, and a failure that could be an era mismatch says which `--era` to
/// try.
#[test]
fn with_no_era_a_call_reaches_a_modern_only_and_a_session_only_server() {
    for (serve_era, wrong) in [("modern", "legacy"), ("legacy", "modern")] {
        let server = HttpServer::start_with(&["--era", serve_era]);
        let output = tidewire(&strings(&["call", &server.url, "crawl", &crawl_args(2, 1)]));
        assert!(output.status.success(), "{serve_era}: {}", stderr(&output));
        assert_eq!(stdout(&output), "Crawled 2 URLs\n", "{serve_era}");
        let output = tidewire(&strings(&["list", &server.url]));
        assert!(output.status.success(), "{serve_era}: {}", stderr(&output));
        assert!(stdout(&output).contains("crawl"), "{serve_era}");

        let refused = tidewire(&strings(&[
            "call",
            "--era",
            wrong,
            &server.url,
            "crawl",
            &crawl_args(1, 1),
        ]));
        assert!(
            !refused.status.success(),
            "{serve_era} server, --era {wrong}"
        );
        assert!(
            stderr(&refused).contains("--era auto"),
            "{serve_era} server, --era {wrong}: the error names the era to try: {}",
            stderr(&refused)
        );
    }
}

#[test]
fn every_http_transport_of_tidewire_serve() {
    let server = HttpServer::start();
    // Streamable HTTP; legacy SSE through the fallback (the /sse URL refuses the POST); WebSocket.
    for url in [server.url.clone(), server.sse_url(), server.ws_url()] {
        let output = tidewire(&strings(&[
            "call",
            "--json",
            &url,
            "crawl",
            &crawl_args(2, 1),
        ]));
        assert!(output.status.success(), "{url}: {}", stderr(&output));
        let result: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
        assert_eq!(result["content"][0]["text"], "Crawled 2 URLs", "{url}");
        assert!(
            stderr(&output).contains("crawl: progress 2/2"),
            "{url}: {}",
            stderr(&output)
        );

        let output = tidewire(&strings(&["list", &url, "prompts"]));
        assert!(output.status.success(), "{url}: {}", stderr(&output));
        assert!(stdout(&output).contains("test_simple_prompt"), "{url}");
    }
    let output = tidewire(&strings(&[
        "call",
        "--header",
        "X-Test: yes",
        "--bearer",
        "not-checked",
        &server.url,
        "echo",
        r#"{"text":"with headers"}"#,
    ]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "with headers\n");

    // The token kept off the command line: from a file (its newline ignored); a missing file is
    // a clear error; two sources at once are a usage error.
    let token_file = std::env::temp_dir().join(format!("tidewire-bearer-{}", std::process::id()));
    std::fs::write(&token_file, "not-checked\n").expect("token file");
    let token_path = token_file.display().to_string();
    let output = tidewire(&strings(&[
        "call",
        "--bearer-file",
        &token_path,
        &server.url,
        "echo",
        r#"{"text":"from a file"}"#,
    ]));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "from a file\n");
    let _ = std::fs::remove_file(&token_file);
    let line = one_line_error(&tidewire(&strings(&[
        "call",
        "--bearer-file",
        &token_path,
        &server.url,
        "echo",
    ])));
    assert!(line.contains("--bearer-file"), "{line}");
    let line = one_line_error(&tidewire(&strings(&[
        "call",
        "--bearer-env",
        "TIDEWIRE_TEST_NO_SUCH_VARIABLE",
        &server.url,
        "echo",
    ])));
    assert!(line.contains("TIDEWIRE_TEST_NO_SUCH_VARIABLE"), "{line}");
    let both = tidewire(&strings(&[
        "call",
        "--bearer",
        "a",
        "--bearer-env",
        "B",
        &server.url,
        "echo",
    ]));
    assert_eq!(both.status.code(), Some(2), "{}", stderr(&both));

    let missing = format!("{}/nothing-here", server.base());
    let line = one_line_error(&tidewire(&strings(&["call", &missing, "echo"])));
    assert!(
        line.contains("HTTP 404") && line.contains("legacy HTTP+SSE failed too"),
        "{line}"
    );
}

#[test]
fn the_demo_runs_every_transport_in_both_eras_and_exits_0() {
    let started = std::time::Instant::now();
    // Slower URLs than the default leave a loaded machine more room between the cancel and the
    // end of the URL in flight.
    let output = tidewire(&strings(&["demo", "--delay-ms", "400"]));
    let table = stdout(&output);
    assert!(output.status.success(), "{table}\n{}", stderr(&output));
    let rows = [
        ("stdio", "session"),
        ("stdio", "2026-07-28"),
        ("Streamable HTTP", "session"),
        ("Streamable HTTP", "2026-07-28"),
        ("legacy HTTP+SSE", "session"),
        ("WebSocket", "session"),
        ("WebSocket", "2026-07-28"),
    ];
    for (transport, era) in rows {
        let row = table
            .lines()
            .find(|l| {
                l.starts_with(transport) && l[transport.len()..].trim_start().starts_with(era)
            })
            .unwrap_or_else(|| panic!("no row for {transport} ({era}):\n{table}"));
        assert!(row.contains("3 received"), "{row}");
        // The crawl is cooperative: it finishes the URL in flight, then returns.
        assert!(row.contains("after URL 4/10"), "{row}");
        assert!(row.contains("cooperative"), "{row}");
        assert!(row.contains("nothing"), "{row}");
        assert!(row.trim_end().ends_with("ok"), "{row}");
    }
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn the_demo_runs_one_era_when_asked() {
    let output = tidewire(&strings(&["demo", "--era", "modern", "--delay-ms", "400"]));
    let table = stdout(&output);
    assert!(output.status.success(), "{table}\n{}", stderr(&output));
    for transport in ["stdio", "Streamable HTTP", "legacy HTTP+SSE", "WebSocket"] {
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with(transport)).collect();
        assert_eq!(rows.len(), 1, "one row for {transport}:\n{table}");
        let era = if transport == "legacy HTTP+SSE" {
            "session"
        } else {
            "2026-07-28"
        };
        assert!(rows[0].contains(era), "{}", rows[0]);
        assert!(rows[0].contains("after URL 4/10"), "{}", rows[0]);
        assert!(rows[0].contains("nothing"), "{}", rows[0]);
        assert!(rows[0].trim_end().ends_with("ok"), "{}", rows[0]);
    }
}

#[test]
fn the_python_peer_server_over_stdio() {
    let Some(peers) = python_peers() else { return };
    let server = [
        "--".to_owned(),
        peers.python.display().to_string(),
        peers.server_script().display().to_string(),
        "stdio".to_owned(),
    ];
    let mut args = strings(&["call", "--json"]);
    args.extend(server.iter().cloned());
    args.extend([String::from("crawl"), crawl_args(3, 1)]);
    let output = tidewire(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    let result: Value = serde_json::from_str(&stdout(&output)).expect("JSON");
    assert_eq!(result["content"][0]["text"], "Crawled 3 URLs");
    assert!(
        stderr(&output).contains("crawl: progress 3/3"),
        "{}",
        stderr(&output)
    );
    // The peer server logs to its stderr; without --show-stderr none of it shows.
    assert!(
        !stderr(&output).contains("[py-server]"),
        "{}",
        stderr(&output)
    );

    let mut args = strings(&["list"]);
    args.extend(server.iter().cloned());
    args.push("tools".to_owned());
    let output = tidewire(&args);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output)
            .lines()
            .any(|l| l.starts_with("crawl_status")),
        "{}",
        stdout(&output)
    );

    let mut args = strings(&["call"]);
    args.extend(server.iter().cloned());
    args.push("no_such_tool".to_owned());
    let output = tidewire(&args);
    let code = output.status.code();
    // The Python SDK reports an unknown tool as a tool error (isError), not a protocol error.
    assert!(
        code == Some(1) || code == Some(2),
        "{code:?}: {}",
        stderr(&output)
    );
}
