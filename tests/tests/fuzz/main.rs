//! Fuzz targets for everything that parses peer bytes, on stable Rust: proptest with
//! structure-aware generators, run by [`tidewire_tests::fuzz`] (see its docs for the budget:
//! `cargo test` runs a short smoke, `just fuzz 60` runs each target for 60 s). One test per
//! target:
//!
//! - `codec`: `Message::from_slice`, `Codec` and `LineCodec` on valid-ish JSON-RPC, mutated
//!   bytes and raw oddities (deep nesting, huge numbers, BOMs, NULs, positional arrays);
//! - `sse`: `SseLines` feeding eventsource-stream (the wrapper both SSE clients use), on event
//!   streams with odd line ends, BOMs, junk bytes, huge fields and any chunking;
//! - `uri_template`: `UriTemplate` on structured and broken templates;
//! - `http_server`: the Streamable HTTP endpoint in its three modes, headers + body → response,
//!   in-process through `tower::ServiceExt::oneshot`, in short sequences that reuse a session;
//! - `legacy_sse`: the legacy HTTP+SSE POST path (any body and `Content-Type`, for the session a
//!   real stream opened, another id or none), then a `ping` the stream must still answer;
//! - `websocket`: frame sequences (text, binary, ping, pong, close, oversized, invalid UTF-8,
//!   raw frames) against the WebSocket server on a loopback port. It runs half the default
//!   case count: each case opens two connections;
//! - `peer_documents`: `WWW-Authenticate` challenges (any text; what tidewire writes reads
//!   back), protected-resource metadata, `SKILL.md` frontmatter, and the duplicate-member check
//!   (refused exactly when an object names a member twice, else read as serde_json reads it);
//! - `replica_documents`: the envelope replicas forward through Redis (read as an owner reads
//!   its inbox: a request it rebuilds never carries credentials; and as a relay reads a piece),
//!   authorization-server metadata (accepted only with `https` or loopback `http` endpoints),
//!   and trace context in `_meta` (any `traceparent`, never a panic).

use std::collections::{HashMap, HashSet};
use std::convert::Infallible;
use std::fmt;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, StatusCode, Uri, header};
use bytes::{Bytes, BytesMut};
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{SinkExt, StreamExt};
use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Value, json};
use tidewire_core::http::sse_lines::SseLines;
use tidewire_core::jsonrpc::{DecodeFailure, Message, RequestId};
use tidewire_core::transport::{Codec, LineCodec, TransportError};
use tidewire_http::server::{HttpConfig, ResponseMode, StreamableHttp};
use tidewire_server::UriTemplate;
use tidewire_tests::fuzz;
use tidewire_tests::harness::start_ws;
use tidewire_ws::server::WsConfig;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{CloseCode, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::{Frame, FrameHeader};
use tokio_util::codec::Decoder;
use tower::ServiceExt;

/// The longest any single wait in a case may take.
const WAIT: Duration = Duration::from_secs(5);
/// The longest a whole case of a networked target may take.
const CASE_LIMIT: Duration = Duration::from_secs(60);

pub(crate) fn fail(message: String) -> TestCaseError {
    TestCaseError::fail(message)
}

/// Runs `future` on `runtime` for at most `limit`. (The timer is made inside the runtime: tokio
/// refuses to make one outside.)
pub(crate) fn within<F: Future>(
    runtime: &tokio::runtime::Runtime,
    limit: Duration,
    future: F,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    runtime.block_on(async { timeout(limit, future).await })
}

/// Runs one case of a networked target on `runtime`: `case` within [`CASE_LIMIT`], and no
/// server task of `target` may panic meanwhile (a panic there is caught by tokio and would
/// otherwise pass unseen).
pub(crate) fn server_case(
    runtime: &tokio::runtime::Runtime,
    target: &str,
    case: impl Future<Output = Result<(), TestCaseError>>,
) -> Result<(), TestCaseError> {
    let before = fuzz::worker_panics(target);
    let outcome = within(runtime, CASE_LIMIT, case)
        .unwrap_or_else(|_| Err(fail(format!("the case took over {CASE_LIMIT:?}"))));
    prop_assert_eq!(
        fuzz::worker_panics(target),
        before,
        "a server task panicked during this case (its message is on stderr)"
    );
    outcome
}

/// A compiled regex strategy.
pub(crate) fn regex(pattern: &str) -> BoxedStrategy<String> {
    proptest::string::string_regex(pattern)
        .expect("a valid pattern")
        .boxed()
}

/// Where `cuts` cut `bytes` (empty chunks included, as a reader may see them).
pub(crate) fn chunks<'a>(bytes: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut out = Vec::with_capacity(points.len() + 1);
    let mut start = 0;
    for point in points {
        out.push(&bytes[start..point]);
        start = point;
    }
    out.push(&bytes[start..]);
    out
}

mod codec;
mod generators;
mod http_server;
mod legacy_sse;
mod peer_documents;
mod replica_documents;
mod sse;
mod uri_template;
mod websocket;
