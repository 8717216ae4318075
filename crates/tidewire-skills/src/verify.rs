//! What a host checks of what it read, against the entry `skills/list` or `skills/get` gave.
//!
//! Every file the entry lists must come back with its size and digest; a `SKILL.md` must also
//! carry the frontmatter the entry showed, field by field. Content that fails is not to be
//! used: the host may ask for the entry again (`skills/get`) and start over.

use serde_json::Value;
use tidewire_core::schema::{SkillEntry, SkillResources};

use crate::digest::digest;
use crate::frontmatter;

/// Why content read for a skill must not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The entry does not list the file, so nothing vouches for it.
    #[error("{uri} is not listed among the skill's files")]
    Unlisted {
        /// The file.
        uri: String,
    },
    /// The entry's files are `"dynamic"`: nothing can be checked but the frontmatter.
    #[error("the skill's files are dynamic, so {uri} cannot be checked")]
    Dynamic {
        /// The file.
        uri: String,
    },
    /// The bytes read are not as long as the entry says.
    #[error("{uri} is {got} bytes long, but the skill's entry says {expected}")]
    Size {
        /// The file.
        uri: String,
        /// The entry's size.
        expected: u64,
        /// The size read.
        got: u64,
    },
    /// The bytes read do not hash to the entry's digest.
    #[error("{uri} does not match its digest (the entry says {expected}, the bytes give {got})")]
    Digest {
        /// The file.
        uri: String,
        /// The entry's digest.
        expected: String,
        /// The digest of what was read.
        got: String,
    },
    /// The `SKILL.md`'s frontmatter cannot be read.
    #[error("the SKILL.md's frontmatter: {0}")]
    Frontmatter(String),
    /// The `SKILL.md`'s frontmatter differs from the entry's.
    #[error("the SKILL.md's frontmatter differs from the skill's entry in `{field}`")]
    FrontmatterMismatch {
        /// The first field that differs (in key order).
        field: String,
    },
}

/// Checks `bytes`, read from `uri`, against the size and digest `entry` lists for it.
///
/// # Errors
/// [`VerifyError::Unlisted`], [`VerifyError::Dynamic`], [`VerifyError::Size`] or
/// [`VerifyError::Digest`].
pub fn check_file(entry: &SkillEntry, uri: &str, bytes: &[u8]) -> Result<(), VerifyError> {
    if entry.resources == SkillResources::Dynamic {
        return Err(VerifyError::Dynamic {
            uri: uri.to_owned(),
        });
    }
    let listed = entry.file(uri).ok_or_else(|| VerifyError::Unlisted {
        uri: uri.to_owned(),
    })?;
    let got = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if got != listed.size {
        return Err(VerifyError::Size {
            uri: uri.to_owned(),
            expected: listed.size,
            got,
        });
    }
    let actual = digest(bytes);
    if actual != listed.digest {
        return Err(VerifyError::Digest {
            uri: uri.to_owned(),
            expected: listed.digest.clone(),
            got: actual,
        });
    }
    Ok(())
}

/// Checks the text of the entry's `SKILL.md`: its size and digest (unless the entry is
/// dynamic), then its frontmatter against the entry's, field by field (a field missing on one
/// side counts as `null`, as the extension's suite reads it).
///
/// # Errors
/// As [`check_file`]; [`VerifyError::Frontmatter`] or [`VerifyError::FrontmatterMismatch`].
pub fn check_skill_md(entry: &SkillEntry, text: &str) -> Result<(), VerifyError> {
    if entry.resources != SkillResources::Dynamic {
        check_file(entry, &entry.uri, text.as_bytes())?;
    }
    let parsed = frontmatter::parse(text).map_err(|e| VerifyError::Frontmatter(e.to_string()))?;
    let mut fields: Vec<&String> = parsed.keys().chain(entry.frontmatter.keys()).collect();
    fields.sort();
    fields.dedup();
    for field in fields {
        let ours = parsed.get(field).unwrap_or(&Value::Null);
        let theirs = entry.frontmatter.get(field).unwrap_or(&Value::Null);
        if !same(ours, theirs) {
            return Err(VerifyError::FrontmatterMismatch {
                field: field.clone(),
            });
        }
    }
    Ok(())
}

/// JSON equality where numbers compare by value (`1` and `1.0` are the same number).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x == y || x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Skill;

    const MD: &str = "---\nname: pdf\ndescription: PDFs\nversion: 1.0\n---\n\nBody.\n";

    fn entry() -> SkillEntry {
        Skill::new("pdf", MD)
            .and_then(|s| s.with_file("FORMS.md", "forms"))
            .expect("skill")
            .entry()
    }

    #[test]
    fn what_was_served_passes() {
        let entry = entry();
        assert_eq!(check_skill_md(&entry, MD), Ok(()));
        assert_eq!(check_file(&entry, "skill://pdf/FORMS.md", b"forms"), Ok(()));
    }

    #[test]
    fn size_digest_listing_and_frontmatter_are_each_caught() {
        let entry = entry();
        assert!(matches!(
            check_file(&entry, "skill://pdf/FORMS.md", b"forms!"),
            Err(VerifyError::Size {
                expected: 5,
                got: 6,
                ..
            })
        ));
        assert!(matches!(
            check_file(&entry, "skill://pdf/FORMS.md", b"FORMS"),
            Err(VerifyError::Digest { .. })
        ));
        assert!(matches!(
            check_file(&entry, "skill://pdf/other.md", b"x"),
            Err(VerifyError::Unlisted { .. })
        ));
        // A SKILL.md whose entry vouches for its bytes, but not for its frontmatter.
        let tampered = MD.replace("description: PDFs", "description: Leak");
        let mut vouched = entry.clone();
        let listed = Skill::new("pdf", tampered.clone()).expect("skill").entry();
        vouched.resources = listed.resources;
        assert_eq!(
            check_skill_md(&vouched, &tampered),
            Err(VerifyError::FrontmatterMismatch {
                field: "description".to_owned()
            })
        );
        let mut dynamic = entry;
        dynamic.resources = SkillResources::Dynamic;
        assert_eq!(check_skill_md(&dynamic, MD), Ok(()));
        assert!(matches!(
            check_file(&dynamic, "skill://pdf/FORMS.md", b"forms"),
            Err(VerifyError::Dynamic { .. })
        ));
    }

    #[test]
    fn numbers_compare_by_value_and_missing_fields_as_null() {
        assert!(same(&json!(1), &json!(1.0)));
        assert!(!same(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        let mut entry = entry();
        entry.frontmatter.insert("extra".to_owned(), Value::Null);
        assert_eq!(check_skill_md(&entry, MD), Ok(()));
        entry.frontmatter.insert("extra".to_owned(), json!("x"));
        assert!(check_skill_md(&entry, MD).is_err());
    }
}
