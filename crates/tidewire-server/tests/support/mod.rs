//! What the server tests share.

/// How long any one test step may take before the test fails instead of hanging.
pub const LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorObject, Notification, Request};
use tidewire_core::session::{Handler, NoHandler, Peer, RequestContext};
use tokio::sync::mpsc;

/// The client side of a test: answers no request, records what the server sends unprompted.
#[derive(Clone)]
pub struct Recorder(pub mpsc::UnboundedSender<Notification>);

impl Handler for Recorder {
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        NoHandler.handle_request(request, ctx).await
    }

    fn handle_notification(&self, notification: Notification, _peer: &Peer) {
        let _ = self.0.send(notification);
    }
}
