//! The common notifications: progress, cancellation, log messages, resource updates and the
//! `list_changed` family.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{EmptyParams, LoggingLevel, Meta};
use crate::jsonrpc::{ProgressToken, RequestId};

/// Parameters of `notifications/progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressNotificationParams {
    /// The token from the request's `_meta.progressToken`.
    pub progress_token: ProgressToken,
    /// Progress so far; it increases with every notification.
    pub progress: f64,
    /// The total, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A human-readable description of the current step (2025-03-26 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ProgressNotificationParams {
    /// Progress for `token`.
    pub fn new(token: impl Into<ProgressToken>, progress: f64, total: Option<f64>) -> Self {
        Self {
            progress_token: token.into(),
            progress,
            total,
            message: None,
            meta: None,
        }
    }

    /// Sets the message.
    #[must_use]
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

/// Parameters of `notifications/cancelled`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledNotificationParams {
    /// The request to cancel. Required before 2025-11-25; in 2025-11-25 the schema makes it
    /// optional (task cancellation uses `tasks/cancel`), but it must be set for ordinary requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<RequestId>,
    /// Why, for logs or display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CancelledNotificationParams {
    /// Cancels `request_id`, optionally saying why.
    pub fn new(request_id: impl Into<RequestId>, reason: Option<String>) -> Self {
        Self {
            request_id: Some(request_id.into()),
            reason,
            meta: None,
        }
    }
}

/// Parameters of `notifications/message` (a log message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggingMessageParams {
    /// The severity.
    pub level: LoggingLevel,
    /// The logger's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// The message: any JSON value (a string, an object, …).
    pub data: Value,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl LoggingMessageParams {
    /// A message at `level`.
    pub fn new(level: LoggingLevel, data: impl Into<Value>) -> Self {
        Self {
            level,
            logger: None,
            data: data.into(),
            meta: None,
        }
    }

    /// Sets the logger name.
    #[must_use]
    pub fn with_logger(mut self, logger: impl Into<String>) -> Self {
        self.logger = Some(logger.into());
        self
    }
}

/// Parameters of `notifications/resources/updated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceUpdatedNotificationParams {
    /// The resource that changed (possibly a sub-resource of the subscribed one).
    pub uri: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ResourceUpdatedNotificationParams {
    /// `uri` changed.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            meta: None,
        }
    }
}

impl_has_meta!(
    ProgressNotificationParams,
    CancelledNotificationParams,
    LoggingMessageParams,
    ResourceUpdatedNotificationParams,
);

notification_marker!(
    /// Progress of a long-running request. Both directions.
    ProgressNotification,
    "notifications/progress",
    ProgressNotificationParams
);
notification_marker!(
    /// Cancels a request sent earlier in the same direction. Both directions.
    CancelledNotification,
    "notifications/cancelled",
    CancelledNotificationParams
);
notification_marker!(
    /// A log message from the server.
    LoggingMessageNotification,
    "notifications/message",
    LoggingMessageParams
);
notification_marker!(
    /// A subscribed resource changed.
    ResourceUpdatedNotification,
    "notifications/resources/updated",
    ResourceUpdatedNotificationParams
);
notification_marker!(
    /// The server's resource list changed.
    ResourceListChangedNotification,
    "notifications/resources/list_changed",
    EmptyParams
);
notification_marker!(
    /// The server's tool list changed.
    ToolListChangedNotification,
    "notifications/tools/list_changed",
    EmptyParams
);
notification_marker!(
    /// The server's prompt list changed.
    PromptListChangedNotification,
    "notifications/prompts/list_changed",
    EmptyParams
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn progress_round_trip_with_both_token_forms() {
        for token in [json!(1), json!("1")] {
            let v =
                json!({"progressToken": token, "progress": 5, "total": 10.5, "message": "half"});
            let p: ProgressNotificationParams = serde_json::from_value(v.clone()).expect("de");
            assert_eq!(p.progress_token.to_json(), token);
            let back = serde_json::to_value(&p).expect("ser");
            assert_eq!(back["progressToken"], token);
            assert_eq!(back["progress"], json!(5.0));
            assert_eq!(back["message"], json!("half"));
        }
        let int: ProgressNotificationParams =
            serde_json::from_value(json!({"progressToken": 1, "progress": 0})).expect("int");
        let string: ProgressNotificationParams =
            serde_json::from_value(json!({"progressToken": "1", "progress": 0})).expect("str");
        assert_ne!(int.progress_token, string.progress_token);
    }

    #[test]
    fn cancelled_round_trip() {
        let c = CancelledNotificationParams::new(7, Some("user".into()));
        let v = serde_json::to_value(&c).expect("ser");
        assert_eq!(v, json!({"requestId": 7, "reason": "user"}));
        assert_eq!(
            serde_json::from_value::<CancelledNotificationParams>(v).expect("de"),
            c
        );
        let no_id: CancelledNotificationParams = serde_json::from_value(json!({})).expect("no id");
        assert_eq!(no_id.request_id, None);
    }

    #[test]
    fn message_and_updated_round_trip() {
        let m = LoggingMessageParams::new(LoggingLevel::Warning, json!({"disk": "full"}))
            .with_logger("fs");
        let v = serde_json::to_value(&m).expect("ser");
        assert_eq!(
            v,
            json!({"level": "warning", "logger": "fs", "data": {"disk": "full"}})
        );
        assert_eq!(
            serde_json::from_value::<LoggingMessageParams>(v).expect("de"),
            m
        );
        let u = ResourceUpdatedNotificationParams::new("file:///a");
        assert_eq!(
            serde_json::to_value(&u).expect("ser"),
            json!({"uri": "file:///a"})
        );
    }
}
