//! The standalone GET stream: messages the server sends outside any request.

use std::sync::Arc;

use reqwest::StatusCode;
use tokio::sync::oneshot;

use super::error::chain;
use super::reply::{Body, body_kind};
use super::session_end;
use super::shared::TransportState;
use super::sse::{Cursor, End, events, pump};
use super::task::catch;

/// Starts the GET stream task of the current session; it stops when that session ends (or the
/// transport closes). The receiver fires once the first attempt has concluded: the stream is
/// open, or the server has none, or the attempt failed.
pub(crate) fn start(shared: &Arc<TransportState>) -> oneshot::Receiver<()> {
    let token = shared.snapshot().ended;
    let (ready, ready_rx) = oneshot::channel();
    let task = shared.clone();
    tokio::spawn(async move {
        tokio::select! {
            biased;
            () = token.cancelled() => {}
            outcome = catch(run(&task, ready)) => {
                if let Err(reason) = outcome {
                    tracing::error!(
                        %reason,
                        "the GET stream task panicked; server messages outside requests will \
                         not arrive"
                    );
                }
            }
        }
    });
    ready_rx
}

async fn run(shared: &Arc<TransportState>, ready: oneshot::Sender<()>) {
    let mut ready = Some(ready);
    let mut signal = move || {
        if let Some(ready) = ready.take() {
            let _ = ready.send(());
        }
    };
    let policy = shared.config.reconnect;
    let timeout = shared.config.request_timeout;
    let mut cursor = Cursor::default();
    let mut failures: u32 = 0;
    let mut opened = false;
    loop {
        let snapshot = shared.snapshot();
        let request = shared
            .get(&snapshot, cursor.last_event_id.as_deref())
            .send();
        let problem = match tokio::time::timeout(timeout, request).await {
            Err(_) => format!("no answer within {timeout:?}"),
            Ok(Err(e)) => chain(&e),
            Ok(Ok(response)) => {
                let status = response.status();
                let session = snapshot.session_id.is_some();
                if status == StatusCode::NOT_FOUND && opened && session {
                    // It worked for this session before: the session is gone.
                    signal();
                    session_end::ended(shared, snapshot.generation, None).await;
                    return;
                }
                if matches!(
                    status,
                    StatusCode::METHOD_NOT_ALLOWED
                        | StatusCode::NOT_FOUND
                        | StatusCode::BAD_REQUEST
                ) {
                    tracing::debug!(%status, "the server offers no GET stream; going on without it");
                    signal();
                    return;
                }
                if !status.is_success() {
                    format!("HTTP {status}")
                } else if body_kind(&response) != Body::EventStream {
                    tracing::warn!(%status, "the GET stream did not answer with text/event-stream; going on without it");
                    signal();
                    return;
                } else {
                    opened = true;
                    signal();
                    tracing::debug!(resumed = cursor.last_event_id.is_some(), "GET stream open");
                    let stream = events(response, shared.config.codec.max_message_size());
                    let pumped = pump(shared, stream, &mut cursor, None).await;
                    let problem = match pumped.end {
                        End::Gone => return,
                        End::Unusable(reason) => {
                            tracing::warn!(%reason, "the GET stream is unusable; going on without it");
                            return;
                        }
                        End::Broken(reason) => format!("the stream broke: {reason}"),
                        End::Closed | End::Answered => "the server ended the stream".to_owned(),
                    };
                    if pumped.events > 0 && policy.attempts() > 0 {
                        failures = 0;
                        tracing::debug!(%problem, "reconnecting the GET stream");
                        tokio::time::sleep(policy.wait(cursor.retry, failures)).await;
                        continue;
                    }
                    problem
                }
            }
        };
        signal();
        failures += 1;
        if failures >= policy.attempts() {
            tracing::warn!(
                %problem,
                failures,
                "giving up the GET stream; server notifications outside requests will not arrive"
            );
            return;
        }
        tracing::debug!(%problem, failures, "the GET stream will reconnect");
        tokio::time::sleep(policy.wait(cursor.retry, failures)).await;
    }
}
