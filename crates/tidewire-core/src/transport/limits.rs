//! What a transport can carry for one inbound request.

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
