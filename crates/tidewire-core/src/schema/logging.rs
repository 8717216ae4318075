//! Logging: levels and `logging/setLevel`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{EmptyResult, Meta};

/// The severity of a log message: the eight RFC 5424 levels.
///
/// Ordered from least to most severe, so `level >= threshold` selects what to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggingLevel {
    /// Debugging detail.
    Debug,
    /// Informational.
    Info,
    /// Normal but significant.
    Notice,
    /// A warning.
    Warning,
    /// An error.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LoggingLevel {
    /// Every level, least severe first.
    pub const ALL: [Self; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];

    /// The name used on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }
}

impl fmt::Display for LoggingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The string is not one of the eight logging levels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown logging level {0:?}")]
pub struct UnknownLoggingLevel(pub String);

impl FromStr for LoggingLevel {
    type Err = UnknownLoggingLevel;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| UnknownLoggingLevel(s.to_owned()))
    }
}

/// Parameters of `logging/setLevel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetLevelParams {
    /// The least severe level the client wants to receive.
    pub level: LoggingLevel,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SetLevelParams {
    /// Asks for messages at `level` and above.
    pub fn new(level: LoggingLevel) -> Self {
        Self { level, meta: None }
    }
}

impl_has_meta!(SetLevelParams);

request_marker!(
    /// Sets the least severe level of `notifications/message` the server sends.
    SetLevel,
    "logging/setLevel",
    SetLevelParams,
    EmptyResult
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn levels_are_ordered_and_named() {
        assert!(LoggingLevel::Error >= LoggingLevel::Warning);
        assert!(LoggingLevel::Debug < LoggingLevel::Info);
        assert!(LoggingLevel::Emergency > LoggingLevel::Alert);
        for level in LoggingLevel::ALL {
            let v = serde_json::to_value(level).expect("ser");
            assert_eq!(v, json!(level.as_str()));
            assert_eq!(
                serde_json::from_value::<LoggingLevel>(v).expect("de"),
                level
            );
            assert_eq!(level.as_str().parse::<LoggingLevel>(), Ok(level));
        }
        assert!("verbose".parse::<LoggingLevel>().is_err());
    }

    #[test]
    fn set_level_round_trip() {
        let p = SetLevelParams::new(LoggingLevel::Notice);
        let v = serde_json::to_value(&p).expect("ser");
        assert_eq!(v, json!({"level": "notice"}));
        assert_eq!(serde_json::from_value::<SetLevelParams>(v).expect("de"), p);
        assert!(serde_json::from_value::<SetLevelParams>(json!({"level": "loud"})).is_err());
    }
}
