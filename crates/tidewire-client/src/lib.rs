//! # tidewire-client
//!
//! placeholder

mod builder;
mod call;
mod client;
mod dispatch;
mod error;
mod handlers;
mod notifications;

pub use builder::{
    ClientBuilder, Connecting, DEFAULT_MAX_LIST_PAGES, DEFAULT_NOTIFICATION_BUFFER,
    ElicitationModes,
};
pub use call::{CallToolBuilder, ToolCall, ToolProgress};
pub use client::Client;
pub use error::ClientError;
pub use handlers::{ElicitationHandler, RootsHandler, SamplingHandler, StaticRoots};
pub use notifications::{Lagged, NotificationStream};
