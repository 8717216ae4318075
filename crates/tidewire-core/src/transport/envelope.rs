//! One message plus the context that does not go on the wire.

use bytes::Bytes;

use super::{Exchange, ReplySlot};
use crate::jsonrpc::{Message, RequestId};

/// Which inbound request an outbound message relates to.
///
/// Streamable HTTP puts a response and everything related to its request (progress, logs,
/// requests back to the client) on the POST stream that carried that request, and everything
/// unrelated on the standalone GET stream. Single-connection transports ignore the route.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum Route {
    /// Not related to any inbound request.
    #[default]
    Unrelated,
    /// Related to the inbound request with this id (on this connection).
    Request(RequestId),
}

/// A JSON-RPC message with its non-serialised context.
///
/// On the way in, `extensions` carries what the transport knows (an HTTP session, auth info, the
/// protocol-version header); on the way out, `route` says which request the message belongs to.
#[derive(Debug, Clone)]
pub struct Envelope {
    /// The message itself.
    pub message: Message,
    /// Which inbound request this outbound message relates to.
    pub route: Route,
    /// Transport context: values keyed by their type ([`Extensions`](crate::Extensions)).
    pub extensions: crate::Extensions,
    /// On an outbound request, the engine's side of it, for a transport that
    /// [tracks requests](super::TransportProfile::tracks_requests); `None` otherwise.
    pub exchange: Option<Exchange>,
    /// On an inbound request, where its answer goes, for a transport that routes by request
    /// (set by the transport); on an outbound message sent for that request, the same slot (set
    /// by the engine). `None` otherwise.
    pub reply: Option<ReplySlot>,
    /// On an outbound message the engine wrote in wire form already (a progress report, or a
    /// result a handler answered [encoded](crate::session::Answer::Encoded)): the JSON text to
    /// send, of which `message` holds only what the engine and the transports read (the
    /// method, the id), without the params or the result. A sender sends these bytes instead
    /// of encoding `message`: [`Codec::encode_envelope`](super::Codec::encode_envelope) does
    /// either. `None` otherwise.
    pub wire: Option<Bytes>,
}

impl Envelope {
    /// An envelope with no route and no extensions.
    pub fn new(message: impl Into<Message>) -> Self {
        Self {
            message: message.into(),
            route: Route::Unrelated,
            extensions: crate::Extensions::new(),
            exchange: None,
            reply: None,
            wire: None,
        }
    }

    /// Sets the route.
    #[must_use]
    pub fn with_route(mut self, route: Route) -> Self {
        self.route = route;
        self
    }

    /// Sets the reply slot.
    #[must_use]
    pub fn with_reply(mut self, reply: Option<ReplySlot>) -> Self {
        self.reply = reply;
        self
    }
}

impl From<Message> for Envelope {
    fn from(message: Message) -> Self {
        Self::new(message)
    }
}
