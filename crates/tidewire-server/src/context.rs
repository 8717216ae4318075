//! What a tool, resource or prompt handler gets: the request, the connection and the server.

use std::sync::Arc;

use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::progress::ProgressError;
use tidewire_core::schema::{
    ClientCapabilities, CreateMessage, CreateMessageParams, CreateMessageResult, Elicit,
    ElicitParams, ElicitResult, EmptyParams, Implementation, ListRoots, ListRootsResult,
    LoggingLevel, LoggingMessageNotification, LoggingMessageParams,
};
use tidewire_core::session::{Peer, ProgressTracker, RequestBuilder, RequestContext, SessionError};
use tokio_util::sync::WaitForCancellationFuture;

use crate::Server;
use crate::connection::Connection;

/// The context of one request to the server, handed to tool, resource, prompt and completion
/// handlers.
///
/// It reports progress, notices cancellation, logs to the client, and sends requests back to the
/// client (sampling, elicitation, roots) — all related to this request, so on Streamable HTTP they
/// travel on its stream. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Context {
    request: RequestContext,
    connection: Arc<Connection>,
}

impl Context {
    pub(crate) fn new(request: RequestContext, connection: Arc<Connection>) -> Self {
        Self {
            request,
            connection,
        }
    }

    /// The engine-level request context (id, `_meta`, transport extensions, raw peer).
    pub fn request(&self) -> &RequestContext {
        &self.request
    }

    /// The routed handle to the client.
    pub fn peer(&self) -> &Peer {
        self.request.peer()
    }

    /// The server this request reached (to announce list changes or resource updates).
    pub fn server(&self) -> Server {
        self.connection.server()
    }

    /// The revision negotiated with this client, once `initialize` ran.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.request.peer().protocol_version()
    }

    /// The capabilities the client declared in `initialize`.
    pub fn client_capabilities(&self) -> Option<ClientCapabilities> {
        self.connection.client_capabilities()
    }

    /// Who the client says it is.
    pub fn client_info(&self) -> Option<Implementation> {
        self.connection.client_info()
    }

    /// Ends the stream carrying this request without ending the request, where the transport
    /// supports it (Streamable HTTP, 2025-11-25): the client resumes and gets the rest. See
    /// [`RequestContext::close_stream`].
    pub fn close_stream(&self) -> bool {
        self.request.close_stream()
    }

    /// Reports progress; inert when the client asked for none. See
    /// [`RequestContext::report_progress`].
    ///
    /// # Errors
    /// When the value does not rise, the request is cancelled, or the connection is gone.
    pub async fn report_progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> Result<(), ProgressError> {
        self.request.report_progress(progress, total, message).await
    }

    /// A tracker that accumulates progress deltas.
    pub fn progress_tracker(&self, total: Option<f64>) -> ProgressTracker {
        self.request.progress_tracker(total)
    }

    /// Resolves when the client cancels this request.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.request.cancelled()
    }

    /// True once the client has cancelled this request.
    pub fn is_cancelled(&self) -> bool {
        self.request.is_cancelled()
    }

    /// Sends `notifications/message` to the client if `level` passes the level it set with
    /// `logging/setLevel` (by default `info` and above pass).
    ///
    /// # Errors
    /// When the request is cancelled or the connection is gone.
    pub async fn log(
        &self,
        level: LoggingLevel,
        data: impl Into<Value>,
    ) -> Result<(), SessionError> {
        self.log_as(level, None, data).await
    }

    /// Like [`log`](Self::log), naming the logger.
    ///
    /// # Errors
    /// When the request is cancelled or the connection is gone.
    pub async fn log_as(
        &self,
        level: LoggingLevel,
        logger: Option<&str>,
        data: impl Into<Value>,
    ) -> Result<(), SessionError> {
        if !self.connection.should_log(level) {
            return Ok(());
        }
        let mut params = LoggingMessageParams::new(level, data);
        if let Some(logger) = logger {
            params = params.with_logger(logger);
        }
        self.request
            .notify::<LoggingMessageNotification>(params)
            .await
    }

    /// Asks the client's model for a completion (`sampling/createMessage`), related to this
    /// request. Use [`create_message_request`](Self::create_message_request) to set a timeout or
    /// watch the client's progress.
    ///
    /// # Errors
    /// [`SessionError::NotSupported`] when the client did not declare `sampling`; otherwise as
    /// any request.
    pub async fn create_message(
        &self,
        params: CreateMessageParams,
    ) -> Result<CreateMessageResult, SessionError> {
        self.create_message_request(params)?.await
    }

    /// The `sampling/createMessage` request as a builder (timeout, progress, cancel).
    ///
    /// # Errors
    /// [`SessionError::NotSupported`] when the client did not declare `sampling`.
    pub fn create_message_request(
        &self,
        params: CreateMessageParams,
    ) -> Result<RequestBuilder<CreateMessageResult>, SessionError> {
        self.require(|c| c.sampling.is_some(), "sampling")?;
        Ok(self.request.request::<CreateMessage>(params))
    }

    /// Asks the user for input through the client (`elicitation/create`).
    ///
    /// # Errors
    /// [`SessionError::NotSupported`] when the client did not declare elicitation in the mode
    /// asked for, or the revision predates elicitation.
    pub async fn elicit(&self, params: ElicitParams) -> Result<ElicitResult, SessionError> {
        self.elicit_request(params)?.await
    }

    /// The `elicitation/create` request as a builder (timeout, progress, cancel).
    ///
    /// # Errors
    /// As [`elicit`](Self::elicit).
    pub fn elicit_request(
        &self,
        params: ElicitParams,
    ) -> Result<RequestBuilder<ElicitResult>, SessionError> {
        if self
            .protocol_version()
            .is_some_and(|v| !v.has_elicitation())
        {
            return Err(SessionError::NotSupported(
                "elicitation (the negotiated revision predates it)".to_owned(),
            ));
        }
        let url = matches!(params, ElicitParams::Url(_));
        if url {
            self.require(
                |c| c.elicitation.as_ref().is_some_and(|e| e.supports_url()),
                "URL-mode elicitation",
            )?;
        } else {
            self.require(
                |c| c.elicitation.as_ref().is_some_and(|e| e.supports_form()),
                "form-mode elicitation",
            )?;
        }
        Ok(self.request.request::<Elicit>(params))
    }

    /// Asks the client for its roots (`roots/list`).
    ///
    /// # Errors
    /// [`SessionError::NotSupported`] when the client did not declare `roots`.
    pub async fn list_roots(&self) -> Result<ListRootsResult, SessionError> {
        self.require(|c| c.roots.is_some(), "roots")?;
        self.request.request::<ListRoots>(EmptyParams::new()).await
    }

    fn require(
        &self,
        has: impl Fn(&ClientCapabilities) -> bool,
        what: &str,
    ) -> Result<(), SessionError> {
        // What the transport cannot carry is the clearer reason, so it comes first.
        if let Some(limits) = self.request.limits()
            && !limits.peer_requests
        {
            return Err(SessionError::NotSupported(format!(
                "{what}: this transport cannot send requests to the client ({})",
                limits.reason
            )));
        }
        match self.connection.client_capabilities() {
            Some(caps) if has(&caps) => Ok(()),
            _ => Err(SessionError::NotSupported(what.to_owned())),
        }
    }
}
