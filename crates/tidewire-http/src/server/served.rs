//! The answer to a stateless request served without a session: its [`RequestRun`] is polled
//! here, in the POST's own task, and then by its response body, so the request costs no task,
//! queue or session of its own. A request whose first message is its response is answered as
//! JSON (with the status its error calls for); one that sends anything first, or has not
//! answered within [`HttpConfig::json_wait`](super::HttpConfig::json_wait), as SSE, events
//! without ids. Dropping the body (the client went away) drops the run, which cancels the
//! request.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;
use tidewire_core::jsonrpc::{
    ErrorCode, ErrorObject, Message, Request, RequestId, Response as Reply,
};
use tidewire_core::session::{
    Answered, RequestRun, RequestStreamReceiver, ServeRequest, request_stream,
};
use tidewire_core::transport::Codec;
use tokio::time::Sleep;

use super::checks::status_of;
use super::sse_body::{push_frame, with_sse_headers};
use super::state::State;

/// Serves `request` through `server` and answers the POST.
pub(crate) async fn answer(
    state: &Arc<State>,
    server: &dyn ServeRequest,
    request: Request,
    extensions: tidewire_core::Extensions,
    held: impl Send + 'static,
    sse: bool,
) -> Response {
    let id = request.id.clone();
    let (stream, mut notes) = request_stream(
        state.config.stream_capacity,
        state.config.limits.max_message_size,
    );
    let mut run = server.serve_request(request, extensions, stream);
    let codec = state.codec;
    // Most requests answer on their first poll: no timer is set for them, and what the request
    // holds is let go of here (its handler has stopped), not boxed into the run.
    let first = std::future::poll_fn(|cx| match Pin::new(&mut run).poll(cx) {
        Poll::Ready(reply) => Poll::Ready(Some(reply)),
        Poll::Pending => Poll::Ready(None),
    })
    .await;
    if let Some(reply) = first {
        drop(held);
        // In JSON mode nothing travels before the response (the request's limits say so).
        return answered(codec, id, sse.then_some(notes), reply);
    }
    // From here the run may be dropped unfinished (the client went away), and a cooperative
    // handler then goes on without it: it keeps what is held until it stops.
    run.hold(held);
    if !sse {
        // JSON mode: nothing travels before the response (the request's limits say so), so
        // the answer waits for it; a client that goes away drops this, which cancels it.
        return json(codec, id, run.await);
    }
    let wait = tokio::time::sleep(state.config.json_wait);
    tokio::pin!(wait);
    tokio::select! {
        biased;
        reply = &mut run => answered(codec, id, Some(notes), reply),
        () = notes.ready() => streaming(codec, id, notes, run, state.config.limits.keep_alive),
        () = &mut wait => streaming(codec, id, notes, run, state.config.limits.keep_alive),
    }
}

/// The response as one JSON body, with the status its error calls for.
fn json(codec: Codec, id: RequestId, reply: Option<Answered>) -> Response {
    let status = match &reply {
        Some(Answered::Response(Reply {
            outcome: Err(error),
            ..
        })) => status_of(error.code),
        Some(_) => StatusCode::OK,
        // No answer: the handler ended without one, an internal error.
        None => status_of(ErrorCode::INTERNAL_ERROR.0),
    };
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from(encode(codec, id, reply)),
    )
        .into_response()
}

/// The answer of a handler that has answered: one JSON body when it sent nothing first (or
/// `notes` is `None`: nothing may travel first), else SSE, what it sent and then the response.
fn answered(
    codec: Codec,
    id: RequestId,
    notes: Option<RequestStreamReceiver>,
    reply: Option<Answered>,
) -> Response {
    let mut chunk = Vec::new();
    if let Some(mut notes) = notes {
        notes.try_drain(usize::MAX, |note| push_frame(&mut chunk, None, note, None));
    }
    if chunk.is_empty() {
        return json(codec, id, reply);
    }
    let reply = encode(codec, id, reply);
    push_frame(&mut chunk, None, &reply, None);
    with_sse_headers(Response::new(Body::from(chunk)))
}

/// An SSE answer that goes on while the handler runs.
fn streaming(
    codec: Codec,
    id: RequestId,
    notes: RequestStreamReceiver,
    run: RequestRun,
    keep_alive: Duration,
) -> Response {
    let body = Served {
        codec,
        id,
        run: Some(run),
        notes,
        pending: Vec::new(),
        keep_alive,
        idle: Box::pin(tokio::time::sleep(keep_alive)),
    };
    with_sse_headers(Response::new(Body::from_stream(body)))
}

/// Notifications framed into one chunk at most (a burst of progress goes out in few writes).
const EVENTS_PER_CHUNK: usize = 256;

/// The body of an SSE answer: the handler's notifications as they come, then its response.
/// It owns the run; dropping it cancels the request.
struct Served {
    codec: Codec,
    id: RequestId,
    /// `None` once the response is framed.
    run: Option<RequestRun>,
    notes: RequestStreamReceiver,
    /// Frames not yet handed to the body.
    pending: Vec<u8>,
    keep_alive: Duration,
    idle: Pin<Box<Sleep>>,
}

impl Stream for Served {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let Some(run) = this.run.as_mut() else {
            return Poll::Ready(None);
        };
        let pending = &mut this.pending;
        let framed = match this.notes.poll_drain(cx, EVENTS_PER_CHUNK, |note| {
            push_frame(pending, None, note, None);
        }) {
            Poll::Ready(Some(framed)) => framed,
            Poll::Ready(None) | Poll::Pending => 0,
        };
        if framed < EVENTS_PER_CHUNK
            && let Poll::Ready(reply) = Pin::new(run).poll(cx)
        {
            // Everything the handler sent came before its answer, and is in the stream now.
            this.notes.try_drain(usize::MAX, |note| {
                push_frame(&mut this.pending, None, note, None);
            });
            let reply = encode(this.codec, this.id.clone(), reply);
            push_frame(&mut this.pending, None, &reply, None);
            this.run = None;
        }
        if !this.pending.is_empty() {
            let chunk = Bytes::from(std::mem::take(&mut this.pending));
            let deadline = tokio::time::Instant::now() + this.keep_alive;
            this.idle.as_mut().reset(deadline);
            return Poll::Ready(Some(Ok(chunk)));
        }
        if this.idle.as_mut().poll(cx).is_ready() {
            // A comment keeps proxies and clients from timing the stream out.
            let deadline = tokio::time::Instant::now() + this.keep_alive;
            this.idle.as_mut().reset(deadline);
            return Poll::Ready(Some(Ok(Bytes::from_static(b":\n\n"))));
        }
        Poll::Pending
    }
}

/// The answer to request `id` in wire form (an error when there is none: the handler ended
/// without one); one over the size limit is answered with an error instead.
fn encode(codec: Codec, id: RequestId, reply: Option<Answered>) -> Vec<u8> {
    let encoded = match reply {
        Some(Answered::Result(result)) => codec.encode_result(&id, &result),
        Some(Answered::Response(reply)) => codec.encode(&Message::Response(reply)),
        // `Answered` is open to more forms; one this transport does not know is no answer.
        Some(_) | None => codec.encode(&Message::Response(ended(id.clone()))),
    };
    let id = Some(id);
    encoded
        .or_else(|error| {
            codec.encode(&Message::Response(Reply::error(
                id,
                ErrorObject::internal(format!("the response cannot be sent: {error}")),
            )))
        })
        .unwrap_or_default()
}

fn ended(id: RequestId) -> Reply {
    Reply::error(
        Some(id),
        ErrorObject::internal("the request ended without a response"),
    )
}
