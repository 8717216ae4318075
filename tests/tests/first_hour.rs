//! What a newcomer writes in the first hour, through the facade's paths only: a typed tool
//! whose argument type derives through tidewire's re-exports, progress written as a sentence,
//! `?` on an ordinary error, and a client that reads the text of a result.

use std::sync::{Arc, Mutex};

use tidewire::core::transport::memory;
use tidewire::prelude::*;

use tidewire_tests::LIMIT;

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "tidewire::serde")]
#[schemars(crate = "tidewire::schemars")]
struct Count {
    /// How far to count.
    to: u32,
}

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "tidewire::serde")]
#[schemars(crate = "tidewire::schemars")]
struct ReadFile {
    /// The file to read.
    path: String,
}

fn server() -> Server {
    Server::builder(Implementation::new("first-hour", "1.0.0"))
        .tool(
            "count",
            "Counts, reporting each step",
            |args: Count, ctx: Context| async move {
                for i in 1..=args.to {
                    ctx.progress(i)
                        .of(args.to)
                        .message(format!("step {i}"))
                        .await?;
                }
                Ok(CallToolResult::text(format!("counted to {}", args.to)))
            },
        )
        .tool(
            "endless",
            "Reports progress until cancelled",
            |_: NoArgs, ctx: Context| async move {
                for i in 1..=5 {
                    ctx.progress(i).await?;
                }
                ctx.cancelled().await;
                Err(ToolError::new("cancelled"))
            },
        )
        .tool(
            "read_file",
            "Reads a file",
            |args: ReadFile, _ctx: Context| async move {
                let text = tokio::fs::read_to_string(&args.path).await?;
                Ok(CallToolResult::text(text))
            },
        )
        .build()
}

async fn connect() -> Client {
    let (client_side, server_side) = memory::duplex();
    let (_peer, driver) = server().serve(server_side);
    tokio::spawn(driver);
    Client::builder(Implementation::new("newcomer", "0.1.0"))
        .connect(client_side)
        .await
        .expect("the client connects")
}

#[tokio::test]
async fn progress_as_a_sentence_reaches_the_caller() {
    tokio::time::timeout(LIMIT, async {
        let client = connect().await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let result = client
            .call_tool("count", tidewire::serde_json::json!({"to": 3}))
            .on_progress(move |p| {
                if let Ok(mut seen) = sink.lock() {
                    seen.push((p.progress, p.total, p.message));
                }
            })
            .await
            .expect("the call succeeds");
        assert_eq!(result.first_text(), Some("counted to 3"));
        let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
        assert_eq!(
            seen,
            (1..=3)
                .map(|i| (f64::from(i), Some(3.0), Some(format!("step {i}"))))
                .collect::<Vec<_>>()
        );
        client.close().await;
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_progress_callback_can_cancel_its_own_call() {
    tokio::time::timeout(LIMIT, async {
        let client = connect().await;
        let heard = Arc::new(Mutex::new(0u32));
        let count = heard.clone();
        let outcome = client
            .call_tool("endless", tidewire::serde_json::json!({}))
            .on_progress_with_cancel(move |_, call| {
                let mut heard = count
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                *heard += 1;
                if *heard == 3 {
                    call.cancel("three reports are enough");
                }
            })
            .await;
        assert!(
            outcome.as_ref().is_err_and(ClientError::is_cancelled),
            "{outcome:?}"
        );
        assert!(
            *heard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                >= 3
        );
        client.close().await;
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_progress_callback_runs_while_the_caller_awaits_something_else() {
    tokio::time::timeout(LIMIT, async {
        let client = connect().await;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let call = client
            .call_tool("endless", tidewire::serde_json::json!({}))
            .on_progress(move |p| {
                let _ = tx.send(p.progress);
            })
            .send()
            .await
            .expect("sent");
        // The call's future is not polled here: the callback runs all the same.
        for expected in 1..=3 {
            assert_eq!(rx.recv().await, Some(f64::from(expected)));
        }
        assert!(call.cancel("heard enough"));
        assert!(call.await.is_err_and(|e| e.is_cancelled()));
        client.close().await;
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn an_io_error_becomes_a_tool_error_with_its_message() {
    tokio::time::timeout(LIMIT, async {
        let client = connect().await;
        let result = client
            .call_tool(
                "read_file",
                tidewire::serde_json::json!({"path": "/no/such/dir/file.txt"}),
            )
            .await
            .expect("a tool error is a result, not a failed call");
        assert!(result.is_error());
        let text = result.text_content();
        assert!(
            text.contains("No such file"),
            "the client sees the error's own text: {text}"
        );
        client.close().await;
    })
    .await
    .expect("in time");
}

/// The `[dependencies]` snippet at the top of the README names this version of the facade and
/// features it has (its Rust snippets are compiled as the facade's doctests).
#[test]
fn the_readme_dependencies_snippet_names_real_features() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("the README");
    let manifest =
        std::fs::read_to_string(root.join("crates/tidewire/Cargo.toml")).expect("the manifest");
    let snippet = readme
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a toml block in the README");
    let line = snippet
        .lines()
        .find(|l| l.starts_with("tidewire = "))
        .expect("a tidewire dependency line");
    let version = line
        .split("version = \"")
        .nth(1)
        .and_then(|v| v.split('"').next())
        .expect("a version");
    assert!(
        env!("CARGO_PKG_VERSION").starts_with(version),
        "the README asks for {version}, the workspace is {}",
        env!("CARGO_PKG_VERSION")
    );
    let features = line
        .split('[')
        .nth(1)
        .and_then(|f| f.split(']').next())
        .expect("a feature list");
    let features_table = manifest
        .split("[features]")
        .nth(1)
        .and_then(|t| t.split("\n[").next())
        .expect("the features table");
    for feature in features.split(',').map(|f| f.trim().trim_matches('"')) {
        assert!(
            features_table.contains(&format!("\n{feature} = ")),
            "the README names feature {feature:?}, which the facade does not have"
        );
    }
    assert!(
        snippet.contains("tokio = ")
            && snippet.contains("macros")
            && snippet.contains("rt-multi-thread"),
        "the snippets use #[tokio::main]: {snippet}"
    );
}

/// A server whose two tools clean up after a cancellation: `careful` under the cooperative
/// policy (its `select!` branch runs), `plain` under the default abort (its `on_cancel` guard
/// runs). Each says so on `cleaned`.
fn cleaning_server(cleaned: tokio::sync::mpsc::UnboundedSender<&'static str>) -> Server {
    let for_plain = cleaned.clone();
    Server::builder(Implementation::new("cleaning", "1.0.0"))
        .tool(
            "careful",
            "Saves partial work when cancelled",
            move |_: NoArgs, ctx: Context| {
                let cleaned = cleaned.clone();
                async move {
                    assert_eq!(ctx.cancel_policy(), CancelPolicy::Cooperative);
                    ctx.progress(1).await?;
                    ctx.cancelled().await;
                    // After the cancel: a report is refused as such, and the check says so.
                    let refused = ctx.progress(2).await.is_err_and(|e| e.is_cancelled());
                    let checked = ctx.check_cancelled().is_err();
                    let _ = cleaned.send(if refused && checked {
                        "careful saved its work"
                    } else {
                        "careful was told nothing of the cancel"
                    });
                    ctx.check_cancelled()?;
                    Ok(CallToolResult::text("never sent"))
                }
            },
        )
        .cancel_policy_for("careful", CancelPolicy::Cooperative)
        .tool(
            "plain",
            "Is aborted when cancelled",
            move |_: NoArgs, ctx: Context| {
                let cleaned = for_plain.clone();
                async move {
                    assert_eq!(ctx.cancel_policy(), CancelPolicy::Abort);
                    let _cleanup = ctx.on_cancel(move || {
                        let _ = cleaned.send("plain cleaned up");
                    });
                    ctx.progress(1).await?;
                    std::future::pending::<()>().await;
                    Ok(CallToolResult::text("never"))
                }
            },
        )
        .build()
}

#[tokio::test]
async fn cleanup_runs_under_either_cancel_policy() {
    tokio::time::timeout(LIMIT, async {
        let (tx, mut cleaned) = tokio::sync::mpsc::unbounded_channel();
        let (client_side, server_side) = memory::duplex();
        let (_peer, driver) = cleaning_server(tx).serve(server_side);
        tokio::spawn(driver);
        let client = Client::builder(Implementation::new("newcomer", "0.1.0"))
            .connect(client_side)
            .await
            .expect("connects");
        for (tool, said) in [
            ("careful", "careful saved its work"),
            ("plain", "plain cleaned up"),
        ] {
            let outcome = client
                .call_tool(tool, tidewire::serde_json::json!({}))
                .on_progress_with_cancel(|_, call| {
                    call.cancel("stop");
                })
                .await;
            assert!(outcome.is_err_and(|e| e.is_cancelled()), "{tool}");
            assert_eq!(cleaned.recv().await, Some(said));
        }
        client.close().await;
    })
    .await
    .expect("in time");
}
