//! The interop peer contract: the tools and the counter resource every interop peer offers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::progress::ProgressError;
use tidewire_core::schema::{
    CallToolResult, CreateMessageParams, ElicitAction, ElicitParams, ElicitValue,
    ElicitationSchema, LoggingLevel, PrimitiveSchema, ReadResourceResult, Resource,
    SamplingContent, SamplingMessage, TextResourceContents,
};
use tidewire_server::{Context, NoArgs, ServerBuilder, ToolError};

use crate::COUNTER_URI;
use crate::store::{CrawlStatus, CrawlStop, DemoStore, StoreError};

/// Arguments of `echo`.
#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to send back unchanged.
    text: String,
}

/// Arguments of `crawl`.
#[derive(Debug, Deserialize, JsonSchema)]
struct CrawlArgs {
    /// The URLs to pretend to fetch (nothing is fetched).
    urls: Vec<String>,
    /// How long each URL takes, in milliseconds.
    delay_ms: u64,
}

/// Arguments of `notify`.
#[derive(Debug, Deserialize, JsonSchema)]
struct NotifyArgs {
    /// How many log messages to send.
    count: u32,
}

/// Arguments of `sample`.
#[derive(Debug, Deserialize, JsonSchema)]
struct SampleArgs {
    /// The prompt to hand to the client's model.
    prompt: String,
}

/// Arguments of `elicit`.
#[derive(Debug, Deserialize, JsonSchema)]
struct ElicitArgs {
    /// The message to show the user.
    message: String,
}

/// One running crawl. Dropping it records how the crawl stopped.
///
/// A crawl that sees its cancellation records it itself ([`CrawlStop::Cooperative`]); one
/// whose task is dropped (under `CancelPolicy::Abort`, code after the `.await` it was dropped
/// at never runs) is recorded by `Drop` ([`CrawlStop::Dropped`]), the one place that sees
/// every way a crawl can end.
#[derive(Debug)]
struct CrawlRun {
    store: Arc<dyn DemoStore>,
    id: u64,
    status: CrawlStatus,
    recorded: bool,
}

impl CrawlRun {
    /// Records the start of a crawl of `total` URLs, which becomes the one `crawl_status`
    /// reports.
    async fn start(store: Arc<dyn DemoStore>, total: u64) -> Result<Self, ToolError> {
        let status = CrawlStatus {
            total,
            ..CrawlStatus::default()
        };
        let id = store.start_crawl(status.clone()).await?;
        Ok(Self {
            store,
            id,
            status,
            recorded: false,
        })
    }

    async fn unit_done(&mut self) -> Result<(), StoreError> {
        self.status.completed += 1;
        self.store.record_crawl(self.id, self.status.clone()).await
    }

    /// Records how the crawl stopped, when it saw it stop (every URL done, or a cancellation
    /// between two): the URLs done.
    async fn finish(mut self, how: CrawlStop) -> Result<u64, ToolError> {
        self.recorded = true;
        let status = self.stopped(how);
        self.store.record_crawl(self.id, status).await?;
        Ok(self.status.completed)
    }

    /// The status of this crawl, stopped now.
    fn stopped(&self, how: CrawlStop) -> CrawlStatus {
        CrawlStatus {
            cancelled: how != CrawlStop::Completed,
            finished: true,
            stopped_at_ms: Some(now_ms()),
            stopped: Some(how),
            ..self.status.clone()
        }
    }
}

impl Drop for CrawlRun {
    fn drop(&mut self) {
        if self.recorded {
            return;
        }
        let status = self.stopped(CrawlStop::Dropped);
        let store = self.store.clone();
        let id = self.id;
        let mut record = Box::pin(async move { store.record_crawl(id, status).await });
        // A store in memory is done at once; one across the network finishes in a task.
        match futures::FutureExt::now_or_never(&mut record) {
            Some(Err(error)) => tracing::warn!(%error, "the end of a crawl was not recorded"),
            Some(Ok(())) => {}
            None => match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(async move {
                        if let Err(error) = record.await {
                            tracing::warn!(%error, "the end of a crawl was not recorded");
                        }
                    });
                }
                Err(_) => tracing::warn!("the end of a crawl was not recorded: no runtime"),
            },
        }
    }
}

/// Wall-clock time in milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// Adds the peer tools and the counter resource, keeping their state in `store`.
pub(crate) fn register(builder: ServerBuilder, store: &Arc<dyn DemoStore>) -> ServerBuilder {
    let crawl_state = store.clone();
    let status_state = store.clone();
    let bump_state = store.clone();
    let counter = store.clone();

    builder
        .tool(
            "echo",
            "Returns the given text unchanged.",
            |args: EchoArgs, _ctx| async move { Ok(CallToolResult::text(args.text)) },
        )
        .tool(
            "crawl",
            "Pretends to fetch each URL, waiting delay_ms per URL and reporting progress after \
             each one. Cooperative: when cancelled it finishes the URL in flight, then stops \
             (\"Cancelled after i/n URLs\"). Returns how many URLs were done.",
            move |args: CrawlArgs, ctx| crawl(crawl_state.clone(), args, ctx),
        )
        .tool(
            "crawl_status",
            "Returns the state of the most recent crawl as JSON: completed, cancelled, finished, \
             total, stopped_at_ms (wall-clock epoch milliseconds when it stopped) and stopped \
             (completed, cooperative: it saw the cancel and returned, or dropped: its task was \
             dropped).",
            move |_: NoArgs, _ctx| {
                let store = status_state.clone();
                async move {
                    let status = store.latest_crawl().await?;
                    let status = status.unwrap_or_default();
                    Ok(CallToolResult::text(serde_json::to_string(&status)?))
                }
            },
        )
        .tool(
            "notify",
            "Sends count log messages (level info, logger \"peer\") tied to this call, then a \
             resources/list_changed notification tied to no request.",
            |args: NotifyArgs, ctx| notify(args, ctx),
        )
        .tool(
            "bump",
            "Adds one to the test://counter resource, tells subscribers it changed, and returns \
             the new value.",
            move |_: NoArgs, ctx| bump(bump_state.clone(), ctx),
        )
        .tool(
            "sample",
            "Asks the client's model to answer the prompt (sampling, at most 64 tokens) and \
             returns \"<model>: <reply>\".",
            |args: SampleArgs, ctx| sample(args, ctx),
        )
        .tool(
            "elicit",
            "Asks the user, through the client, for a name (form elicitation) and returns the \
             answer as JSON {\"action\", \"content\"}.",
            |args: ElicitArgs, ctx| elicit(args, ctx),
        )
        .tool(
            "roots",
            "Asks the client for its roots and returns their URIs as a JSON array.",
            |_: NoArgs, ctx| roots(ctx),
        )
        .resource(
            Resource::new(COUNTER_URI, "counter")
                .with_description("A counter that the bump tool increments; subscribe to it.")
                .with_mime_type("text/plain"),
            move |uri, _ctx| {
                let store = counter.clone();
                async move {
                    let value = store.counter().await.map_err(ErrorObject::internal)?;
                    Ok(ReadResourceResult::new(vec![
                        TextResourceContents::new(uri, value.to_string())
                            .with_mime_type("text/plain")
                            .into(),
                    ]))
                }
            },
        )
}

async fn crawl(
    store: Arc<dyn DemoStore>,
    args: CrawlArgs,
    ctx: Context,
) -> Result<CallToolResult, ToolError> {
    let total = args.urls.len();
    let mut run = CrawlRun::start(store, total as u64).await?;
    let delay = Duration::from_millis(args.delay_ms);
    for (i, url) in args.urls.iter().enumerate() {
        // Cooperative (the demo's policy for `crawl`): the cancellation is seen here, between
        // two URLs; the URL in flight is finished first.
        if ctx.is_cancelled() {
            run.finish(CrawlStop::Cooperative).await?;
            return Ok(CallToolResult::text(format!(
                "Cancelled after {i}/{total} URLs"
            )));
        }
        tokio::time::sleep(delay).await;
        run.unit_done().await?;
        let step = i + 1;
        match ctx
            .progress(step as f64)
            .of(total as f64)
            .message(format!("Fetching {url} ({step}/{total})"))
            .await
        {
            // A cancellation that came during the URL: seen at the top of the loop.
            Err(ProgressError::Cancelled) => {}
            other => other?,
        }
    }
    let completed = run.finish(CrawlStop::Completed).await?;
    Ok(CallToolResult::text(format!("Crawled {completed} URLs")))
}

async fn notify(args: NotifyArgs, ctx: Context) -> Result<CallToolResult, ToolError> {
    let count = args.count;
    for i in 1..=count {
        ctx.log_as(LoggingLevel::Info, Some("peer"), format!("log {i}/{count}"))
            .await?;
    }
    ctx.server().notify_resources_changed().await;
    Ok(CallToolResult::text(format!("Sent {count} log messages")))
}

async fn bump(store: Arc<dyn DemoStore>, ctx: Context) -> Result<CallToolResult, ToolError> {
    let value = store.bump().await?;
    ctx.server().notify_resource_updated(COUNTER_URI).await;
    Ok(CallToolResult::text(value.to_string()))
}

async fn sample(args: SampleArgs, ctx: Context) -> Result<CallToolResult, ToolError> {
    let params = CreateMessageParams::new(vec![SamplingMessage::user_text(args.prompt)], 64);
    let result = ctx.create_message(params).await?;
    let reply: String = result
        .content
        .iter()
        .filter_map(SamplingContent::as_text)
        .collect();
    Ok(CallToolResult::text(format!("{}: {reply}", result.model)))
}

/// The JSON text `elicit` returns.
#[derive(Serialize)]
struct ElicitOutcome {
    action: ElicitAction,
    content: Option<BTreeMap<String, ElicitValue>>,
}

async fn elicit(args: ElicitArgs, ctx: Context) -> Result<CallToolResult, ToolError> {
    let schema = ElicitationSchema::new().property("name", PrimitiveSchema::string(), true);
    let result = ctx.elicit(ElicitParams::form(args.message, schema)).await?;
    let outcome = ElicitOutcome {
        action: result.action,
        content: result.content,
    };
    Ok(CallToolResult::text(serde_json::to_string(&outcome)?))
}

async fn roots(ctx: Context) -> Result<CallToolResult, ToolError> {
    let roots = ctx.list_roots().await?;
    let uris: Vec<&str> = roots.roots.iter().map(|r| r.uri.as_str()).collect();
    Ok(CallToolResult::text(serde_json::to_string(&uris)?))
}
