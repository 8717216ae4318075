//! What the server tests share.

/// How long any one test step may take before the test fails instead of hanging.
pub const LIMIT: std::time::Duration = std::time::Duration::from_secs(10);
