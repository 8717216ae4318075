//! The walkthrough on one connection: crawl 10 slow URLs, cancel after the 3rd progress
//! notification, ask the server where it stopped, and note anything that came after the cancel.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::{Value, json};
use tidewire_client::Client;
use tidewire_core::jsonrpc::{Message, RequestId};
use tidewire_demo::{CrawlStatus, CrawlStop};

use crate::connect::Observer;
use crate::error::describe;
use crate::ui::ProgressView;

/// How many URLs the crawl gets.
pub(super) const URLS: usize = 10;
/// The crawl is cancelled after this many progress notifications.
pub(super) const CANCEL_AFTER: u64 = 3;
/// The longest any one step may take.
const STEP_LIMIT: Duration = Duration::from_secs(5);

/// Something the server sent, and when it arrived.
#[derive(Debug, Clone)]
struct Arrival {
    at: Instant,
    /// The progress token, for `notifications/progress`.
    progress_for: Option<Value>,
    /// The request id, for a response.
    response_to: Option<Value>,
    what: String,
}

/// Everything that arrives on the connection, recorded by the transport tap.
#[derive(Debug, Clone, Default)]
pub(super) struct Arrivals(Arc<Mutex<Vec<Arrival>>>);

impl Arrivals {
    pub(super) fn observer(&self) -> Observer {
        let log = self.0.clone();
        Arc::new(move |message: &Message| {
            let at = Instant::now();
            let arrival = match message {
                Message::Notification(n) if n.method == "notifications/progress" => {
                    let params = n.params.clone().unwrap_or_default();
                    Arrival {
                        at,
                        progress_for: params.get("progressToken").cloned(),
                        response_to: None,
                        what: format!(
                            "progress {}",
                            params.get("progress").cloned().unwrap_or_default()
                        ),
                    }
                }
                Message::Notification(n) => Arrival {
                    at,
                    progress_for: None,
                    response_to: None,
                    what: n.method.clone(),
                },
                Message::Response(r) => Arrival {
                    at,
                    progress_for: None,
                    response_to: r.id.as_ref().map(RequestId::to_json),
                    what: "the response".to_owned(),
                },
                Message::Request(r) => Arrival {
                    at,
                    progress_for: None,
                    response_to: None,
                    what: r.method.clone(),
                },
            };
            log.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(arrival);
        })
    }

    /// What arrived for the request `id` after `since`.
    fn for_request_after(&self, id: &Value, since: Instant) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|a| a.at > since)
            .filter(|a| a.progress_for.as_ref() == Some(id) || a.response_to.as_ref() == Some(id))
            .map(|a| a.what.clone())
            .collect()
    }
}

/// What happened on one transport.
#[derive(Debug, Clone)]
pub(super) struct Walk {
    /// Progress notifications received before the cancel.
    pub(super) reports: u64,
    /// What the server says about the crawl.
    pub(super) status: CrawlStatus,
    /// From the cancel to the server's stop, by the wall clock (milliseconds).
    pub(super) stop_ms: Option<f64>,
    /// Progress or responses for the crawl that arrived after the cancel.
    pub(super) late: Vec<String>,
    /// How the call ended on the client.
    pub(super) ended_as_cancelled: bool,
}

impl Walk {
    /// What went wrong; empty when the transport behaved.
    pub(super) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.reports != CANCEL_AFTER {
            problems.push(format!(
                "{} progress notifications before the cancel",
                self.reports
            ));
        }
        if !self.ended_as_cancelled {
            problems.push("the call did not end as cancelled".to_owned());
        }
        let status = &self.status;
        if !(status.finished && status.cancelled) {
            problems.push("the server did not record a cancelled crawl".to_owned());
        }
        // The demo's crawl is cooperative: it sees the cancel and returns by itself.
        if status.stopped != Some(CrawlStop::Cooperative) {
            problems.push(format!(
                "the crawl did not stop cooperatively ({:?})",
                status.stopped
            ));
        }
        // The URL in flight at the cancel is number CANCEL_AFTER + 1: the server may stop in it
        // or right after it, never later.
        if status.completed < CANCEL_AFTER || status.completed > CANCEL_AFTER + 1 {
            problems.push(format!("the crawl stopped after {} URLs", status.completed));
        }
        if !self.late.is_empty() {
            problems.push(format!("after the cancel: {}", self.late.join(", ")));
        }
        problems
    }
}

/// Runs the walkthrough on a connected client.
pub(super) async fn walk(
    client: &Client,
    arrivals: &Arrivals,
    view: &mut ProgressView,
    delay_ms: u64,
) -> Result<Walk, String> {
    let urls: Vec<String> = (1..=URLS)
        .map(|i| format!("https://example.com/slow/{i}"))
        .collect();
    let (builder, mut progress) = client
        .call_tool("crawl", json!({ "urls": urls, "delay_ms": delay_ms }))
        .progress_stream();
    let call = builder
        .timeout(STEP_LIMIT * 2)
        .send()
        .await
        .map_err(|e| format!("calling crawl failed: {}", describe(&e)))?;
    let id = call.id().to_json();
    let mut reports = 0;
    while reports < CANCEL_AFTER {
        match tokio::time::timeout(STEP_LIMIT, progress.next()).await {
            Ok(Some(report)) => {
                view.update(&report);
                reports += 1;
            }
            Ok(None) => break,
            Err(_) => return Err(format!("no progress within {STEP_LIMIT:?}")),
        }
    }
    let cancelled_at = Instant::now();
    let cancelled_ms = epoch_ms();
    call.cancel("the demo cancels after the third progress notification");
    let ended_as_cancelled = matches!(
        tokio::time::timeout(STEP_LIMIT, call).await,
        Ok(Err(e)) if e.is_cancelled()
    );
    let status = stopped_crawl(client).await?;
    let stop_ms = status.stopped_at_ms.map(|at| at as f64 - cancelled_ms);
    Ok(Walk {
        reports,
        status,
        stop_ms,
        late: arrivals.for_request_after(&id, cancelled_at),
        ended_as_cancelled,
    })
}

/// Asks `crawl_status` until the server has recorded the crawl's end.
async fn stopped_crawl(client: &Client) -> Result<CrawlStatus, String> {
    let started = Instant::now();
    loop {
        let result = client
            .call_tool("crawl_status", json!({}))
            .timeout(STEP_LIMIT)
            .await
            .map_err(|e| format!("calling crawl_status failed: {}", describe(&e)))?;
        let text = result
            .content
            .first()
            .and_then(|block| block.as_text())
            .unwrap_or("{}");
        let status: CrawlStatus = serde_json::from_str(text)
            .map_err(|e| format!("crawl_status answered {text:?}: {e}"))?;
        if status.finished {
            return Ok(status);
        }
        if started.elapsed() > STEP_LIMIT {
            return Err(format!(
                "the crawl had not stopped {STEP_LIMIT:?} after the cancel"
            ));
        }
        // The crawl records its stop once it has finished the URL in flight.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Wall-clock milliseconds since the Unix epoch, the clock `crawl_status` reports in.
fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or_default()
}
