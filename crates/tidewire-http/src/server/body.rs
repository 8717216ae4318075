//! Reading a POST body within its limits: its size (refused by `Content-Length` before a byte
//! is read), its time, and how many bytes of bodies are read at once, per session and over the
//! whole endpoint.
//!
//! A refused body is still read and thrown away for a while, within bounds, with
//! `Connection: close` on the answer: a client that writes its whole body before reading (most
//! do) then reads the 413 instead of a reset connection.

// A refused body is answered with an axum `Response`; returning it as the error keeps the
// handlers flat.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, BodyDataStream};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use tidewire_core::jsonrpc::ErrorCode;
use tokio::sync::{Semaphore, SemaphorePermit};

use super::checks::error;

/// Budgets are counted in KiB, so a `u32` of permits covers any body.
const UNIT: usize = 1024;
/// Refused bodies read and thrown away at once, over the whole endpoint.
const MAX_DRAINS: usize = 16;
/// How much of a refused body is read and thrown away, at most.
const DRAIN_BYTES: usize = 128 << 20;
/// How long a refused body is read and thrown away, at most.
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// A budget of body bytes being read at once.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    units: Semaphore,
    capacity: usize,
}

impl BodyBudget {
    /// A budget of `bytes` (rounded up to whole KiB).
    pub(crate) fn new(bytes: usize) -> Self {
        let capacity = bytes.div_ceil(UNIT).clamp(1, Semaphore::MAX_PERMITS);
        Self {
            units: Semaphore::new(capacity),
            capacity,
        }
    }

    /// Bytes taken now.
    pub(crate) fn in_use(&self) -> usize {
        (self.capacity - self.units.available_permits().min(self.capacity)) * UNIT
    }

    /// Waits for room for `bytes` (a body larger than the whole budget takes all of it).
    async fn take(&self, bytes: usize) -> Option<SemaphorePermit<'_>> {
        self.units.acquire_many(self.units_for(bytes)).await.ok()
    }

    /// The units [`take`](Self::take) takes for `bytes`.
    fn units_for(&self, bytes: usize) -> u32 {
        u32::try_from(bytes.div_ceil(UNIT).clamp(1, self.capacity)).unwrap_or(u32::MAX)
    }
}

/// The room a body read holds in its budgets, given back when it is dropped (the read ended,
/// failed or was abandoned): the first `taken` of `budgets`, each what
/// [`BodyBudget::take`] took for `bytes`. Held as counts rather than permits in a `Vec`, which
/// was an allocation per request.
struct Held<'a> {
    budgets: &'a [&'a BodyBudget],
    taken: usize,
    bytes: usize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        for budget in self.budgets.iter().take(self.taken) {
            let units = budget.units_for(self.bytes);
            budget
                .units
                .add_permits(usize::try_from(units).unwrap_or(usize::MAX));
        }
    }
}

/// What bounds one body read.
pub(crate) struct Limits<'a> {
    /// The largest body.
    pub(crate) max: usize,
    /// How long the whole read (waiting for budget included) may take.
    pub(crate) timeout: Duration,
    /// The budgets it counts against (the session's, the endpoint's).
    pub(crate) budgets: &'a [&'a BodyBudget],
    /// Refused bodies being thrown away now.
    pub(crate) drains: &'a Arc<AtomicUsize>,
}

/// Reads a whole body within `limits`.
///
/// # Errors
/// The answer to send instead: 413 (too large, by `Content-Length` or by what arrived), 408
/// (too slow), 503 (no budget within the time), 400 (the body broke off).
pub(crate) async fn read(
    body: Body,
    headers: &HeaderMap,
    limits: Limits<'_>,
) -> Result<Bytes, Response> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let mut data = body.into_data_stream();
    if declared.is_some_and(|n| n > limits.max as u64) {
        drain_later(data, limits.drains);
        return Err(too_large(limits.max));
    }
    let expected = declared.map_or(limits.max, |n| usize::try_from(n).unwrap_or(limits.max));
    let deadline = tokio::time::Instant::now() + limits.timeout;
    let read = async {
        let mut held = Held {
            budgets: limits.budgets,
            taken: 0,
            bytes: expected,
        };
        for budget in limits.budgets {
            match budget.take(expected).await {
                Some(permit) => {
                    // Given back by `held`, however this read ends.
                    permit.forget();
                    held.taken += 1;
                }
                None => return Err(Refused::Busy),
            }
        }
        // A body that comes in one chunk (the usual case) is that chunk, not a copy of it.
        let mut whole: Option<Bytes> = None;
        let mut out = BytesMut::new();
        while let Some(chunk) = data.next().await {
            let chunk = chunk.map_err(|_| Refused::Broken)?;
            let read = whole.as_ref().map_or(out.len(), Bytes::len);
            if read + chunk.len() > limits.max {
                return Err(Refused::TooLarge);
            }
            if let Some(first) = whole.take() {
                out.reserve(expected.min(64 * UNIT).max(first.len() + chunk.len()));
                out.extend_from_slice(&first);
                out.extend_from_slice(&chunk);
            } else if out.is_empty() {
                whole = Some(chunk);
            } else {
                out.extend_from_slice(&chunk);
            }
        }
        drop(held);
        Ok(whole.unwrap_or_else(|| out.freeze()))
    };
    let outcome = tokio::time::timeout_at(deadline, read).await;
    match outcome {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(Refused::TooLarge)) => {
            drain_later(data, limits.drains);
            Err(too_large(limits.max))
        }
        Ok(Err(Refused::Busy)) => Err(busy()),
        Ok(Err(Refused::Broken)) => Err(error(
            StatusCode::BAD_REQUEST,
            ErrorCode::INVALID_REQUEST,
            "Bad Request: the body broke off before its end",
        )),
        Err(_) => Err(closing(error(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::INVALID_REQUEST,
            format!(
                "Request Timeout: the body did not arrive within {} ms",
                limits.timeout.as_millis()
            ),
        ))),
    }
}

enum Refused {
    TooLarge,
    Busy,
    Broken,
}

fn too_large(max: usize) -> Response {
    closing(error(
        StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::INVALID_REQUEST,
        format!("Payload Too Large: the body exceeds {max} bytes"),
    ))
}

fn busy() -> Response {
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::SERVER_BUSY,
        "Service Unavailable: too many request bodies are being read; retry later",
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// The connection ends after this answer (what is left of the body is not worth reading).
fn closing(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// Reads what is left of a refused body and throws it away, within [`DRAIN_BYTES`] and
/// [`DRAIN_TIME`], so the client gets to read the answer; at most [`MAX_DRAINS`] at once.
fn drain_later(mut data: BodyDataStream, drains: &Arc<AtomicUsize>) {
    if drains.fetch_add(1, Ordering::AcqRel) >= MAX_DRAINS {
        drains.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let drains = drains.clone();
    tokio::spawn(async move {
        let _ = tokio::time::timeout(DRAIN_TIME, async {
            let mut seen = 0usize;
            while let Some(Ok(chunk)) = data.next().await {
                seen += chunk.len();
                if seen > DRAIN_BYTES {
                    break;
                }
            }
        })
        .await;
        drains.fetch_sub(1, Ordering::AcqRel);
    });
}
