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

/// The params of `notifications/progress` as the engine reads them (it writes them as
/// [`ProgressWire`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ProgressParams {
    pub progress_token: ProgressToken,
    #[serde(flatten)]
    pub progress: Progress,
}

/// The params of `notifications/progress` in wire form, borrowed from the report and the
/// request's token: [`notification_text`](Self::notification_text) writes the whole message
/// (no `flatten`, no `Value` tree, no copy of the token).
pub(crate) struct ProgressWire<'a> {
    pub token: &'a ProgressToken,
    pub progress: &'a Progress,
}

/// The same params written member by member through serde: the reference the hand framing is
/// checked against.
#[cfg(test)]
impl Serialize for ProgressWire<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Progress {
            progress,
            total,
            message,
        } = self.progress;
        let members = 2 + usize::from(total.is_some()) + usize::from(message.is_some());
        let mut map = serializer.serialize_map(Some(members))?;
        map.serialize_entry("progressToken", self.token)?;
        map.serialize_entry("progress", &WireNumber(*progress))?;
        if let Some(total) = total {
            map.serialize_entry("total", &WireNumber(*total))?;
        }
        if let Some(message) = message {
            map.serialize_entry("message", message)?;
        }
        map.end()
    }
}

impl ProgressWire<'_> {
    /// The text [`frame_into`](Self::frame_into) writes, in a `Vec` of its own (for the
    /// tests).
    ///
    /// # Errors
    /// Only what `serde_json` reports for a value it cannot write (none of these types fails
    /// into a `Vec`).
    #[cfg(test)]
    pub(crate) fn notification_text(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::with_capacity(
            HEAD.len() + 64 + self.progress.message.as_ref().map_or(0, |m| m.len() + 16),
        );
        self.frame_into(&mut out)?;
        Ok(out)
    }

    /// Writes the whole `notifications/progress` message as JSON text at the end of `out`: the
    /// same text serde writes for it (`wire_notification` with these params), framed by hand.
    /// The constant members are copied, and only the token, the numbers and the message are
    /// encoded (a burst of reports spent more on escaping the nine constant keys and strings
    /// than on anything else).
    ///
    /// # Errors
    /// Only what `serde_json` reports for a value it cannot write (none of these types fails
    /// into a `Vec`).
    pub(crate) fn frame_into(&self, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        let Progress {
            progress,
            total,
            message,
        } = self.progress;
        out.extend_from_slice(HEAD);
        serde_json::to_writer(&mut *out, self.token)?;
        out.extend_from_slice(br#","progress":"#);
        serde_json::to_writer(&mut *out, &WireNumber(*progress))?;
        if let Some(total) = total {
            out.extend_from_slice(br#","total":"#);
            serde_json::to_writer(&mut *out, &WireNumber(*total))?;
        }
        if let Some(message) = message {
            out.extend_from_slice(br#","message":"#);
            serde_json::to_writer(&mut *out, message)?;
        }
        out.extend_from_slice(b"}}");
        Ok(())
    }
}

/// What every progress notification starts with, up to its token.
const HEAD: &[u8] =
    br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"#;

/// The largest integer an `f64` holds exactly (2^53).
const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;

/// A progress value as JSON: a whole number is written as an integer (`3`, not `3.0`; JSON has
/// one number type, and a counter is what most handlers report), anything else as a float.
struct WireNumber(f64);

impl Serialize for WireNumber {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let v = self.0;
        if v.fract() == 0.0 && v.abs() <= EXACT_INTEGERS {
            // Exact: a whole number within ±2^53 converts without loss.
            #[allow(clippy::cast_possible_truncation)]
            serializer.serialize_i64(v as i64)
        } else {
            serializer.serialize_f64(v)
        }
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
    /// The report is larger than the transport's message limit (a very long `message`): it
    /// was not sent, and the request goes on (a shorter report, even of the same value, may
    /// follow). On every transport that has a limit
    /// ([`TransportProfile::max_message_size`](crate::transport::TransportProfile::max_message_size));
    /// the in-memory one has none.
    #[error(
        "the progress report is {size} bytes, over the transport's limit of {limit}; it was not sent"
    )]
    TooLarge {
        /// The report's size, in bytes.
        size: usize,
        /// The largest message the transport carries.
        limit: usize,
    },
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
    use crate::session::stream::{SCRATCH_KEPT, scratch_capacity, with_scratch};

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

    /// Reports that exercise the wire form: a bare value, a fraction with a total and a message
    /// to escape, a negative zero with a huge total and an empty message.
    fn samples() -> [Progress; 3] {
        [
            Progress::new(1.0),
            Progress {
                progress: 2.5,
                total: Some(10.0),
                message: Some("page \"3\" \u{1b}[31m é".to_owned()),
            },
            Progress {
                progress: -0.0,
                total: Some(1e300),
                message: Some(String::new()),
            },
        ]
    }

    #[test]
    fn the_wire_form_reads_back_as_sent() {
        for progress in samples() {
            for token in [ProgressToken::from("t"), ProgressToken::Number(7)] {
                let wire = serde_json::to_string(&ProgressWire {
                    token: &token,
                    progress: &progress,
                })
                .expect("serializes");
                let params = ProgressParams {
                    progress_token: token,
                    progress: progress.clone(),
                };
                let read: ProgressParams = serde_json::from_str(&wire).expect("reads back");
                assert_eq!(read, params, "{wire}");
            }
        }
    }

    #[test]
    fn the_hand_framed_message_is_what_serde_writes() {
        /// The message as the engine's generic path writes a notification.
        #[derive(Serialize)]
        struct Message<'a> {
            jsonrpc: &'static str,
            method: &'static str,
            params: &'a ProgressWire<'a>,
        }
        // Not a finite number too (refused before it is written, but written the same).
        let not_finite = Progress {
            progress: f64::NAN,
            total: None,
            message: None,
        };
        // A long message, between short ones: each text is framed afresh in the thread's
        // buffer, which does not keep the long one's size.
        let long = Progress {
            progress: 3.0,
            total: None,
            message: Some("x".repeat(3 * SCRATCH_KEPT)),
        };
        let samples = samples();
        for progress in [&long]
            .into_iter()
            .chain(samples.iter())
            .chain([&not_finite])
        {
            for token in [
                ProgressToken::from("t"),
                ProgressToken::from("a \"quoted\"\n token"),
                ProgressToken::Number(-7),
            ] {
                let wire = ProgressWire {
                    token: &token,
                    progress,
                };
                let by_serde = serde_json::to_vec(&Message {
                    jsonrpc: "2.0",
                    method: "notifications/progress",
                    params: &wire,
                })
                .expect("serializes");
                let by_hand = wire.notification_text().expect("writes");
                assert_eq!(
                    String::from_utf8_lossy(&by_hand),
                    String::from_utf8_lossy(&by_serde)
                );
                let in_scratch = with_scratch(|out| {
                    wire.frame_into(out).expect("writes");
                    out.clone()
                });
                assert_eq!(in_scratch, by_serde);
                let kept = scratch_capacity();
                assert!(
                    kept <= SCRATCH_KEPT,
                    "the framing buffer keeps {kept} bytes"
                );
            }
        }
    }

    #[test]
    fn whole_numbers_are_written_as_integers_and_fractions_as_floats() {
        let token = ProgressToken::from("t");
        let wire = |progress: f64, total: Option<f64>| {
            serde_json::to_string(&ProgressWire {
                token: &token,
                progress: &Progress {
                    progress,
                    total,
                    message: None,
                },
            })
            .expect("serializes")
        };
        assert_eq!(
            wire(3.0, Some(10.0)),
            r#"{"progressToken":"t","progress":3,"total":10}"#
        );
        assert_eq!(wire(0.25, None), r#"{"progressToken":"t","progress":0.25}"#);
        // Beyond 2^53 an f64 is not an exact integer: written as a float.
        assert_eq!(
            wire(1e300, None),
            r#"{"progressToken":"t","progress":1e+300}"#
        );
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
