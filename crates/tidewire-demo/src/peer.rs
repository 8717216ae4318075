//! The interop peer contract: the tools and the counter resource every interop peer offers.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tidewire_core::schema::{
    CallToolResult, CreateMessageParams, ElicitAction, ElicitParams, ElicitValue,
    ElicitationSchema, LoggingLevel, PrimitiveSchema, ReadResourceResult, Resource,
    SamplingContent, SamplingMessage, TextResourceContents,
};
use tidewire_server::{Context, NoArgs, ServerBuilder, ToolError};

use crate::COUNTER_URI;

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

/// What `crawl_status` reports about the most recent `crawl`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrawlStatus {
    /// URLs done (each one waited out in full).
    pub completed: u64,
    /// True when the crawl stopped before doing every URL (cancelled, or its connection ended).
    pub cancelled: bool,
    /// True once the crawl has stopped, whether done or cancelled.
    pub finished: bool,
    /// How many URLs the crawl was given.
    pub total: u64,
    /// When the crawl stopped, in milliseconds since the Unix epoch (wall clock); `null` while
    /// it runs and before any crawl.
    pub stopped_at_ms: Option<u64>,
}

/// The record of crawls: the status of the latest one and its sequence number.
#[derive(Debug, Default)]
struct CrawlBook {
    latest: u64,
    status: CrawlStatus,
}

/// Server-wide state of the peer tools.
#[derive(Debug, Clone, Default)]
struct PeerState {
    crawls: Arc<Mutex<CrawlBook>>,
    counter: Arc<AtomicU64>,
}

impl PeerState {
    fn crawls(&self) -> MutexGuard<'_, CrawlBook> {
        self.crawls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the start of a crawl, which becomes the one `crawl_status` reports.
    fn start_crawl(&self, total: u64) -> CrawlRun {
        let mut book = self.crawls();
        book.latest += 1;
        book.status = CrawlStatus {
            total,
            ..CrawlStatus::default()
        };
        CrawlRun {
            crawls: self.crawls.clone(),
            id: book.latest,
            completed: 0,
            done: false,
        }
    }
}

/// One running crawl. Dropping it records how the crawl stopped.
///
/// The session engine aborts a cancelled handler at its next `.await`, so code after that await
/// never runs; `Drop` does, which makes it the one place that sees every way a crawl can end.
#[derive(Debug)]
struct CrawlRun {
    crawls: Arc<Mutex<CrawlBook>>,
    id: u64,
    completed: u64,
    done: bool,
}

impl CrawlRun {
    fn book(&self) -> MutexGuard<'_, CrawlBook> {
        self.crawls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn unit_done(&mut self) {
        self.completed += 1;
        let completed = self.completed;
        let id = self.id;
        let mut book = self.book();
        if book.latest == id {
            book.status.completed = completed;
        }
    }
}

impl Drop for CrawlRun {
    fn drop(&mut self) {
        let (id, completed, done) = (self.id, self.completed, self.done);
        let mut book = self.book();
        // A newer crawl owns the record now.
        if book.latest != id {
            return;
        }
        book.status.completed = completed;
        book.status.cancelled = !done;
        book.status.finished = true;
        book.status.stopped_at_ms = Some(now_ms());
    }
}

/// Wall-clock time in milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

/// Adds the peer tools and the counter resource.
pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    let state = PeerState::default();
    let crawl_state = state.clone();
    let status_state = state.clone();
    let bump_state = state.clone();
    let counter = state.counter;

    builder
        .tool(
            "echo",
            "Returns the given text unchanged.",
            |args: EchoArgs, _ctx| async move { Ok(CallToolResult::text(args.text)) },
        )
        .tool(
            "crawl",
            "Pretends to fetch each URL, waiting delay_ms per URL and reporting progress after \
             each one; stops at once when cancelled. Returns how many URLs were done.",
            move |args: CrawlArgs, ctx| crawl(crawl_state.clone(), args, ctx),
        )
        .tool(
            "crawl_status",
            "Returns the state of the most recent crawl as JSON: completed, cancelled, finished, \
             total and stopped_at_ms (wall-clock epoch milliseconds when it stopped).",
            move |_: NoArgs, _ctx| {
                let status = status_state.crawls().status.clone();
                async move { Ok(CallToolResult::text(serde_json::to_string(&status)?)) }
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
                let value = counter.load(Ordering::SeqCst);
                async move {
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
    state: PeerState,
    args: CrawlArgs,
    ctx: Context,
) -> Result<CallToolResult, ToolError> {
    let total = args.urls.len();
    let mut run = state.start_crawl(total as u64);
    let delay = Duration::from_millis(args.delay_ms);
    for (i, url) in args.urls.iter().enumerate() {
        if ctx.is_cancelled() {
            return Err(ToolError::new("the crawl was cancelled"));
        }
        tokio::select! {
            biased;
            () = ctx.cancelled() => return Err(ToolError::new("the crawl was cancelled")),
            () = tokio::time::sleep(delay) => {}
        }
        run.unit_done();
        let step = i + 1;
        ctx.report_progress(
            step as f64,
            Some(total as f64),
            Some(format!("Fetching {url} ({step}/{total})")),
        )
        .await?;
    }
    run.done = true;
    let completed = run.completed;
    drop(run);
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

async fn bump(state: PeerState, ctx: Context) -> Result<CallToolResult, ToolError> {
    let value = state.counter.fetch_add(1, Ordering::SeqCst) + 1;
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
