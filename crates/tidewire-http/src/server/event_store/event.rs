//! One kept event.

use bytes::Bytes;

/// One event of a stream: its sequence number (1, 2, …) and the JSON-RPC message as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The event's number in its stream; its SSE id is `<stream>-<seq>`.
    pub seq: u64,
    /// The message, compact JSON (UTF-8, one line).
    pub data: Bytes,
    /// The response that completes a POST stream.
    pub last: bool,
}
