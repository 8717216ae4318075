//! [`Handler`]: what serves the requests and notifications a peer sends.

use std::future::Future;

use serde_json::Value;

use super::context::RequestContext;
use super::options::CancelPolicy;
use super::peer::Peer;
use crate::jsonrpc::{EncodedResult, ErrorObject, Notification, Request};

/// The result a handler answers a request with: a `Value` tree, or JSON text it wrote straight
/// from its own types ([`EncodedResult`]), which the engine sends as it is.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A result as a tree. The engine adapts it to the revision the connection negotiated (see
    /// [`compat`](crate::schema::compat)) before it is encoded.
    Tree(Value),
    /// A result in wire form, sent as written: the handler wrote it for the negotiated
    /// revision, and nothing adapts it.
    Encoded(EncodedResult),
}

impl From<Value> for Answer {
    fn from(value: Value) -> Self {
        Self::Tree(value)
    }
}

impl From<EncodedResult> for Answer {
    fn from(encoded: EncodedResult) -> Self {
        Self::Encoded(encoded)
    }
}

/// What serves the requests and notifications a peer sends us.
///
/// The server and client APIs implement it; implement it yourself to speak raw JSON-RPC.
pub trait Handler: Send + Sync + 'static {
    /// Serves one inbound request, in its own task. Return the `result` value or the error to
    /// answer with. If the request is cancelled meanwhile, whatever this returns is discarded.
    fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<Value, ErrorObject>> + Send;

    /// Serves one inbound request as [`handle_request`](Self::handle_request) does, answering
    /// with an [`Answer`]: what the engine calls. The default answers with
    /// [`handle_request`](Self::handle_request)'s `Value`; override it to answer some requests
    /// in wire form ([`Answer::Encoded`]), written once from typed data with no `Value` tree.
    fn answer_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<Answer, ErrorObject>> + Send {
        async move { self.handle_request(request, ctx).await.map(Answer::Tree) }
    }

    /// Receives one inbound notification, in the order they arrived, on the connection's reader:
    /// keep it short (hand long work to a task). `notifications/cancelled` and
    /// `notifications/progress` are also acted on by the engine itself before this is called.
    fn handle_notification(&self, notification: Notification, peer: &Peer) {
        let _ = (notification, peer);
    }

    /// What a cancellation does to this request's handler, when it differs from the
    /// connection's [`SessionOptions::cancel_policy`](super::options::SessionOptions::cancel_policy) (`None`: the connection's). Asked once, as
    /// the request starts; the server API answers with the policy set for the tool called.
    fn cancel_policy(&self, request: &Request) -> Option<CancelPolicy> {
        let _ = request;
        None
    }
}

/// A handler that answers every request with `-32601` and ignores notifications: for a side
/// that only sends. The answer quotes at most an [`excerpt`](crate::text::excerpt)
/// of the method name.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHandler;

impl Handler for NoHandler {
    async fn handle_request(
        &self,
        request: Request,
        _ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        Err(ErrorObject::method_not_found(&request.method))
    }
}
