//! Saving binary content (images, audio, binary resources) to files.
//!
//! A file is only ever created, never opened because it is there: `create_new`
//! (`O_CREAT | O_EXCL`) fails on any existing path, a symbolic link included, without following
//! it, and the next name is tried. Without `--save-dir`, the files go into a new directory under
//! the system's temporary directory, made on the first save with mode 0700 and a name no one
//! can guess (`tidewire-` and 16 hex digits from a hash keyed with the process's random hash
//! keys): no one else can plant a link where a file is about to be written, or read what was
//! saved.

use std::collections::hash_map::RandomState;
use std::fs::{DirBuilder, OpenOptions};
use std::hash::BuildHasher;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use crate::error::CliError;

/// How many file names are tried before giving up.
const NAME_ATTEMPTS: u32 = 1000;
/// How many random directory names are tried before giving up.
const DIR_ATTEMPTS: u32 = 16;
/// The longest stem kept in a file name.
const STEM_CHARS: usize = 64;

/// The directory files go into.
#[derive(Debug)]
enum Dir {
    /// `--save-dir DIR`: files are named `tidewire-STEM-N.EXT`, `N` counting up from 1 past the
    /// names that exist.
    Given(PathBuf),
    /// A private directory under `base`, made on the first save; files in it are named
    /// `STEM-N.EXT`.
    Private {
        base: PathBuf,
        made: Mutex<Option<PathBuf>>,
    },
}

/// Where binary content goes.
#[derive(Debug)]
pub(crate) struct Saver {
    dir: Dir,
    stem: String,
    /// The number the next file name tries first.
    next: AtomicU32,
}

impl Saver {
    /// Saves into `dir` when given, else into a new private directory under the system's
    /// temporary directory; files are named after `stem`.
    pub(crate) fn new(dir: Option<PathBuf>, stem: &str) -> Self {
        let dir = match dir {
            Some(dir) => Dir::Given(dir),
            None => Dir::Private {
                base: std::env::temp_dir(),
                made: Mutex::default(),
            },
        };
        Self::with(dir, stem)
    }

    fn with(dir: Dir, stem: &str) -> Self {
        let stem = stem
            .chars()
            .take(STEM_CHARS)
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        Self {
            dir,
            stem,
            next: AtomicU32::new(1),
        }
    }

    /// Decodes base64 `data` and writes it to a new file; returns its path.
    pub(crate) fn save(&self, data: &str, mime: Option<&str>) -> Result<PathBuf, CliError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|e| {
                CliError::new(format!(
                    "the server sent binary content that is not base64: {e}"
                ))
            })?;
        let ext = extension(mime.unwrap_or_default());
        let (dir, prefix) = match &self.dir {
            Dir::Given(dir) => (dir.clone(), "tidewire-"),
            Dir::Private { base, made } => (private_dir(base, made)?, ""),
        };
        for _ in 0..NAME_ATTEMPTS {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let path = dir.join(format!("{prefix}{}-{n}.{ext}", self.stem));
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    return match file.write_all(&bytes) {
                        Ok(()) => Ok(path),
                        Err(e) => {
                            let _ = std::fs::remove_file(&path);
                            Err(CliError::new(format!(
                                "cannot save {}: {e}",
                                path.display()
                            )))
                        }
                    };
                }
                // Taken, perhaps by a link planted there: never write through it, try the next.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
                Err(e) => {
                    return Err(CliError::new(format!(
                        "cannot save {}: {e}",
                        path.display()
                    )));
                }
            }
        }
        Err(CliError::new(format!(
            "cannot save in {}: {NAME_ATTEMPTS} names in a row are taken",
            dir.display()
        )))
    }
}

/// The private directory under `base`, made on the first call.
fn private_dir(base: &Path, made: &Mutex<Option<PathBuf>>) -> Result<PathBuf, CliError> {
    let mut made = made.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(dir) = made.as_ref() {
        return Ok(dir.clone());
    }
    let dir = make_private_dir(base)?;
    *made = Some(dir.clone());
    Ok(dir)
}

/// Makes a new directory under `base` with mode 0700 and an unpredictable name. `mkdir` fails on
/// any existing path, a link included, so a directory planted in advance is never used.
fn make_private_dir(base: &Path) -> Result<PathBuf, CliError> {
    // Keyed from the operating system's randomness when the process first asked for keys.
    let keys = RandomState::new();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    for attempt in 0..DIR_ATTEMPTS {
        let name = keys.hash_one((nanos, std::process::id(), attempt));
        let path = base.join(format!("tidewire-{name:016x}"));
        match DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(CliError::new(format!(
                    "cannot make a directory to save binary content in ({}): {e}; \
                     choose one with --save-dir DIR",
                    path.display()
                )));
            }
        }
    }
    Err(CliError::new(format!(
        "cannot make a directory to save binary content in under {}: {DIR_ATTEMPTS} names \
         were taken; choose one with --save-dir DIR",
        base.display()
    )))
}

/// A file extension for a MIME type.
fn extension(mime: &str) -> &'static str {
    let base = mime.split(';').next().unwrap_or_default().trim();
    match base {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "audio/flac" => "flac",
        "application/pdf" => "pdf",
        "application/json" => "json",
        _ if base.starts_with("text/") => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    /// A new empty directory for one test, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let path =
                std::env::temp_dir().join(format!("tidewire-save-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            let made = std::fs::create_dir_all(&path);
            assert!(made.is_ok(), "cannot make {}: {made:?}", path.display());
            Self(path)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// "hi" in base64.
    const HI: &str = "aGk=";

    #[test]
    fn extensions_follow_the_mime_type() {
        assert_eq!(extension("image/png"), "png");
        assert_eq!(extension("audio/wav"), "wav");
        assert_eq!(extension("text/plain; charset=utf-8"), "txt");
        assert_eq!(extension(""), "bin");
    }

    #[test]
    fn a_given_directory_keeps_what_is_there() {
        let scratch = Scratch::new("given");
        let victim = scratch.0.join("victim");
        std::fs::write(&victim, b"precious").expect("write the victim");
        let planted = scratch.0.join("tidewire-x-1.bin");
        std::os::unix::fs::symlink(&victim, &planted).expect("plant a link");
        let existing = scratch.0.join("tidewire-x-2.bin");
        std::fs::write(&existing, b"keep").expect("write a file");

        let saver = Saver::new(Some(scratch.0.clone()), "x");
        let saved = saver.save(HI, None);
        assert_eq!(saved, Ok(scratch.0.join("tidewire-x-3.bin")));
        let read = |path: PathBuf| std::fs::read(path).expect("read back");
        assert_eq!(read(victim), b"precious");
        assert_eq!(read(existing), b"keep");
        assert_eq!(read(scratch.0.join("tidewire-x-3.bin")), b"hi");
    }

    #[test]
    fn without_a_directory_files_go_into_a_new_private_one() {
        let scratch = Scratch::new("private");
        let private = || Dir::Private {
            base: scratch.0.clone(),
            made: Mutex::default(),
        };
        let saver = Saver::with(private(), "tool/name");
        let first = saver.save(HI, Some("image/png"));
        let second = saver.save(HI, Some("image/png"));
        let (Ok(first), Ok(second)) = (first, second) else {
            panic!("saving failed");
        };
        let dir = first.parent().expect("a directory").to_path_buf();
        assert_eq!(
            second.parent(),
            Some(dir.as_path()),
            "one directory per run"
        );
        assert_eq!(dir.parent(), Some(scratch.0.as_path()));
        assert_eq!(
            first.file_name(),
            Some(std::ffi::OsStr::new("tool_name-1.png"))
        );
        let name = dir.file_name().and_then(|n| n.to_str()).expect("a name");
        assert!(
            name.len() == "tidewire-".len() + 16 && name.starts_with("tidewire-"),
            "{name}"
        );
        let mode = std::fs::metadata(&dir).map(|m| m.permissions().mode() & 0o777);
        assert_eq!(mode.ok(), Some(0o700));

        // Another run gets another directory.
        let other = Saver::with(private(), "tool").save(HI, None);
        let other_dir = other.ok().and_then(|p| p.parent().map(Path::to_path_buf));
        assert!(other_dir.is_some_and(|d| d != dir));
    }
}
