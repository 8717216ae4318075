//! The core [`Handler`] of a client connection: routes the server's requests to the client-side
//! handlers and its notifications to the callback and the streams.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorObject, Notification, Request};
use tidewire_core::schema::{
    CreateMessage, CreateMessageParams, Elicit, ElicitParams, IncludeContext, JsonObject,
    ListRoots, RequestType, SamplingCapability, ServerNotification, ServerRequest,
};
use tidewire_core::session::{Handler, Peer, RequestContext};
use tokio::sync::broadcast;

use crate::handlers::{DynElicitation, DynRoots, DynSampling, ElicitationModes};
use crate::notifications::NotificationCallback;

pub(crate) struct Dispatcher {
    pub(crate) answerers: Arc<Answerers>,
    /// Dropped from as change notifications come.
    pub(crate) cache: Arc<crate::cache::ResultCache>,
    pub(crate) callback: Option<NotificationCallback>,
    pub(crate) notifications: broadcast::Sender<ServerNotification>,
}

/// The client-side handlers: what answers the server's questions, whether they come as requests
/// (the session era) or inside an `input_required` result (2026-07-28).
pub(crate) struct Answerers {
    pub(crate) sampling: Option<(Arc<dyn DynSampling>, SamplingCapability)>,
    pub(crate) elicitation: Option<(Arc<dyn DynElicitation>, ElicitationModes)>,
    pub(crate) roots: Option<Arc<dyn DynRoots>>,
}

impl Handler for Dispatcher {
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        self.answerers.answer(request, ctx).await
    }

    fn handle_notification(&self, notification: Notification, peer: &Peer) {
        self.notify(notification, peer);
    }
}

impl Answerers {
    /// Answers one question of the server (`sampling/createMessage`, `elicitation/create`,
    /// `roots/list`, or `ping`) with the handler set for it.
    pub(crate) async fn answer(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        // Without a handler the method does not exist here, whatever its params look like.
        let served = match request.method.as_str() {
            CreateMessage::METHOD => self.sampling.is_some(),
            Elicit::METHOD => self.elicitation.is_some(),
            ListRoots::METHOD => self.roots.is_some(),
            // `ping` normally never gets here (the engine answers it), unless the session
            // options turned that off.
            "ping" => true,
            _ => false,
        };
        if !served {
            return Err(ErrorObject::method_not_found(&request.method));
        }
        match ServerRequest::from_parts(&request.method, request.params)? {
            ServerRequest::Ping(_) => Ok(Value::Object(JsonObject::new())),
            ServerRequest::CreateMessage(params) => {
                let Some((handler, capability)) = &self.sampling else {
                    return Err(ErrorObject::method_not_found(CreateMessage::METHOD));
                };
                check_sampling(&params, capability)?;
                encode(handler.call(params, ctx).await?)
            }
            ServerRequest::Elicit(params) => {
                let Some((handler, modes)) = &self.elicitation else {
                    return Err(ErrorObject::method_not_found(Elicit::METHOD));
                };
                check_elicitation(&params, *modes)?;
                encode(handler.call(params, ctx).await?)
            }
            ServerRequest::ListRoots(_) => {
                let Some(handler) = &self.roots else {
                    return Err(ErrorObject::method_not_found(ListRoots::METHOD));
                };
                encode(handler.call(ctx).await?)
            }
            other => Err(ErrorObject::method_not_found(other.method())),
        }
    }
}

impl Dispatcher {
    fn notify(&self, notification: Notification, _peer: &Peer) {
        let notification =
            match ServerNotification::from_parts(&notification.method, notification.params) {
                Ok(n) => n,
                Err(error) => {
                    tracing::debug!(%error, "ignored a notification with invalid params");
                    return;
                }
            };
        self.cache.invalidate(&notification);
        if let Some(callback) = &self.callback {
            // A panicking callback must not take the connection's reader down with it.
            let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| callback(&notification)));
            if outcome.is_err() {
                tracing::error!(
                    method = notification.method(),
                    "the notification callback panicked"
                );
            }
        }
        // An error only means nobody is subscribed right now.
        let _ = self.notifications.send(notification);
    }
}

fn encode<T: Serialize>(result: T) -> Result<Value, ErrorObject> {
    serde_json::to_value(result).map_err(ErrorObject::internal)
}

/// Refuses what the client did not declare: tools without `sampling.tools`, and context
/// inclusion without `sampling.context`.
fn check_sampling(
    params: &CreateMessageParams,
    capability: &SamplingCapability,
) -> Result<(), ErrorObject> {
    if (!params.tools.is_empty() || params.tool_choice.is_some()) && capability.tools.is_none() {
        return Err(ErrorObject::invalid_params(
            "sampling with tools was requested, but the client did not declare `sampling.tools`",
        ));
    }
    let wants_context = matches!(
        params.include_context,
        Some(IncludeContext::ThisServer | IncludeContext::AllServers)
    );
    if wants_context && capability.context.is_none() {
        return Err(ErrorObject::invalid_params(
            "includeContext was requested, but the client did not declare `sampling.context`",
        ));
    }
    Ok(())
}

/// Refuses an elicitation mode the client did not declare.
fn check_elicitation(params: &ElicitParams, modes: ElicitationModes) -> Result<(), ErrorObject> {
    let (declared, mode) = match params {
        ElicitParams::Form(_) => (modes.form, "form"),
        ElicitParams::Url(_) => (modes.url, "url"),
    };
    if declared {
        Ok(())
    } else {
        Err(ErrorObject::invalid_params(format!(
            "elicitation mode `{mode}` is not supported by this client"
        )))
    }
}
