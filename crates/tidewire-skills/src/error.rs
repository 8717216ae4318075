//! Why a skill could not be built.

/// A skill (or a set of them) that cannot be offered as it is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// The `SKILL.md` has no frontmatter, or frontmatter that is not what the extension asks.
    #[error("{uri}: {reason}")]
    Frontmatter {
        /// The `SKILL.md`'s URI.
        uri: String,
        /// What is wrong.
        reason: String,
    },
    /// A path (the skill's, or a file's within it) cannot be part of a `skill://` URI.
    #[error("invalid path {path:?}: {reason}")]
    Path {
        /// The path as given.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A limit of the extension (or of the set) was passed.
    #[error("{what}: more than {limit} {unit}")]
    TooLarge {
        /// What grew too large.
        what: String,
        /// The limit.
        limit: u64,
        /// What the limit counts.
        unit: &'static str,
    },
    /// Two skills claim the same URI (the same skill twice, or one file with two contents).
    #[error("{uri} is offered twice, with different contents")]
    Conflict {
        /// The URI.
        uri: String,
    },
    /// Reading a folder failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or folder.
        path: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}
