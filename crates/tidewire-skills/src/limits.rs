//! The bounds of skills, on both sides.

/// Files in one skill, its `SKILL.md` included (the extension's limit: servers should not
/// serve more, hosts must accept this many).
pub const MAX_FILES_PER_SKILL: usize = 512;

/// Bytes in one skill, every file added up (16 MiB, the extension's limit).
pub const MAX_SKILL_BYTES: u64 = 16 * 1024 * 1024;

/// Bytes of YAML in a `SKILL.md`'s frontmatter; a longer block is refused before parsing.
pub const MAX_FRONTMATTER_BYTES: usize = 64 * 1024;

/// Skills in one [`SkillSet`](crate::SkillSet).
pub const MAX_SKILLS: usize = 10_000;

/// Folder levels [`SkillSet::from_dir`](crate::SkillSet::from_dir) descends, below the root.
pub const MAX_WALK_DEPTH: usize = 16;
