//! Where grants are kept between requests and between runs: the [`TokenStore`] seam, in
//! memory ([`MemoryStore`], the default) or in a file only the user can read ([`FileStore`]).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

pub use super::error::StoreError;
use super::token::Grant;

/// The most grants a store holds (one per MCP endpoint).
pub const MAX_GRANTS: usize = 1024;

/// The largest token file read.
const MAX_FILE: u64 = 4 * 1024 * 1024;

/// The longest a save or a removal waits for another process holding the token file's lock,
/// unless [`FileStore::lock_wait`] says otherwise.
pub const LOCK_WAIT: Duration = Duration::from_secs(10);

/// How often a save waiting for the lock tries again.
const LOCK_RETRY: Duration = Duration::from_millis(5);

/// Keeps one [`Grant`] per key (the MCP endpoint's URL). A save must be durable when it
/// returns `Ok`: a rotated refresh token is saved before the token it came with is used,
/// and the old one no longer works.
pub trait TokenStore: Send + Sync + 'static {
    /// The grant kept under `key`.
    ///
    /// # Errors
    /// The store cannot be read.
    fn load(&self, key: &str) -> Result<Option<Grant>, StoreError>;

    /// Keeps `grant` under `key`, replacing any before it.
    ///
    /// # Errors
    /// The grant could not be kept; the caller must not rely on it surviving.
    fn save(&self, key: &str, grant: &Grant) -> Result<(), StoreError>;

    /// Forgets the grant under `key`; `true` when there was one.
    ///
    /// # Errors
    /// The store cannot be written.
    fn remove(&self, key: &str) -> Result<bool, StoreError>;

    /// Every key with a grant.
    ///
    /// # Errors
    /// The store cannot be read.
    fn keys(&self) -> Result<Vec<String>, StoreError>;
}

/// Grants in this process's memory, lost when it exits (the default).
#[derive(Debug, Default)]
pub struct MemoryStore {
    grants: Mutex<BTreeMap<String, Grant>>,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn grants(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Grant>> {
        self.grants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TokenStore for MemoryStore {
    fn load(&self, key: &str) -> Result<Option<Grant>, StoreError> {
        Ok(self.grants().get(key).cloned())
    }

    fn save(&self, key: &str, grant: &Grant) -> Result<(), StoreError> {
        insert(&mut self.grants(), key, grant)
    }

    fn remove(&self, key: &str) -> Result<bool, StoreError> {
        Ok(self.grants().remove(key).is_some())
    }

    fn keys(&self) -> Result<Vec<String>, StoreError> {
        Ok(self.grants().keys().cloned().collect())
    }
}

fn insert(
    grants: &mut BTreeMap<String, Grant>,
    key: &str,
    grant: &Grant,
) -> Result<(), StoreError> {
    if grants.len() >= MAX_GRANTS && !grants.contains_key(key) {
        return Err(StoreError::Full);
    }
    grants.insert(key.to_owned(), grant.clone());
    Ok(())
}

/// Grants in one JSON file that only the user can read (mode 0600, in a 0700 directory on
/// Unix), rewritten whole through a temporary file and a rename, so a crash mid-write leaves
/// the old file, never half of one.
///
/// Writers take turns, in one process and across processes: a save or a removal holds an
/// exclusive lock on `<file>.lock` beside it (an OS file lock, released when the writer ends,
/// even by a crash) from reading the file to renaming the new one over it. So two `tidewire`
/// runs refreshing grants for different servers at once both keep what they saved; without the
/// lock the later rewrite would drop the earlier one's rotated refresh token. A writer waits at
/// most [`LOCK_WAIT`] (or [`lock_wait`](Self::lock_wait)) for the lock, then fails with
/// [`StoreError::Busy`]. Reads take no lock:
/// the rename makes every file they see whole.
#[derive(Debug)]
pub struct FileStore {
    path: PathBuf,
    turn: Mutex<()>,
    lock_wait: Duration,
    /// The directory is tidewire's own (the config directory's `tidewire/`): its mode is made
    /// 0700 even when it existed before. A directory the user named is left as it is.
    own_dir: bool,
}

#[derive(Serialize, Deserialize)]
struct File {
    version: u32,
    grants: BTreeMap<String, Grant>,
}

impl FileStore {
    /// A store in the file at `path` (created at the first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            turn: Mutex::new(()),
            lock_wait: LOCK_WAIT,
            own_dir: false,
        }
    }

    /// How long a save or a removal waits for another process holding the file's lock
    /// ([`LOCK_WAIT`] unless set).
    #[must_use]
    pub fn lock_wait(mut self, wait: Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    /// `tidewire/tokens.json` in the user's config directory: `$XDG_CONFIG_HOME`, else
    /// `~/.config` (`%APPDATA%` on Windows).
    ///
    /// # Errors
    /// [`StoreError::NoConfigDir`] when none of those is set.
    pub fn in_config_dir() -> Result<Self, StoreError> {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let base = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| var("HOME").map(|h| Path::new(&h).join(".config")))
            .or_else(|| var("APPDATA").map(PathBuf::from))
            .ok_or(StoreError::NoConfigDir)?;
        let mut store = Self::new(base.join("tidewire").join("tokens.json"));
        store.own_dir = true;
        Ok(store)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn read(&self) -> Result<BTreeMap<String, Grant>, StoreError> {
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => return Err(self.io(e)),
        };
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(file, MAX_FILE + 1), &mut bytes)
            .map_err(|e| self.io(e))?;
        let corrupt = |reason: String| StoreError::Corrupt {
            path: self.path.clone(),
            reason,
        };
        if bytes.len() as u64 > MAX_FILE {
            return Err(corrupt(format!("longer than {MAX_FILE} bytes")));
        }
        let file: File = serde_json::from_slice(&bytes).map_err(|e| corrupt(e.to_string()))?;
        if file.version != 1 {
            return Err(corrupt(format!("version {}", file.version)));
        }
        Ok(file.grants)
    }

    /// Replaces the file with `grants`: a private temporary file beside it, flushed to disk,
    /// then renamed over it.
    fn write(&self, grants: BTreeMap<String, Grant>) -> Result<(), StoreError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        private_dir(dir, self.own_dir).map_err(|e| self.io(e))?;
        let body = serde_json::to_vec_pretty(&File { version: 1, grants })
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        let mut name = self.path.file_name().unwrap_or_default().to_owned();
        name.push(format!(".{}.tmp", std::process::id()));
        let temporary = dir.join(name);
        let written = (|| {
            // A temporary file left by a crashed run of this process id goes; the new one is
            // created, never opened: a symbolic link planted at its name is not followed.
            let _ = std::fs::remove_file(&temporary);
            let mut file = private_file(&temporary, Open::CreateNew)?;
            file.write_all(&body)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &self.path)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
        }
        written.map_err(|e| self.io(e))
    }

    fn take_turn(&self) -> std::sync::MutexGuard<'_, ()> {
        self.turn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// This process's turn to rewrite the file, and then the lock other processes respect:
    /// held until both are dropped.
    fn take_write_turn(
        &self,
    ) -> Result<(std::sync::MutexGuard<'_, ()>, std::fs::File), StoreError> {
        let turn = self.take_turn();
        let dir = self.path.parent().unwrap_or(Path::new("."));
        private_dir(dir, self.own_dir).map_err(|e| self.io(e))?;
        let mut name = self.path.file_name().unwrap_or_default().to_owned();
        name.push(".lock");
        let path = dir.join(name);
        let locked = |source| StoreError::Io {
            path: path.clone(),
            source,
        };
        let file = private_file(&path, Open::Existing).map_err(locked)?;
        let deadline = Instant::now() + self.lock_wait;
        loop {
            match file.try_lock() {
                Ok(()) => return Ok((turn, file)),
                Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(LOCK_RETRY);
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(StoreError::Busy {
                        path,
                        waited: self.lock_wait,
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(locked(e)),
            }
        }
    }
}

impl TokenStore for FileStore {
    fn load(&self, key: &str) -> Result<Option<Grant>, StoreError> {
        let _turn = self.take_turn();
        Ok(self.read()?.remove(key))
    }

    fn save(&self, key: &str, grant: &Grant) -> Result<(), StoreError> {
        let _turn = self.take_write_turn()?;
        let mut grants = self.read()?;
        insert(&mut grants, key, grant)?;
        self.write(grants)
    }

    fn remove(&self, key: &str) -> Result<bool, StoreError> {
        let _turn = self.take_write_turn()?;
        let mut grants = self.read()?;
        if grants.remove(key).is_none() {
            return Ok(false);
        }
        self.write(grants).map(|()| true)
    }

    fn keys(&self) -> Result<Vec<String>, StoreError> {
        let _turn = self.take_turn();
        Ok(self.read()?.into_keys().collect())
    }
}

/// Creates `dir` (0700 on Unix) if it is not there; when `own`, an existing one's mode is made
/// 0700 too.
#[cfg(unix)]
fn private_dir(dir: &Path, own: bool) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    if own {
        let mode = std::fs::metadata(dir)?.permissions().mode();
        if mode & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

#[cfg(not(unix))]
fn private_dir(dir: &Path, _own: bool) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// How [`private_file`] opens its file.
#[derive(Clone, Copy)]
enum Open {
    /// Created anew, failing if anything (a file, a symbolic link) is at the path.
    CreateNew,
    /// Created if missing, else opened as it is (the lock file), but never through a
    /// symbolic link: a link planted at the path would have this process create or lock a
    /// file of the planter's choosing.
    Existing,
}

/// Opens `path` for writing, created readable by the user alone on Unix.
fn private_file(path: &Path, how: Open) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    match how {
        Open::CreateNew => options.create_new(true),
        Open::Existing => options.create(true).truncate(false),
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::super::registration::{AuthMethod, Credentials};
    use super::super::token::Token;
    use super::*;

    fn grant(access: &str) -> Grant {
        Grant {
            issuer: "http://as.test".into(),
            token_endpoint: "http://as.test/token".into(),
            client: Credentials {
                client_id: "c".into(),
                client_secret: Some("s".into()),
                method: AuthMethod::SecretBasic,
            },
            resource: Some("http://mcp.test/mcp".into()),
            token: Token {
                access_token: access.into(),
                token_type: "Bearer".into(),
                expires_at: None,
                refresh_token: Some("r".into()),
                scope: None,
            },
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tidewire-store-{name}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("sub").join("tokens.json")
    }

    /// Issue 26, item 5: the temporary file was opened, not created (a planted symbolic link
    /// was followed), and tidewire's own directory kept a mode it found.
    #[cfg(unix)]
    #[test]
    fn a_planted_link_is_not_followed_and_the_own_directory_is_made_private() {
        use std::os::unix::fs::PermissionsExt as _;
        let path = scratch("link");
        let dir = path.parent().expect("dir").to_owned();
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let victim = dir.parent().expect("above").join("victim");
        std::fs::write(&victim, "untouched").expect("victim");
        let temporary = dir.join(format!("tokens.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &temporary).expect("link");

        let mut store = FileStore::new(&path);
        store.own_dir = true;
        store
            .save("http://mcp.test/mcp", &grant("a1"))
            .expect("save");
        assert_eq!(
            std::fs::read_to_string(&victim).expect("victim"),
            "untouched"
        );
        let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700, "tidewire's own directory made private");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(
            FileStore::new(&path)
                .load("http://mcp.test/mcp")
                .expect("load"),
            Some(grant("a1"))
        );

        // A directory the user named keeps its mode (it may be shared, like /tmp).
        let named = scratch("named");
        let named_dir = named.parent().expect("dir").to_owned();
        std::fs::create_dir_all(&named_dir).expect("dir");
        std::fs::set_permissions(&named_dir, std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        FileStore::new(&named)
            .save("http://mcp.test/mcp", &grant("b1"))
            .expect("save");
        assert_eq!(mode(&named_dir), 0o755);
    }

    /// Issue 26, item 5: the lock beside the token file was opened through whatever stood at
    /// its path, so a planted link had the CLI create (or lock) a file of the planter's choosing.
    #[cfg(unix)]
    #[test]
    fn a_link_planted_as_the_lock_is_refused_and_creates_nothing() {
        let path = scratch("lock-link");
        let dir = path.parent().expect("dir").to_owned();
        std::fs::create_dir_all(&dir).expect("dir");
        let target = dir
            .parent()
            .expect("above")
            .join(format!("lock-target-{}", std::process::id()));
        let _ = std::fs::remove_file(&target);
        let mut lock = path.as_os_str().to_owned();
        lock.push(".lock");
        std::os::unix::fs::symlink(&target, &lock).expect("link");
        let saved = FileStore::new(&path).save("http://mcp.test/mcp", &grant("a1"));
        assert!(
            saved.is_err(),
            "a save through a planted lock link is refused"
        );
        assert!(!target.exists(), "nothing created where the link points");
    }

    #[test]
    fn a_file_store_keeps_grants_across_instances_privately_and_forgets_on_request() {
        let path = scratch("keep");
        let store = FileStore::new(&path);
        assert_eq!(store.load("http://mcp.test/mcp").expect("empty"), None);
        store
            .save("http://mcp.test/mcp", &grant("a1"))
            .expect("save");
        store
            .save("http://other.test/mcp", &grant("b1"))
            .expect("save");
        let again = FileStore::new(&path);
        assert_eq!(
            again.load("http://mcp.test/mcp").expect("load"),
            Some(grant("a1"))
        );
        assert_eq!(again.keys().expect("keys").len(), 2);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = |p: &Path| std::fs::metadata(p).expect("meta").permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().expect("dir")), 0o700);
        }
        assert!(again.remove("http://mcp.test/mcp").expect("remove"));
        assert!(!again.remove("http://mcp.test/mcp").expect("gone"));
        assert_eq!(store.load("http://mcp.test/mcp").expect("load"), None);
        let mut left: Vec<String> = std::fs::read_dir(path.parent().expect("dir"))
            .expect("dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["tokens.json", "tokens.json.lock"],
            "no temporary file left behind"
        );
    }

    /// Stores opened on one file apart (as two processes do: each its own open of the lock
    /// file, so only the OS lock keeps them apart) saving at once keep every grant.
    #[test]
    fn writers_on_one_file_take_turns_and_lose_nothing() {
        const WRITERS: usize = 6;
        const EACH: usize = 20;
        let path = scratch("writers");
        let threads: Vec<_> = (0..WRITERS)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let store = FileStore::new(path);
                    for i in 0..EACH {
                        store
                            .save(&format!("http://{w}.test/{i}"), &grant("a"))
                            .expect("save");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("a writer");
        }
        assert_eq!(
            FileStore::new(&path).keys().expect("keys").len(),
            WRITERS * EACH,
            "no save was overwritten by another's"
        );
    }

    #[test]
    fn a_writer_waits_for_the_lock_a_while_then_says_the_file_is_busy() {
        const WAIT: Duration = Duration::from_millis(50);
        let path = scratch("busy");
        let store = FileStore::new(&path).lock_wait(WAIT);
        store.save("k", &grant("a")).expect("save");
        let mut lock_path = path.into_os_string();
        lock_path.push(".lock");
        let holder = std::fs::File::open(&lock_path).expect("the lock file");
        holder.lock().expect("held by another");
        let started = Instant::now();
        let refused = store.save("k", &grant("b"));
        assert!(
            matches!(&refused, Err(StoreError::Busy { waited, .. }) if *waited == WAIT),
            "{refused:?}"
        );
        assert!(started.elapsed() >= WAIT, "it waited first");
        assert_eq!(
            store.load("k").expect("reads take no lock"),
            Some(grant("a"))
        );
        drop(holder);
        store
            .save("k", &grant("b"))
            .expect("the lock is free again");
    }

    #[test]
    fn a_damaged_file_is_an_error_and_is_not_overwritten() {
        let path = scratch("damaged");
        std::fs::create_dir_all(path.parent().expect("dir")).expect("dir");
        std::fs::write(&path, b"{not json").expect("write");
        let store = FileStore::new(&path);
        assert!(matches!(store.load("k"), Err(StoreError::Corrupt { .. })));
        assert!(matches!(
            store.save("k", &grant("a")),
            Err(StoreError::Corrupt { .. })
        ));
        assert_eq!(std::fs::read(&path).expect("read"), b"{not json");
    }

    #[test]
    fn a_store_is_bounded() {
        let store = MemoryStore::new();
        for i in 0..MAX_GRANTS {
            store.save(&i.to_string(), &grant("a")).expect("room");
        }
        assert!(matches!(
            store.save("one more", &grant("a")),
            Err(StoreError::Full)
        ));
        store
            .save("0", &grant("b"))
            .expect("a replacement needs no room");
    }
}
