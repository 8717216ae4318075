//! The skills extension (SEP-2640, `io.modelcontextprotocol/skills`): a server offers folders
//! of instructions (a `SKILL.md` with YAML frontmatter, and the files beside it) that a host
//! loads when it needs them. `skills/list` and `skills/get` describe each skill with the digest
//! and size of every file, so the host can check what it reads; the files themselves are plain
//! resources, read with `resources/read`, and `resources/directory/read` lists a folder.
//!
//! These are the wire types only; building entries from files, and checking what was read
//! against them, is the `tidewire-skills` crate.

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use super::{Cursor, JsonObject, Meta, PaginatedParams, Resource};

/// The extension's identifier, under `capabilities.extensions` of a server that offers skills.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// The MIME type of a directory in `resources/directory/read`.
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";

/// One skill, as `skills/list` and `skills/get` describe it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillEntry {
    /// The URI of the skill's `SKILL.md` (`skill://<path>/SKILL.md`; the last segment of the
    /// path is the skill's name).
    pub uri: String,
    /// The YAML frontmatter of the `SKILL.md`, every field, as JSON (`name` and `description`
    /// always among them).
    pub frontmatter: JsonObject,
    /// Every file of the skill with its digest and size, or `"dynamic"` for generated content.
    pub resources: SkillResources,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SkillEntry {
    /// The skill's name (`frontmatter.name`), if it is a string.
    pub fn name(&self) -> Option<&str> {
        self.frontmatter.get("name").and_then(|v| v.as_str())
    }

    /// The skill's description (`frontmatter.description`), if it is a string.
    pub fn description(&self) -> Option<&str> {
        self.frontmatter.get("description").and_then(|v| v.as_str())
    }

    /// The listed file at `uri`, if the entry lists its files and that one among them.
    pub fn file(&self, uri: &str) -> Option<&SkillFileRef> {
        match &self.resources {
            SkillResources::Listed(files) => files.iter().find(|f| f.uri == uri),
            SkillResources::Dynamic => None,
        }
    }

    /// The URI of the skill's root folder: [`uri`](Self::uri) without `/SKILL.md`.
    pub fn root(&self) -> &str {
        self.uri.strip_suffix("/SKILL.md").unwrap_or(&self.uri)
    }
}

/// The files of a skill: each with its digest and size, or `"dynamic"`.
#[derive(Debug, Clone, PartialEq)]
pub enum SkillResources {
    /// Every file of the skill (its `SKILL.md` included), once each.
    Listed(Vec<SkillFileRef>),
    /// Generated content with no stable digest: a host cannot bind approval to it.
    Dynamic,
}

/// The wire spelling of [`SkillResources::Dynamic`].
const DYNAMIC: &str = "dynamic";

impl Serialize for SkillResources {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Listed(files) => files.serialize(serializer),
            Self::Dynamic => serializer.serialize_str(DYNAMIC),
        }
    }
}

impl<'de> Deserialize<'de> for SkillResources {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Listed(Vec<SkillFileRef>),
            Word(String),
        }
        match Wire::deserialize(deserializer)? {
            Wire::Listed(files) => Ok(Self::Listed(files)),
            Wire::Word(word) if word == DYNAMIC => Ok(Self::Dynamic),
            Wire::Word(_) => Err(de::Error::custom(
                "resources must be an array of files or the string \"dynamic\"",
            )),
        }
    }
}

/// One file of a skill: where it is, and what reading it must give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillFileRef {
    /// The file's URI, under the skill's root (or the `SKILL.md` itself).
    pub uri: String,
    /// `sha256:` and the 64 lowercase hex digits of the SHA-256 of the file's bytes.
    pub digest: String,
    /// The file's length in bytes.
    pub size: u64,
}

/// Result of `skills/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkillsResult {
    /// This page of skills (a skill is never split across pages).
    pub skills: Vec<SkillEntry>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know (on 2026-07-28: `resultType`, `ttlMs`, `cacheScope`).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Parameters of `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillParams {
    /// The URI of the skill's `SKILL.md`.
    pub uri: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl GetSkillParams {
    /// Asks for the skill whose `SKILL.md` is at `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            meta: None,
        }
    }
}

/// Result of `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillResult {
    /// The skill, as `skills/list` describes it.
    pub skill: SkillEntry,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Parameters of `resources/directory/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDirectoryParams {
    /// The directory's URI (no trailing slash).
    pub uri: String,
    /// Where to continue: the `nextCursor` of the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ReadDirectoryParams {
    /// The first page of the directory at `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            cursor: None,
            meta: None,
        }
    }
}

/// Result of `resources/directory/read`: the directory's direct children, folders among them
/// with the MIME type [`DIRECTORY_MIME_TYPE`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDirectoryResult {
    /// This page of children.
    pub resources: Vec<Resource>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl_has_meta!(
    SkillEntry,
    ListSkillsResult,
    GetSkillParams,
    GetSkillResult,
    ReadDirectoryParams,
    ReadDirectoryResult,
);

request_marker!(
    /// Lists the server's skills (skills extension; paginated).
    ListSkills,
    "skills/list",
    PaginatedParams,
    ListSkillsResult
);
request_marker!(
    /// Describes one skill by the URI of its `SKILL.md` (skills extension).
    GetSkill,
    "skills/get",
    GetSkillParams,
    GetSkillResult
);
request_marker!(
    /// Lists a directory's direct children (skills extension, with `directoryRead`).
    ReadDirectory,
    "resources/directory/read",
    ReadDirectoryParams,
    ReadDirectoryResult
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn resources_are_an_array_or_the_word_dynamic_and_nothing_else() {
        let listed: SkillResources = serde_json::from_value(
            json!([{"uri": "skill://a/SKILL.md", "digest": "sha256:00", "size": 3}]),
        )
        .expect("array");
        assert!(matches!(&listed, SkillResources::Listed(files) if files[0].size == 3));
        let dynamic: SkillResources = serde_json::from_value(json!("dynamic")).expect("dynamic");
        assert_eq!(dynamic, SkillResources::Dynamic);
        assert_eq!(
            serde_json::to_value(&dynamic).expect("JSON"),
            json!("dynamic")
        );
        assert!(serde_json::from_value::<SkillResources>(json!("static")).is_err());
        assert!(serde_json::from_value::<SkillResources>(json!({"uri": "x"})).is_err());
    }

    #[test]
    fn an_entry_reads_its_name_root_and_files() {
        let entry: SkillEntry = serde_json::from_value(json!({
            "uri": "skill://acme/pdf/SKILL.md",
            "frontmatter": {"name": "pdf", "description": "PDFs", "license": "MIT"},
            "resources": [{"uri": "skill://acme/pdf/SKILL.md", "digest": "sha256:ab", "size": 10}]
        }))
        .expect("entry");
        assert_eq!(entry.name(), Some("pdf"));
        assert_eq!(entry.description(), Some("PDFs"));
        assert_eq!(entry.root(), "skill://acme/pdf");
        assert_eq!(
            entry.file("skill://acme/pdf/SKILL.md").map(|f| f.size),
            Some(10)
        );
        assert!(entry.file("skill://acme/pdf/other.md").is_none());
    }
}
