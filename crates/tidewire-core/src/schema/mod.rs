//! The MCP schema as typed Rust, split by spec area.
//!
//! Types model the newest handshake revision (2025-11-25) and read every older one; fields a
//! revision lacks are optional. Each method is a marker type implementing [`RequestType`] or
//! [`NotificationType`], which ties its name to its parameter and result types, so
//! `peer.request::<CallTool>(params)` is checked at compile time.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[macro_use]
mod macros;

mod completion;
mod content;
mod elicitation;
mod elicitation_form;
mod lifecycle;
mod logging;
mod meta;
mod modern;
mod notifications;
mod pagination;
mod prompts;
mod resources;
mod roots;
mod sampling;
mod skills;
mod task_ext;
mod tasks;
mod tools;

pub mod compat;
pub mod methods;

pub use completion::*;
pub use content::*;
pub use elicitation::*;
pub use elicitation_form::*;
pub use lifecycle::*;
pub use logging::*;
pub use meta::*;
pub use methods::{
    ClientNotification, ClientRequest, ServerNotification, ServerRequest, StatelessRequest,
    known_request_method,
};
pub use modern::*;
pub use notifications::*;
pub use pagination::*;
pub use prompts::*;
pub use resources::*;
pub use roots::*;
pub use sampling::*;
pub use skills::*;
pub use task_ext::*;
pub use tasks::*;
pub use tools::*;

/// A request method: its name and its parameter and result types.
pub trait RequestType: Send + Sync + 'static {
    /// The JSON-RPC method name, e.g. `tools/call`.
    const METHOD: &'static str;
    /// The `params` member.
    type Params: Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The `result` member of a successful response.
    type Result: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Reads the params out of the tree they were parsed into. The default goes through serde;
    /// a method on the hot path (`tools/call`) moves its members out of the tree instead of
    /// copying each object it holds into a new map. Either way the outcome is what
    /// `serde_json::from_value` gives, errors included.
    ///
    /// # Errors
    /// serde's, when `params` does not match [`Params`](Self::Params).
    fn params_from_value(params: Value) -> Result<Self::Params, serde_json::Error> {
        serde_json::from_value(params)
    }
}

/// A notification method: its name and its parameter type.
pub trait NotificationType: Send + Sync + 'static {
    /// The JSON-RPC method name, e.g. `notifications/progress`.
    const METHOD: &'static str;
    /// The `params` member.
    type Params: Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Reads the params out of the tree they were parsed into, as
    /// [`RequestType::params_from_value`] does.
    ///
    /// # Errors
    /// serde's, when `params` does not match [`Params`](Self::Params).
    fn params_from_value(params: Value) -> Result<Self::Params, serde_json::Error> {
        serde_json::from_value(params)
    }
}
