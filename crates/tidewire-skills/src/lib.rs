//! Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension) for tidewire.
//!
//! A skill is a folder of instructions: a `SKILL.md` that starts with YAML frontmatter (its
//! `name` and `description` at least), and the files beside it. A server offers skills at
//! `skill://<path>/SKILL.md`; a host lists them, and loads one only when it needs it, checking
//! every file it reads against the digest and size the listing gave.
//!
//! This crate holds what both sides share, with no I/O to a peer:
//! - [`Skill`] and [`SkillSet`]: skills built in code or read from a folder
//!   ([`SkillSet::from_dir`]), with each file's URI, MIME type, digest and size, the entries
//!   `skills/list` answers with, and the folders `resources/directory/read` lists;
//! - [`frontmatter`]: the YAML frontmatter of a `SKILL.md` as a JSON object (YAML 1.2 core
//!   scalars; no anchors, aliases or custom tags);
//! - [`digest`]: `sha256:<hex>` of a file's bytes;
//! - [`verify`]: what a host must check of what it read (size, digest, frontmatter).
//!
//! The server serves a `SkillSet` (`ServerBuilder::skills` in `tidewire-server`); the client
//! lists and loads skills (`Client::list_skills`, `Client::load_skill` in `tidewire-client`).
#![forbid(unsafe_code)]

mod digest;
mod error;
pub mod frontmatter;
mod limits;
mod mime;
mod set;
mod skill;
mod uri;
pub mod verify;

pub use digest::{digest, is_digest};
pub use error::SkillError;
pub use limits::{
    MAX_FILES_PER_SKILL, MAX_FRONTMATTER_BYTES, MAX_SKILL_BYTES, MAX_SKILLS, MAX_WALK_DEPTH,
};
pub use set::{DirectoryChild, SkillSet};
pub use skill::{Skill, SkillFile};
pub use tidewire_core::schema::{SKILLS_EXTENSION, SkillEntry, SkillFileRef, SkillResources};
pub use uri::is_valid_name;
