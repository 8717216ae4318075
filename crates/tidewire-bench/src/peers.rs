//! The tidewire peer server: the tools every peer offers, `echo({"text"})` and
//! `progress({"n"})`.

use schemars::JsonSchema;
use serde::Deserialize;
use tidewire_core::schema::{CallToolResult, Implementation};
use tidewire_server::{Context, Server, ServerBuilder, ToolError};

/// The name every peer reports in `serverInfo`.
pub const SERVER_NAME: &str = "bench";

/// `echo`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct EchoArgs {
    /// The text to send back.
    pub text: String,
}

/// `progress`'s arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ProgressArgs {
    /// How many progress notifications to send before the result.
    pub n: u64,
}

/// The server: `echo` answers its text; `progress` sends `n` progress notifications to the
/// caller's `_meta.progressToken` (none when the call has no token), then answers `"done"`.
pub fn tidewire_server() -> Server {
    tidewire_builder().build()
}

/// [`tidewire_server()`]'s builder, for a setup to add to (a replica on Redis).
pub fn tidewire_builder() -> ServerBuilder {
    Server::builder(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
        .tool::<EchoArgs, _, _>("echo", "Returns its text.", |args, _ctx| async move {
            Ok(CallToolResult::text(args.text))
        })
        .tool::<ProgressArgs, _, _>(
            "progress",
            "Sends n progress notifications, then returns.",
            |args, ctx| progress(args.n, ctx),
        )
}

async fn progress(n: u64, ctx: Context) -> Result<CallToolResult, ToolError> {
    let total = n as f64;
    for i in 1..=n {
        ctx.report_progress(i as f64, Some(total), None).await?;
    }
    Ok(CallToolResult::text("done"))
}
