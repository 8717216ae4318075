//! What a transport can carry for one inbound request, and what it lets a handler do to the
//! stream that carries it.

use std::sync::Arc;

use crate::stateless::RoutingHeaders;

/// Attached by a transport to the extensions of an inbound request's [`Envelope`](super::Envelope)
/// when it cannot carry everything the engine could send for that request.
///
/// Streamable HTTP in JSON-response mode answers each POST with one JSON body, so nothing
/// related to the request (progress, logs, requests back to the client) can travel before the
/// response; in stateless mode the server cannot send requests to the client at all. The
/// request's [`RequestContext`](crate::session::RequestContext) reads this and refuses such
/// sends with a clear error, instead of losing them. Absent means "everything is possible".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestLimits {
    /// Notifications related to the request (progress, logs) can be delivered.
    pub related_notifications: bool,
    /// Requests to the peer (sampling, elicitation, roots) can be sent and answered.
    pub peer_requests: bool,
    /// Why something is not possible, for error messages (e.g. "JSON response mode").
    pub reason: &'static str,
}

/// Ends the transport stream that carries one request's messages without ending the request.
///
/// Attached by transports that support it (Streamable HTTP, for a request answered with an SSE
/// stream on 2025-11-25) to the request's envelope extensions. After a priming event told the
/// client how long to wait (`retry`), the server may close a long-running request's stream; the
/// client then reconnects and resumes with `Last-Event-ID`, receiving what came after,
/// including the response (SEP-1699, "SSE polling"). Reach it with
/// [`RequestContext::close_stream`](crate::session::RequestContext::close_stream).
#[derive(Clone)]
pub struct StreamCloser(Arc<dyn Fn() + Send + Sync>);

impl StreamCloser {
    /// A closer that runs `close`.
    pub fn new(close: impl Fn() + Send + Sync + 'static) -> Self {
        Self(Arc::new(close))
    }

    /// Ends the stream (the request goes on).
    pub fn close(&self) {
        (self.0)();
    }
}

impl std::fmt::Debug for StreamCloser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamCloser")
    }
}

/// That an inbound message came over HTTP, and what of its request the engine and the server
/// read without the `http` crate. Every HTTP server transport (Streamable HTTP, HTTP+SSE) puts
/// it in the message's envelope extensions, beside the whole request's
/// `tidewire_core::http::HttpRequestInfo` (the headers, for handlers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpArrival {
    /// The session the message belongs to, when there is one.
    pub session_id: Option<String>,
    /// Its `Mcp-Param-*` headers (the 2026-07-28 wire), names in lower case, values as sent
    /// (not decoded), the first of each name. The server checks them against the tool call's
    /// arguments.
    pub param_headers: RoutingHeaders,
}

/// Who the request acts for, as an authentication layer established it (an OAuth subject, a
/// user id), and what it was granted (the token's scopes). Put in the envelope extensions by
/// whatever authenticated the request. What belongs to a principal is bound to its
/// [`subject`](Self::subject) alone: a session, a stateless request's `requestState`, a task
/// stay its own when a step-up brings a token with more scopes. It serializes as
/// `{"subject", "scopes"}`, for a layer that carries it to another process.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Principal {
    /// Who: the token's subject.
    pub subject: String,
    /// What the request may do: the token's scopes.
    pub scopes: Vec<String>,
}

impl Principal {
    /// `subject`, with no scopes.
    pub fn new(subject: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            scopes: Vec::new(),
        }
    }

    /// With `scopes` granted.
    #[must_use]
    pub fn with_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Whether `scope` was granted.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// Whether `other` is the same principal (the same subject, whatever its scopes).
    pub fn is(&self, other: &Principal) -> bool {
        self.subject == other.subject
    }

    /// Whether a request acting for `principal` may use what `owner` opened: the same
    /// subject, or no principal on either side.
    pub fn may_use(owner: Option<&Principal>, principal: Option<&Principal>) -> bool {
        Self::may_use_as(owner.map(|owner| owner.subject.as_str()), principal)
    }

    /// [`may_use`](Self::may_use), with what was opened known by its owner's subject alone
    /// (as a record kept elsewhere holds it).
    pub fn may_use_as(owner: Option<&str>, principal: Option<&Principal>) -> bool {
        match (owner, principal) {
            (None, None) => true,
            (Some(owner), Some(principal)) => owner == principal.subject,
            _ => false,
        }
    }
}
