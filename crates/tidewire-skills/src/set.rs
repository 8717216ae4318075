//! The skills a server offers, with every file and folder they make up.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::error::SkillError;
use crate::limits::{MAX_FILES_PER_SKILL, MAX_SKILL_BYTES, MAX_SKILLS, MAX_WALK_DEPTH};
use crate::skill::{Skill, SkillFile};
use crate::uri::{self, SKILL_MD};

/// One child of a folder, as `resources/directory/read` lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectoryChild<'a> {
    /// A file.
    File(&'a SkillFile),
    /// A folder, by its URI.
    Folder(&'a str),
}

/// The skills of a server: built in code ([`with`](Self::with)) or read from a folder
/// ([`from_dir`](Self::from_dir)).
///
/// Every file of every skill is a resource at its `skill://` URI, and every folder above one
/// (from the URI's authority down) a directory. A file two skills share (a nested skill's,
/// listed by the skill around it too) must have the same contents in both.
#[derive(Debug, Clone, Default)]
pub struct SkillSet {
    skills: Vec<Skill>,
    /// Each file by URI: (skill, file) indexes of where it was first seen.
    files: HashMap<String, (usize, usize)>,
    /// Each folder's children, by name: a file's URI or a folder's.
    folders: BTreeMap<String, BTreeMap<String, Child>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Child {
    File,
    Folder,
}

impl SkillSet {
    /// A set with no skills.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `skill`.
    ///
    /// # Errors
    /// [`SkillError::Conflict`] when its `SKILL.md` is already offered, or one of its files is
    /// offered with other contents; [`SkillError::TooLarge`] past [`MAX_SKILLS`].
    pub fn with(mut self, skill: Skill) -> Result<Self, SkillError> {
        if self.skills.len() >= MAX_SKILLS {
            return Err(SkillError::TooLarge {
                what: "the skill set".to_owned(),
                limit: MAX_SKILLS as u64,
                unit: "skills",
            });
        }
        if self.skill(skill.uri()).is_some() {
            return Err(SkillError::Conflict {
                uri: skill.uri().to_owned(),
            });
        }
        for file in skill.files() {
            if let Some(known) = self.file(file.uri())
                && known.digest() != file.digest()
            {
                return Err(SkillError::Conflict {
                    uri: file.uri().to_owned(),
                });
            }
        }
        let index = self.skills.len();
        for (i, file) in skill.files().iter().enumerate() {
            self.files
                .entry(file.uri().to_owned())
                .or_insert((index, i));
            let mut child = (file.uri(), Child::File);
            for folder in uri::parents(file.uri())
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
            {
                self.folders
                    .entry(folder.to_owned())
                    .or_default()
                    .insert(child.0.to_owned(), child.1);
                child = (folder, Child::Folder);
            }
        }
        self.skills.push(skill);
        Ok(self)
    }

    /// Reads every skill under `root`: each folder holding a `SKILL.md` is a skill whose path
    /// is the folder's below `root` (`root/acme/refunds/SKILL.md` is
    /// `skill://acme/refunds/SKILL.md`), with every file under that folder.
    ///
    /// Names starting with `.` are skipped, and so are symbolic links (a skill's files stay
    /// inside its folder); folders deeper than [`MAX_WALK_DEPTH`] are not visited.
    ///
    /// # Errors
    /// [`SkillError::Io`] when a folder or file cannot be read; any error of [`Skill::new`],
    /// [`Skill::with_file`] or [`with`](Self::with) for what was found.
    pub fn from_dir(root: impl AsRef<Path>) -> Result<Self, SkillError> {
        let root = root.as_ref();
        let mut found = Vec::new();
        walk(root, root, 0, &mut found)?;
        if found.iter().any(|f| f.relative == SKILL_MD) {
            return Err(SkillError::Path {
                path: root.display().to_string(),
                reason: "it holds a SKILL.md itself: give the folder that holds the skill folders"
                    .to_owned(),
            });
        }
        // Each folder with a SKILL.md, and every file below it.
        let mut set = Self::new();
        let mut skill_dirs: Vec<&Found> = found.iter().filter(|f| f.is_skill_md()).collect();
        skill_dirs.sort_by(|a, b| a.relative.cmp(&b.relative));
        for skill_md in skill_dirs {
            let folder = skill_md.folder();
            let text = read_text(&skill_md.path)?;
            let mut skill = Skill::new(folder, text)?;
            let prefix = format!("{folder}/");
            let mut bytes = skill.size();
            for file in found.iter().filter(|f| f.relative.starts_with(&prefix)) {
                let relative = &file.relative[prefix.len()..];
                if relative == SKILL_MD {
                    continue;
                }
                if skill.files().len() >= MAX_FILES_PER_SKILL {
                    return Err(SkillError::TooLarge {
                        what: skill.uri().to_owned(),
                        limit: MAX_FILES_PER_SKILL as u64,
                        unit: "files",
                    });
                }
                // Checked before reading, so a huge file is never loaded.
                bytes = bytes.saturating_add(file.len);
                if bytes > MAX_SKILL_BYTES {
                    return Err(SkillError::TooLarge {
                        what: skill.uri().to_owned(),
                        limit: MAX_SKILL_BYTES,
                        unit: "bytes",
                    });
                }
                let contents =
                    std::fs::read(&file.path).map_err(|source| io(&file.path, source))?;
                skill = skill.with_file(relative, contents)?;
            }
            set = set.with(skill)?;
        }
        Ok(set)
    }

    /// The skills, in the order they were added (from a folder: by path).
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// Whether there are no skills.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The skill whose `SKILL.md` is at `uri`.
    pub fn skill(&self, uri: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.uri() == uri)
    }

    /// The file at `uri`, of any skill.
    pub fn file(&self, uri: &str) -> Option<&SkillFile> {
        let (skill, file) = *self.files.get(uri)?;
        self.skills.get(skill)?.files().get(file)
    }

    /// Every file once, skill by skill, each `SKILL.md` before the files beside it.
    pub fn files(&self) -> impl Iterator<Item = &SkillFile> {
        self.skills
            .iter()
            .enumerate()
            .flat_map(|(s, skill)| {
                skill
                    .files()
                    .iter()
                    .enumerate()
                    .map(move |(f, file)| (s, f, file))
            })
            .filter(|(s, f, file)| self.files.get(file.uri()) == Some(&(*s, *f)))
            .map(|(_, _, file)| file)
    }

    /// The children of the folder at `uri`, by name; `None` when no folder is there (a file's
    /// URI, an unknown one, or one with a trailing `/`).
    pub fn directory(&self, uri: &str) -> Option<Vec<DirectoryChild<'_>>> {
        let children = self.folders.get(uri)?;
        Some(
            children
                .iter()
                .filter_map(|(child, kind)| match kind {
                    Child::File => self.file(child).map(DirectoryChild::File),
                    Child::Folder => Some(DirectoryChild::Folder(child.as_str())),
                })
                .collect(),
        )
    }
}

/// A file found under the root.
struct Found {
    path: std::path::PathBuf,
    /// Its path below the root, with `/` between segments.
    relative: String,
    len: u64,
}

impl Found {
    fn is_skill_md(&self) -> bool {
        self.relative.ends_with(&format!("/{SKILL_MD}"))
    }

    /// The skill's folder below the root, for a `SKILL.md`.
    fn folder(&self) -> &str {
        self.relative
            .strip_suffix(&format!("/{SKILL_MD}"))
            .unwrap_or(&self.relative)
    }
}

fn walk(root: &Path, dir: &Path, depth: usize, found: &mut Vec<Found>) -> Result<(), SkillError> {
    if depth > MAX_WALK_DEPTH {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| io(dir, source))?;
    for entry in entries {
        let entry = entry.map_err(|source| io(dir, source))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            return Err(SkillError::Path {
                path: entry.path().display().to_string(),
                reason: "the name is not UTF-8".to_owned(),
            });
        };
        if name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = entry.metadata().map_err(|source| io(&path, source))?;
        if meta.is_dir() {
            walk(root, &path, depth + 1, found)?;
        } else if meta.is_file() {
            let relative = path
                .strip_prefix(root)
                .map_err(|_| SkillError::Path {
                    path: path.display().to_string(),
                    reason: "it is outside the root".to_owned(),
                })?
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/");
            found.push(Found {
                path,
                relative,
                len: meta.len(),
            });
        }
        // Symbolic links (entry.metadata does not follow them) and anything else: skipped.
    }
    Ok(())
}

fn read_text(path: &Path) -> Result<String, SkillError> {
    let len = std::fs::metadata(path)
        .map_err(|source| io(path, source))?
        .len();
    if len > MAX_SKILL_BYTES {
        return Err(SkillError::TooLarge {
            what: path.display().to_string(),
            limit: MAX_SKILL_BYTES,
            unit: "bytes",
        });
    }
    std::fs::read_to_string(path).map_err(|source| io(path, source))
}

fn io(path: &Path, source: std::io::Error) -> SkillError {
    SkillError::Io {
        path: path.display().to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(name: &str) -> String {
        format!("---\nname: {name}\ndescription: The {name} skill\n---\n\nBody.\n")
    }

    fn set() -> SkillSet {
        let pdf = Skill::new("pdf", md("pdf"))
            .and_then(|s| s.with_file("references/FORMS.md", "forms"))
            .expect("pdf");
        let refunds = Skill::new("acme/billing/refunds", md("refunds")).expect("refunds");
        SkillSet::new()
            .with(pdf)
            .and_then(|s| s.with(refunds))
            .expect("set")
    }

    fn names(children: Option<Vec<DirectoryChild<'_>>>) -> Vec<String> {
        children
            .expect("a folder")
            .iter()
            .map(|c| match c {
                DirectoryChild::File(f) => f.uri().to_owned(),
                DirectoryChild::Folder(uri) => format!("{uri}/"),
            })
            .collect()
    }

    #[test]
    fn folders_list_their_direct_children_and_files_are_found_by_uri() {
        let set = set();
        assert_eq!(
            names(set.directory("skill://pdf")),
            ["skill://pdf/SKILL.md", "skill://pdf/references/"]
        );
        assert_eq!(
            names(set.directory("skill://pdf/references")),
            ["skill://pdf/references/FORMS.md"]
        );
        assert_eq!(
            names(set.directory("skill://acme")),
            ["skill://acme/billing/"]
        );
        assert!(set.directory("skill://pdf/SKILL.md").is_none());
        assert!(set.directory("skill://pdf/").is_none());
        assert!(set.directory("skill://nothing").is_none());
        assert_eq!(
            set.file("skill://pdf/references/FORMS.md")
                .map(SkillFile::bytes),
            Some(&b"forms"[..])
        );
        assert!(set.skill("skill://pdf/references/FORMS.md").is_none());
        assert_eq!(set.files().count(), 3);
    }

    #[test]
    fn a_skill_offered_twice_or_a_file_with_two_contents_is_refused() {
        let again = Skill::new("pdf", md("pdf")).expect("pdf");
        assert!(matches!(
            set().with(again),
            Err(SkillError::Conflict { .. })
        ));
        // A nested skill whose SKILL.md the outer one lists with other contents.
        let outer = Skill::new("outer", md("outer"))
            .and_then(|s| s.with_file("inner/SKILL.md", "old"))
            .expect("outer");
        let inner = Skill::new("outer/inner", md("inner")).expect("inner");
        let set = SkillSet::new().with(outer).expect("outer");
        assert!(matches!(set.with(inner), Err(SkillError::Conflict { .. })));
    }

    #[test]
    fn a_folder_of_skills_is_read_with_nested_files_and_hidden_ones_skipped() {
        let root = std::env::temp_dir().join(format!("tidewire-skills-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let write = |relative: &str, text: &str| {
            let path = root.join(relative);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        };
        write("pdf/SKILL.md", &md("pdf"));
        write("pdf/references/FORMS.md", "forms");
        write("pdf/.secret", "hidden");
        write("acme/refunds/SKILL.md", &md("refunds"));
        write("notes.txt", "not in any skill");
        let set = SkillSet::from_dir(&root).expect("read");
        std::fs::remove_dir_all(&root).expect("clean up");
        let uris: Vec<&str> = set.skills().iter().map(Skill::uri).collect();
        assert_eq!(
            uris,
            ["skill://acme/refunds/SKILL.md", "skill://pdf/SKILL.md"]
        );
        let pdf = set.skill("skill://pdf/SKILL.md").expect("pdf");
        let files: Vec<&str> = pdf.files().iter().map(SkillFile::uri).collect();
        assert_eq!(
            files,
            ["skill://pdf/SKILL.md", "skill://pdf/references/FORMS.md"]
        );
    }
}
