//! JSON-RPC 2.0: ids, messages and the wire error object.
//!
//! MCP speaks JSON-RPC 2.0. This module models the envelope only; the MCP payloads live in
//! [`crate::schema`].

mod encoded;
mod error;
mod id;
mod message;
mod strict;

pub use encoded::EncodedResult;
pub use error::{ErrorCode, ErrorObject};
pub use id::{ProgressToken, RequestId};
pub use message::{DecodeFailure, InvalidMessage, Message, Notification, Request, Response};
pub use strict::value_from_slice;
