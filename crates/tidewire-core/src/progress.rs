//! Progress values, and the guards that keep reported progress rising.

use serde::{Deserialize, Serialize};

use crate::jsonrpc::ProgressToken;

/// One progress report: how far, out of how much, and what is happening.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Progress so far; rises with every report.
    pub progress: f64,
    /// The total, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// A human-readable message (2025-03-26 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Progress {
    /// A report with progress only.
    pub fn new(progress: f64) -> Self {
        Self {
            progress,
            total: None,
            message: None,
        }
    }

    /// The fraction done (`progress / total`), when the total is known and positive.
    pub fn fraction(&self) -> Option<f64> {
        self.total
            .filter(|t| *t > 0.0)
            .map(|t| (self.progress / t).clamp(0.0, 1.0))
    }
}

/// `3/10: Fetching page 3` — the progress, `/total` when known, `: message` when there is one.
/// The message is the peer's text as sent: escape it before it reaches a terminal.
impl std::fmt::Display for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.progress)?;
        if let Some(total) = self.total {
            write!(f, "/{total}")?;
        }
        if let Some(message) = &self.message {
            write!(f, ": {message}")?;
        }
        Ok(())
    }
}

/// The params of `notifications/progress` as the engine reads and writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProgressParams {
    pub progress_token: ProgressToken,
    #[serde(flatten)]
    pub progress: Progress,
}

impl ProgressParams {
    /// The params as a JSON object, built member by member: serialising through serde's
    /// `flatten` (a generic map serializer) was a fifth of the server's CPU in a progress burst.
    pub(crate) fn into_value(self) -> serde_json::Value {
        use serde_json::Value;
        let mut map = serde_json::Map::new();
        map.insert("progressToken".to_owned(), self.progress_token.to_json());
        map.insert("progress".to_owned(), Value::from(self.progress.progress));
        if let Some(total) = self.progress.total {
            map.insert("total".to_owned(), Value::from(total));
        }
        if let Some(message) = self.progress.message {
            map.insert("message".to_owned(), Value::String(message));
        }
        Value::Object(map)
    }
}

/// Why a progress report was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProgressError {
    /// Progress must rise with every report (the spec requires it); this one did not.
    #[error("progress must increase: {attempted} does not exceed the last value {last}")]
    NotIncreasing {
        /// The last value sent.
        last: f64,
        /// The value refused.
        attempted: f64,
    },
    /// Progress must be a finite number.
    #[error("progress must be a finite number, got {0}")]
    NotFinite(f64),
    /// The request was cancelled; nothing more may be sent for it.
    #[error("the request was cancelled; no more progress may be sent")]
    Cancelled,
    /// The connection is closed.
    #[error("the connection is closed")]
    Closed,
    /// The transport cannot deliver progress for this request (for example Streamable HTTP in
    /// JSON-response mode, which answers with one JSON body).
    #[error("this transport cannot deliver progress for the request ({0})")]
    Unsupported(&'static str),
}

impl ProgressError {
    /// Whether the request was cancelled: a loop that reports progress stops here.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled)
    }
}

/// Remembers the last progress value sent for one request and refuses any that does not rise.
#[derive(Debug, Default)]
pub(crate) struct MonotonicGuard {
    last: Option<f64>,
}

impl MonotonicGuard {
    /// Accepts `value` if it is finite and exceeds the last accepted one.
    pub(crate) fn admit(&mut self, value: f64) -> Result<(), ProgressError> {
        if !value.is_finite() {
            return Err(ProgressError::NotFinite(value));
        }
        if let Some(last) = self.last
            && value <= last
        {
            return Err(ProgressError::NotIncreasing {
                last,
                attempted: value,
            });
        }
        self.last = Some(value);
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn last(&self) -> Option<f64> {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_displays_as_progress_total_and_message() {
        let mut p = Progress::new(3.0);
        assert_eq!(p.to_string(), "3");
        p.total = Some(10.0);
        assert_eq!(p.to_string(), "3/10");
        p.message = Some("Fetching page 3".into());
        assert_eq!(p.to_string(), "3/10: Fetching page 3");
        assert_eq!(Progress::new(0.5).to_string(), "0.5");
    }

    #[test]
    fn guard_refuses_equal_lower_and_non_finite_values() {
        let mut g = MonotonicGuard::default();
        assert!(g.admit(0.0).is_ok());
        assert!(g.admit(0.5).is_ok());
        assert_eq!(
            g.admit(0.5),
            Err(ProgressError::NotIncreasing {
                last: 0.5,
                attempted: 0.5
            })
        );
        assert!(g.admit(0.1).is_err());
        assert!(matches!(
            g.admit(f64::NAN),
            Err(ProgressError::NotFinite(_))
        ));
        assert!(g.admit(2.0).is_ok());
        assert_eq!(g.last(), Some(2.0));
    }

    #[test]
    fn fraction_needs_a_positive_total() {
        let mut p = Progress::new(3.0);
        assert_eq!(p.fraction(), None);
        p.total = Some(4.0);
        assert_eq!(p.fraction(), Some(0.75));
        p.total = Some(0.0);
        assert_eq!(p.fraction(), None);
    }

    #[test]
    fn params_built_by_hand_are_what_serde_writes() {
        for progress in [
            Progress::new(1.0),
            Progress {
                progress: 2.5,
                total: Some(10.0),
                message: Some("page \"3\"".to_owned()),
            },
            Progress {
                progress: f64::NAN,
                total: None,
                message: Some(String::new()),
            },
        ] {
            for token in [ProgressToken::from("t"), ProgressToken::Number(7)] {
                let params = ProgressParams {
                    progress_token: token,
                    progress: progress.clone(),
                };
                let by_serde = serde_json::to_value(&params).expect("serializes");
                assert_eq!(params.into_value(), by_serde);
            }
        }
    }

    #[test]
    fn params_keep_token_type() {
        let p: ProgressParams =
            serde_json::from_str(r#"{"progressToken":"1","progress":2,"total":5,"message":"m"}"#)
                .expect("parse");
        assert_eq!(p.progress_token, ProgressToken::from("1"));
        assert_eq!(p.progress.message.as_deref(), Some("m"));
    }
}
