//! [`TracingObserver`]: the client side of an operation, for every request a session sends
//! (a client's, and a server's questions to its client): a `CLIENT` span, its trace context
//! written into the request's `_meta`, and `mcp.client.operation.duration`.

use serde_json::{Map, Value};
use tidewire_core::jsonrpc::RequestId;
use tidewire_core::session::{ObservedRequest, RequestObserver, SessionError};

use crate::{Message, Operation, Outcome, Side};

/// Give it to `SessionOptions::observe_requests`; the client and server crates do, with
/// their feature `otel`.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingObserver;

impl RequestObserver for TracingObserver {
    fn sending(
        &self,
        method: &str,
        id: &RequestId,
        params: &mut Option<Value>,
    ) -> Option<Box<dyn ObservedRequest>> {
        if !crate::is_active() {
            return None;
        }
        let operation = Operation::start(
            Side::Client,
            Message {
                method,
                params: params.as_ref(),
                request_id: Some(id),
                ..Message::default()
            },
        );
        // Into `_meta` (made when absent), when there is a context to carry (no propagator
        // installed, or no exporting subscriber: nothing, and the params are left as they
        // were); params that are not an object carry none.
        let mut carried = Map::new();
        crate::propagation::inject(&operation.context(), &mut carried);
        if !carried.is_empty()
            && let Value::Object(object) = params.get_or_insert_with(|| Value::Object(Map::new()))
        {
            let meta = object
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.extend(carried);
            }
        }
        Some(Box::new(Sent {
            operation,
            method: method.to_owned(),
        }))
    }
}

struct Sent {
    operation: Operation,
    method: String,
}

impl ObservedRequest for Sent {
    fn ended(self: Box<Self>, outcome: Result<&Value, &SessionError>) {
        let outcome = match outcome {
            Ok(result) => Outcome::of_result(&self.method, result),
            Err(SessionError::Remote(error)) => Outcome::Error(error.code),
            Err(SessionError::Cancelled(_)) => Outcome::Cancelled,
            Err(SessionError::Timeout(_)) => Outcome::Failed("timeout"),
            Err(SessionError::Closed(_)) => Outcome::Failed("closed"),
            Err(SessionError::Transport(_)) => Outcome::Failed("transport"),
            Err(_) => Outcome::Failed("refused"),
        };
        self.operation.finish(outcome);
    }
}
