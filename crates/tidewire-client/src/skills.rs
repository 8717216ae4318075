//! Skills (the `io.modelcontextprotocol/skills` extension), the host's side: list what a server
//! offers, and load a skill only when it is needed, checking everything read against its entry.
//!
//! Listing reads no file. [`Client::load_skill`] reads the `SKILL.md` and checks its size,
//! digest and frontmatter; [`LoadedSkill::read`] reads one of the files the entry lists, and
//! checks it the same way. Content that fails a check is never handed out: the caller gets a
//! [`SkillsError::Verify`] instead, and may ask for the entry again
//! ([`Client::get_skill`]) to start over.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tidewire_core::schema::{
    Cursor, GetSkill, GetSkillParams, ListSkills, ListSkillsResult, ResourceContents,
    SKILLS_EXTENSION, SkillEntry, SkillFileRef, SkillResources,
};
use tidewire_skills::verify::{self, VerifyError};
use tidewire_skills::{MAX_FILES_PER_SKILL, MAX_SKILL_BYTES, frontmatter, is_valid_name};

use crate::client::{Client, Page};
use crate::error::ClientError;

/// Why a skill could not be listed, loaded or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillsError {
    /// The server does not declare the skills extension, so its methods are not to be called.
    #[error("the server does not offer skills (no {SKILLS_EXTENSION} extension)")]
    NotOffered,
    /// The request failed.
    #[error(transparent)]
    Request(#[from] ClientError),
    /// The entry breaks the extension's rules, so nothing it says can be trusted.
    #[error("the skill entry {uri:?} is not valid: {reason}")]
    InvalidEntry {
        /// The entry's URI.
        uri: String,
        /// What is wrong.
        reason: String,
    },
    /// The entry's files are `"dynamic"`: nothing read could be checked, so it is not loaded.
    #[error("the skill {uri:?} has dynamic files, which cannot be verified; it is not loaded")]
    Dynamic {
        /// The entry's URI.
        uri: String,
    },
    /// What was read fails its check against the entry; it was not used.
    #[error("skill content refused: {0}")]
    Verify(#[from] VerifyError),
    /// The server answered the read with no contents for the file, or a blob that is not
    /// base64, or a `SKILL.md` that is not text.
    #[error("reading {uri:?}: {reason}")]
    Unreadable {
        /// The file.
        uri: String,
        /// What is wrong.
        reason: String,
    },
}

impl Page for ListSkillsResult {
    type Item = SkillEntry;
    fn into_page(self) -> (Vec<SkillEntry>, Option<Cursor>) {
        (self.skills, self.next_cursor)
    }
}

impl Client {
    /// Whether the server declares the skills extension.
    pub fn offers_skills(&self) -> bool {
        self.server_capabilities().has_extension(SKILLS_EXTENSION)
    }

    /// Every skill the server lists, following `nextCursor` (bounded like every `list_all_*`).
    /// Nothing is read: the entries say what each skill is and what its files must be.
    ///
    /// # Errors
    /// [`SkillsError::NotOffered`] when the server does not declare the extension (no request
    /// is sent); [`SkillsError::Request`] as any list.
    pub async fn list_skills(&self) -> Result<Vec<SkillEntry>, SkillsError> {
        if !self.offers_skills() {
            return Err(SkillsError::NotOffered);
        }
        Ok(self.list_all::<ListSkills>().await?)
    }

    /// The current entry of the skill whose `SKILL.md` is at `uri` (after a failed check, to
    /// start over with what the server serves now).
    ///
    /// # Errors
    /// As [`list_skills`](Self::list_skills); an unknown skill is a remote `-32602`.
    pub async fn get_skill(&self, uri: impl Into<String>) -> Result<SkillEntry, SkillsError> {
        if !self.offers_skills() {
            return Err(SkillsError::NotOffered);
        }
        let result = self.call::<GetSkill>(GetSkillParams::new(uri)).await?;
        Ok(result.skill)
    }

    /// Loads a skill: reads its `SKILL.md` and checks it against `entry` (size, digest, and the
    /// frontmatter field by field). Its other files are read on demand, with
    /// [`LoadedSkill::read`].
    ///
    /// # Errors
    /// [`SkillsError::InvalidEntry`] for an entry that breaks the extension's rules (a URI that
    /// is not a `SKILL.md`, a name that is not its folder's, files outside its folder, past the
    /// limits); [`SkillsError::Dynamic`] for an entry without digests;
    /// [`SkillsError::Verify`] when the `SKILL.md` fails its checks; [`SkillsError::Request`]
    /// or [`SkillsError::Unreadable`] when it cannot be read.
    pub async fn load_skill(&self, entry: &SkillEntry) -> Result<LoadedSkill, SkillsError> {
        check_entry(entry)?;
        let bytes = read_bytes(self, &entry.uri).await?;
        let text = String::from_utf8(bytes).map_err(|_| SkillsError::Unreadable {
            uri: entry.uri.clone(),
            reason: "the SKILL.md is not UTF-8 text".to_owned(),
        })?;
        verify::check_skill_md(entry, &text)?;
        let body_start = frontmatter::split(&text)
            .map(|split| text.len() - split.body.len())
            .unwrap_or(text.len());
        Ok(LoadedSkill {
            client: self.clone(),
            entry: entry.clone(),
            text,
            body_start,
        })
    }
}

/// A skill whose `SKILL.md` was read and checked.
#[derive(Debug, Clone)]
pub struct LoadedSkill {
    client: Client,
    entry: SkillEntry,
    text: String,
    body_start: usize,
}

impl LoadedSkill {
    /// The entry it was checked against.
    pub fn entry(&self) -> &SkillEntry {
        &self.entry
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.entry.name().unwrap_or_default()
    }

    /// Its description.
    pub fn description(&self) -> &str {
        self.entry.description().unwrap_or_default()
    }

    /// The whole `SKILL.md`, frontmatter included.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The instructions: the `SKILL.md` after its frontmatter.
    pub fn instructions(&self) -> &str {
        self.text.get(self.body_start..).unwrap_or_default()
    }

    /// The files the entry lists (the `SKILL.md` among them).
    pub fn files(&self) -> &[SkillFileRef] {
        match &self.entry.resources {
            SkillResources::Listed(files) => files,
            SkillResources::Dynamic => &[],
        }
    }

    /// Reads one of the skill's files, by its path in the skill's folder
    /// (`references/FORMS.md`) or its URI, and checks it against the entry.
    ///
    /// # Errors
    /// [`SkillsError::Verify`] for a file the entry does not list (nothing is requested) or
    /// one that fails its checks; [`SkillsError::Request`] or [`SkillsError::Unreadable`] when
    /// it cannot be read.
    pub async fn read(&self, path: &str) -> Result<Vec<u8>, SkillsError> {
        let uri = if path.contains("://") {
            path.to_owned()
        } else {
            format!("{}/{}", self.entry.root(), path.trim_start_matches('/'))
        };
        if self.entry.file(&uri).is_none() {
            return Err(VerifyError::Unlisted { uri }.into());
        }
        let bytes = read_bytes(&self.client, &uri).await?;
        verify::check_file(&self.entry, &uri, &bytes)?;
        Ok(bytes)
    }

    /// As [`read`](Self::read), for a text file.
    ///
    /// # Errors
    /// As [`read`](Self::read); [`SkillsError::Unreadable`] when the file is not UTF-8.
    pub async fn read_text(&self, path: &str) -> Result<String, SkillsError> {
        let bytes = self.read(path).await?;
        String::from_utf8(bytes).map_err(|_| SkillsError::Unreadable {
            uri: path.to_owned(),
            reason: "the file is not UTF-8 text".to_owned(),
        })
    }
}

/// What the extension asks of an entry before anything it names is read.
fn check_entry(entry: &SkillEntry) -> Result<(), SkillsError> {
    let invalid = |reason: String| SkillsError::InvalidEntry {
        uri: entry.uri.clone(),
        reason,
    };
    let root = entry
        .uri
        .strip_suffix("/SKILL.md")
        .filter(|root| root.contains("://") && !root.ends_with('/'))
        .ok_or_else(|| invalid("its URI is not a skill's SKILL.md".to_owned()))?;
    let name = entry
        .name()
        .ok_or_else(|| invalid("its frontmatter has no string name".to_owned()))?;
    if !is_valid_name(name) {
        return Err(invalid(format!(
            "the name {name:?} breaks the naming rules"
        )));
    }
    if root.rsplit('/').next() != Some(name) {
        return Err(invalid(format!(
            "the name {name:?} is not the last segment of its path"
        )));
    }
    let files = match &entry.resources {
        SkillResources::Listed(files) => files,
        SkillResources::Dynamic => {
            return Err(SkillsError::Dynamic {
                uri: entry.uri.clone(),
            });
        }
    };
    if files.len() > MAX_FILES_PER_SKILL {
        return Err(invalid(format!(
            "it lists more than {MAX_FILES_PER_SKILL} files"
        )));
    }
    let total = files.iter().fold(0u64, |sum, f| sum.saturating_add(f.size));
    if total > MAX_SKILL_BYTES {
        return Err(invalid(format!(
            "its files add up to more than {MAX_SKILL_BYTES} bytes"
        )));
    }
    let prefix = format!("{root}/");
    if let Some(outside) = files
        .iter()
        .find(|f| f.uri != entry.uri && !f.uri.starts_with(&prefix))
    {
        return Err(invalid(format!(
            "it lists {:?}, outside the skill's folder",
            outside.uri
        )));
    }
    if entry.file(&entry.uri).is_none() {
        return Err(invalid("it does not list its own SKILL.md".to_owned()));
    }
    Ok(())
}

/// The bytes of the resource at `uri`: its text's UTF-8 bytes, or its blob decoded.
async fn read_bytes(client: &Client, uri: &str) -> Result<Vec<u8>, SkillsError> {
    let result = client.read_resource(uri).await?;
    let unreadable = |reason: &str| SkillsError::Unreadable {
        uri: uri.to_owned(),
        reason: reason.to_owned(),
    };
    let part = result
        .contents
        .iter()
        .find(|c| content_uri(c) == uri)
        .or_else(|| result.contents.first())
        .ok_or_else(|| unreadable("the server returned no contents"))?;
    match part {
        ResourceContents::Text(text) => Ok(text.text.clone().into_bytes()),
        ResourceContents::Blob(blob) => STANDARD
            .decode(blob.blob.as_bytes())
            .map_err(|_| unreadable("its blob is not base64")),
    }
}

fn content_uri(contents: &ResourceContents) -> &str {
    match contents {
        ResourceContents::Text(t) => &t.uri,
        ResourceContents::Blob(b) => &b.uri,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn entry(value: serde_json::Value) -> SkillEntry {
        serde_json::from_value(value).expect("entry")
    }

    #[test]
    fn entries_that_break_the_rules_are_refused_before_any_read() {
        let good = json!({
            "uri": "skill://acme/pdf/SKILL.md",
            "frontmatter": {"name": "pdf", "description": "d"},
            "resources": [
                {"uri": "skill://acme/pdf/SKILL.md", "digest": "sha256:00", "size": 1},
                {"uri": "skill://acme/pdf/a/b.md", "digest": "sha256:00", "size": 1}
            ]
        });
        assert!(check_entry(&entry(good.clone())).is_ok());
        let mut cases = Vec::new();
        let mut bad = good.clone();
        bad["uri"] = json!("skill://acme/pdf/README.md");
        cases.push((bad, "not a skill's SKILL.md"));
        let mut bad = good.clone();
        bad["frontmatter"]["name"] = json!("other");
        cases.push((bad, "last segment"));
        let mut bad = good.clone();
        bad["resources"][1]["uri"] = json!("skill://acme/secrets/key.md");
        cases.push((bad, "outside"));
        let mut bad = good.clone();
        bad["resources"][1]["uri"] = json!("skill://acme/pdfx/b.md");
        cases.push((bad, "outside"));
        let mut bad = good.clone();
        bad["resources"][0]["uri"] = json!("skill://acme/pdf/c.md");
        cases.push((bad, "its own SKILL.md"));
        let mut bad = good.clone();
        bad["resources"][1]["size"] = json!(MAX_SKILL_BYTES);
        cases.push((bad, "add up"));
        for (value, why) in cases {
            let error = check_entry(&entry(value)).expect_err(why).to_string();
            assert!(error.contains(why), "{why}: {error}");
        }
        let mut dynamic = good;
        dynamic["resources"] = json!("dynamic");
        assert!(matches!(
            check_entry(&entry(dynamic)),
            Err(SkillsError::Dynamic { .. })
        ));
    }
}
