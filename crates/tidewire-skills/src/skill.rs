//! One skill: its `SKILL.md`, its frontmatter, and its files with their digests.

use std::sync::Arc;

use serde_json::Value;
use tidewire_core::schema::{JsonObject, SkillEntry, SkillFileRef, SkillResources};

use crate::digest::digest;
use crate::error::SkillError;
use crate::frontmatter;
use crate::limits::{MAX_FILES_PER_SKILL, MAX_SKILL_BYTES};
use crate::mime;
use crate::uri::{self, SCHEME, SKILL_MD};

/// One file of a skill, as served: its URI, MIME type, bytes and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillFile {
    uri: String,
    name: String,
    mime_type: &'static str,
    bytes: Arc<[u8]>,
    digest: String,
}

impl SkillFile {
    fn new(uri: String, bytes: Vec<u8>) -> Self {
        let name = uri::last_segment(&uri).to_owned();
        let mime_type = mime::guess(&name, &bytes);
        let digest = digest(&bytes);
        Self {
            uri,
            name,
            mime_type,
            bytes: bytes.into(),
            digest,
        }
    }

    /// The file's URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The last segment of its URI.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its MIME type (from its name; `text/plain` or `application/octet-stream` otherwise).
    pub fn mime_type(&self) -> &'static str {
        self.mime_type
    }

    /// Its bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Its bytes as text, when they are UTF-8 (served as `text`; otherwise as a `blob`).
    pub fn text(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }

    /// `sha256:<hex>` of its bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Its length in bytes.
    pub fn size(&self) -> u64 {
        u64::try_from(self.bytes.len()).unwrap_or(u64::MAX)
    }

    /// The entry of this file in its skill's `resources`.
    pub fn file_ref(&self) -> SkillFileRef {
        SkillFileRef {
            uri: self.uri.clone(),
            digest: self.digest.clone(),
            size: self.size(),
        }
    }
}

/// A skill: a `SKILL.md` whose frontmatter names it, and the files beside it.
///
/// ```
/// use tidewire_skills::Skill;
///
/// let skill = Skill::new(
///     "acme/refunds",
///     "---\nname: refunds\ndescription: Process refund requests\n---\n\nCheck the date first.\n",
/// )?
/// .with_file("policy.md", "Refunds within 30 days.\n")?;
/// assert_eq!(skill.uri(), "skill://acme/refunds/SKILL.md");
/// assert_eq!(skill.entry().resources, tidewire_skills::SkillResources::Listed(
///     skill.files().iter().map(|f| f.file_ref()).collect(),
/// ));
/// # Ok::<(), tidewire_skills::SkillError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    uri: String,
    root: String,
    frontmatter: JsonObject,
    /// The `SKILL.md` first, then the others in the order they were added.
    files: Vec<SkillFile>,
    bytes: u64,
}

impl Skill {
    /// The skill at `skill://<path>/SKILL.md`, whose instructions are `skill_md`.
    ///
    /// `path` is one or more segments joined by `/` (`pdf-processing`, `acme/billing/refunds`);
    /// its last segment must be the frontmatter's `name`.
    ///
    /// # Errors
    /// [`SkillError::Frontmatter`] when `skill_md` has no frontmatter, it is not a mapping with
    /// a `name` following the naming rules ([`is_valid_name`](crate::is_valid_name)) and a
    /// non-empty `description`, or the name is not the path's last segment;
    /// [`SkillError::Path`] for a path that cannot be a URI path.
    pub fn new(path: &str, skill_md: impl Into<String>) -> Result<Self, SkillError> {
        let root = format!("{SCHEME}{}", uri::encode_path(path)?);
        let uri = format!("{root}/{SKILL_MD}");
        let text = skill_md.into();
        let refuse = |reason: String| SkillError::Frontmatter {
            uri: uri.clone(),
            reason,
        };
        let frontmatter = frontmatter::parse(&text).map_err(|e| refuse(e.to_string()))?;
        let name = match frontmatter.get("name") {
            Some(Value::String(name)) => name,
            _ => return Err(refuse("the frontmatter has no string `name`".to_owned())),
        };
        if !uri::is_valid_name(name) {
            return Err(refuse(format!(
                "the name {name:?} breaks the naming rules (1-64 of a-z, 0-9 and single \
                 hyphens, no hyphen at either end)"
            )));
        }
        if uri::last_segment(&root) != name {
            return Err(refuse(format!(
                "the name {name:?} must be the last segment of the skill's path {path:?}"
            )));
        }
        match frontmatter.get("description") {
            Some(Value::String(d)) if !d.trim().is_empty() => {}
            _ => {
                return Err(refuse(
                    "the frontmatter has no non-empty string `description`".to_owned(),
                ));
            }
        }
        let skill_md = SkillFile::new(uri.clone(), text.into_bytes());
        Ok(Self {
            bytes: skill_md.size(),
            uri,
            root,
            frontmatter,
            files: vec![skill_md],
        })
    }

    /// Adds the file at `relative` (segments joined by `/`, below the skill's folder) with
    /// `contents`; adding a path again replaces its contents.
    ///
    /// # Errors
    /// [`SkillError::Path`] for a path that cannot be a URI path, or names the `SKILL.md`;
    /// [`SkillError::TooLarge`] past [`MAX_FILES_PER_SKILL`] files or [`MAX_SKILL_BYTES`]
    /// bytes.
    pub fn with_file(
        mut self,
        relative: &str,
        contents: impl Into<Vec<u8>>,
    ) -> Result<Self, SkillError> {
        let encoded = uri::encode_path(relative)?;
        if encoded == SKILL_MD {
            return Err(SkillError::Path {
                path: relative.to_owned(),
                reason: "the SKILL.md is the skill's instructions, given to Skill::new".to_owned(),
            });
        }
        let file = SkillFile::new(format!("{}/{encoded}", self.root), contents.into());
        let replaced = self.files.iter().position(|f| f.uri == file.uri);
        let before = replaced.map_or(0, |i| self.files[i].size());
        let bytes = self.bytes - before + file.size();
        if bytes > MAX_SKILL_BYTES {
            return Err(SkillError::TooLarge {
                what: self.uri.clone(),
                limit: MAX_SKILL_BYTES,
                unit: "bytes",
            });
        }
        match replaced {
            Some(i) => self.files[i] = file,
            None if self.files.len() >= MAX_FILES_PER_SKILL => {
                return Err(SkillError::TooLarge {
                    what: self.uri.clone(),
                    limit: MAX_FILES_PER_SKILL as u64,
                    unit: "files",
                });
            }
            None => self.files.push(file),
        }
        self.bytes = bytes;
        Ok(self)
    }

    /// The URI of its `SKILL.md`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The URI of its folder (the `SKILL.md`'s without `/SKILL.md`).
    pub fn root(&self) -> &str {
        &self.root
    }

    /// Its name (the frontmatter's).
    pub fn name(&self) -> &str {
        self.frontmatter
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Its description (the frontmatter's).
    pub fn description(&self) -> &str {
        self.frontmatter
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// Its frontmatter, every field.
    pub fn frontmatter(&self) -> &JsonObject {
        &self.frontmatter
    }

    /// Its files, the `SKILL.md` first.
    pub fn files(&self) -> &[SkillFile] {
        &self.files
    }

    /// Its `SKILL.md`.
    pub fn skill_md(&self) -> &SkillFile {
        &self.files[0]
    }

    /// Its bytes, every file added up.
    pub fn size(&self) -> u64 {
        self.bytes
    }

    /// How `skills/list` and `skills/get` describe it.
    pub fn entry(&self) -> SkillEntry {
        SkillEntry {
            uri: self.uri.clone(),
            frontmatter: self.frontmatter.clone(),
            resources: SkillResources::Listed(self.files.iter().map(SkillFile::file_ref).collect()),
            meta: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MD: &str = "---\nname: refunds\ndescription: Refund requests\nlicense: MIT\n---\nBody\n";

    #[test]
    fn a_skill_knows_its_uris_and_lists_every_file_once() {
        let skill = Skill::new("acme/refunds", MD)
            .and_then(|s| s.with_file("ref/policy.md", "v1"))
            .and_then(|s| s.with_file("ref/policy.md", "v2"))
            .expect("skill");
        assert_eq!(skill.uri(), "skill://acme/refunds/SKILL.md");
        assert_eq!(skill.root(), "skill://acme/refunds");
        assert_eq!(skill.name(), "refunds");
        assert_eq!(skill.frontmatter()["license"], "MIT");
        let entry = skill.entry();
        let SkillResources::Listed(files) = &entry.resources else {
            panic!("listed");
        };
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].uri, skill.uri());
        assert_eq!(files[0].size, MD.len() as u64);
        assert_eq!(files[1].uri, "skill://acme/refunds/ref/policy.md");
        assert_eq!(files[1].digest, digest(b"v2"));
        assert_eq!(skill.size(), MD.len() as u64 + 2);
    }

    #[test]
    fn names_descriptions_and_paths_are_checked() {
        let cases = [
            ("other", MD, "last segment"),
            ("refunds", "no frontmatter", "start with"),
            ("refunds", "---\ndescription: d\n---\n", "`name`"),
            (
                "Refunds",
                "---\nname: Refunds\ndescription: d\n---\n",
                "naming rules",
            ),
            ("refunds", "---\nname: refunds\n---\n", "`description`"),
            (
                "refunds",
                "---\nname: refunds\ndescription: \" \"\n---\n",
                "`description`",
            ),
        ];
        for (path, md, why) in cases {
            let error = Skill::new(path, md).expect_err(path).to_string();
            assert!(error.contains(why), "{path}: {error}");
        }
        assert!(matches!(
            Skill::new("a//refunds", MD),
            Err(SkillError::Path { .. })
        ));
        let skill = Skill::new("refunds", MD).expect("skill");
        assert!(matches!(
            skill.clone().with_file("SKILL.md", "x"),
            Err(SkillError::Path { .. })
        ));
        assert!(matches!(
            skill.with_file("../x", "x"),
            Err(SkillError::Path { .. })
        ));
    }

    #[test]
    fn the_extension_limits_hold() {
        let mut skill = Skill::new("refunds", MD).expect("skill");
        for i in 1..MAX_FILES_PER_SKILL {
            skill = skill
                .with_file(&format!("f{i}"), "x")
                .expect("within the limit");
        }
        assert!(matches!(
            skill.with_file("one-more", "x"),
            Err(SkillError::TooLarge { unit: "files", .. })
        ));
        let big = vec![b'x'; usize::try_from(MAX_SKILL_BYTES).expect("fits")];
        assert!(matches!(
            Skill::new("refunds", MD).and_then(|s| s.with_file("big", big)),
            Err(SkillError::TooLarge { unit: "bytes", .. })
        ));
    }
}
