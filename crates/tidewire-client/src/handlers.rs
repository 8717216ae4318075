//! What the client does when the server asks it something: sampling, elicitation, roots.
//!
//! Each is a trait with one async method that receives the typed params and the request's
//! [`RequestContext`] (to report progress back to the server, or notice a cancellation). Plain
//! functions and closures returning a future implement them, so a handler is often one line:
//!
//! ```
//! use tidewire_client::ClientBuilder;
//! use tidewire_core::schema::{CreateMessageParams, CreateMessageResult, Implementation};
//! use tidewire_core::session::RequestContext;
//!
//! let builder = ClientBuilder::new(Implementation::new("demo", "1.0")).sampling_handler(
//!     |params: CreateMessageParams, ctx: RequestContext| async move {
//!         let _ = ctx.report_progress(0.5, Some(1.0), Some("thinking".into())).await;
//!         Ok(CreateMessageResult::text("demo-model", format!("{} messages", params.messages.len())))
//!     },
//! );
//! # let _ = builder;
//! ```

use std::future::Future;
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult, ElicitationCapability,
    JsonObject, ListRootsResult, Root,
};
use tidewire_core::session::RequestContext;

/// Answers `sampling/createMessage`: the server asks the client's model for a completion.
///
/// Return an [`ErrorObject`] to refuse; the specification suggests code `-1` when the user
/// rejects the request.
pub trait SamplingHandler: Send + Sync + 'static {
    /// Samples a message for `params`.
    fn create_message(
        &self,
        params: CreateMessageParams,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<CreateMessageResult, ErrorObject>> + Send;
}

impl<F, Fut> SamplingHandler for F
where
    F: Fn(CreateMessageParams, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CreateMessageResult, ErrorObject>> + Send,
{
    fn create_message(
        &self,
        params: CreateMessageParams,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<CreateMessageResult, ErrorObject>> + Send {
        self(params, ctx)
    }
}

/// Answers `elicitation/create`: the server asks the user for input, through a form or
/// (2025-11-25) by sending them to a URL.
///
/// Only the modes declared with [`ClientBuilder::elicitation_modes`](crate::ClientBuilder::elicitation_modes)
/// reach the handler; others are refused with `-32602` before it runs.
pub trait ElicitationHandler: Send + Sync + 'static {
    /// Asks the user and returns their answer (accept with content, decline or cancel).
    fn elicit(
        &self,
        params: ElicitParams,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<ElicitResult, ErrorObject>> + Send;
}

impl<F, Fut> ElicitationHandler for F
where
    F: Fn(ElicitParams, RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ElicitResult, ErrorObject>> + Send,
{
    fn elicit(
        &self,
        params: ElicitParams,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<ElicitResult, ErrorObject>> + Send {
        self(params, ctx)
    }
}

/// Answers `roots/list`: the filesystem locations the client lets the server work with.
///
/// `roots/list` takes no parameters, so the handler gets only the context. For a fixed list,
/// use [`StaticRoots`].
pub trait RootsHandler: Send + Sync + 'static {
    /// Lists the roots.
    fn list_roots(
        &self,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorObject>> + Send;
}

impl<F, Fut> RootsHandler for F
where
    F: Fn(RequestContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<ListRootsResult, ErrorObject>> + Send,
{
    fn list_roots(
        &self,
        ctx: RequestContext,
    ) -> impl Future<Output = Result<ListRootsResult, ErrorObject>> + Send {
        self(ctx)
    }
}

/// A list of roots you can change while connected: serves `roots/list` from the current list.
///
/// Cheap to clone (an `Arc` inside); clones share the list. After [`set`](Self::set), call
/// [`Client::notify_roots_changed`](crate::Client::notify_roots_changed) so the server asks
/// again.
///
/// ```
/// use tidewire_client::StaticRoots;
/// use tidewire_core::schema::Root;
///
/// let roots = StaticRoots::new([Root::new("file:///home/me/project").with_name("project")]);
/// roots.set([Root::new("file:///tmp")]);
/// assert_eq!(roots.get()[0].uri, "file:///tmp");
/// ```
#[derive(Debug, Clone, Default)]
pub struct StaticRoots {
    roots: Arc<RwLock<Vec<Root>>>,
}

impl StaticRoots {
    /// A list holding `roots`.
    pub fn new(roots: impl IntoIterator<Item = Root>) -> Self {
        Self {
            roots: Arc::new(RwLock::new(roots.into_iter().collect())),
        }
    }

    /// Replaces the list.
    pub fn set(&self, roots: impl IntoIterator<Item = Root>) {
        let roots = roots.into_iter().collect();
        *self
            .roots
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = roots;
    }

    /// The current list.
    pub fn get(&self) -> Vec<Root> {
        self.roots
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

impl RootsHandler for StaticRoots {
    async fn list_roots(&self, _ctx: RequestContext) -> Result<ListRootsResult, ErrorObject> {
        Ok(ListRootsResult::new(self.get()))
    }
}

/// Object-safe forms of the handler traits, so the client can store any of them.
pub(crate) trait DynSampling: Send + Sync {
    fn call(
        &self,
        params: CreateMessageParams,
        ctx: RequestContext,
    ) -> BoxFuture<'_, Result<CreateMessageResult, ErrorObject>>;
}

impl<H: SamplingHandler> DynSampling for H {
    fn call(
        &self,
        params: CreateMessageParams,
        ctx: RequestContext,
    ) -> BoxFuture<'_, Result<CreateMessageResult, ErrorObject>> {
        Box::pin(self.create_message(params, ctx))
    }
}

pub(crate) trait DynElicitation: Send + Sync {
    fn call(
        &self,
        params: ElicitParams,
        ctx: RequestContext,
    ) -> BoxFuture<'_, Result<ElicitResult, ErrorObject>>;
}

impl<H: ElicitationHandler> DynElicitation for H {
    fn call(
        &self,
        params: ElicitParams,
        ctx: RequestContext,
    ) -> BoxFuture<'_, Result<ElicitResult, ErrorObject>> {
        Box::pin(self.elicit(params, ctx))
    }
}

pub(crate) trait DynRoots: Send + Sync {
    fn call(&self, ctx: RequestContext) -> BoxFuture<'_, Result<ListRootsResult, ErrorObject>>;
}

impl<H: RootsHandler> DynRoots for H {
    fn call(&self, ctx: RequestContext) -> BoxFuture<'_, Result<ListRootsResult, ErrorObject>> {
        Box::pin(self.list_roots(ctx))
    }
}

/// The elicitation modes a client accepts (`elicitation.form` / `elicitation.url`).
///
/// A client supports at least one mode: an empty set is read as [`FORM`](Self::FORM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ElicitationModes {
    /// Form mode: the server sends a flat schema and the client shows a form.
    pub form: bool,
    /// URL mode (2025-11-25): the client sends the user to a URL the server gives.
    pub url: bool,
}

impl ElicitationModes {
    /// Form mode only (the default).
    pub const FORM: Self = Self {
        form: true,
        url: false,
    };
    /// URL mode only.
    pub const URL: Self = Self {
        form: false,
        url: true,
    };
    /// Both modes.
    pub const FORM_AND_URL: Self = Self {
        form: true,
        url: true,
    };

    pub(crate) fn normalised(self) -> Self {
        if self.form || self.url {
            self
        } else {
            Self::FORM
        }
    }

    /// The capability object declaring these modes. Form only is sent as `{}`, which every
    /// revision with elicitation reads as form mode.
    pub(crate) fn capability(self) -> ElicitationCapability {
        let modes = self.normalised();
        let mut capability = ElicitationCapability::default();
        if modes.url {
            capability.url = Some(JsonObject::new());
            if modes.form {
                capability.form = Some(JsonObject::new());
            }
        }
        capability
    }
}

impl Default for ElicitationModes {
    fn default() -> Self {
        Self::FORM
    }
}
