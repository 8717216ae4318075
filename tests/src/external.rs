//! Finding the outside programs some tests need (the Python SDK peers, the official schemas).
//!
//! Each is found through an environment variable. When it is unset the test prints why it skips
//! and passes — unless `TIDEWIRE_REQUIRE_EXTERNAL=1`, which `.ci/run` sets: then it fails.

use std::path::PathBuf;

/// Where the Python SDK peers are.
#[derive(Debug, Clone)]
pub struct PythonPeers {
    /// The Python interpreter of the venv with the pinned SDK (`TIDEWIRE_PY_PYTHON`).
    pub python: PathBuf,
    /// The folder with `peer_server.py` and `peer_client.py` (`TIDEWIRE_PY_PEERS_DIR`).
    pub dir: PathBuf,
}

impl PythonPeers {
    /// The peer server script.
    pub fn server_script(&self) -> PathBuf {
        self.dir.join("peer_server.py")
    }

    /// The peer client script.
    pub fn client_script(&self) -> PathBuf {
        self.dir.join("peer_client.py")
    }
}

/// True when CI demands every outside program.
pub fn required() -> bool {
    std::env::var("TIDEWIRE_REQUIRE_EXTERNAL").is_ok_and(|v| v == "1")
}

/// Skips (or, in CI, fails) with a reason.
///
/// # Panics
/// When `TIDEWIRE_REQUIRE_EXTERNAL=1`.
pub fn skip(reason: &str) {
    assert!(
        !required(),
        "required by TIDEWIRE_REQUIRE_EXTERNAL=1: {reason}"
    );
    println!("skipping: {reason}");
}

fn path_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The Python peers, or `None` after printing why the test skips.
///
/// # Panics
/// When they are required and missing.
pub fn python_peers() -> Option<PythonPeers> {
    match (
        path_var("TIDEWIRE_PY_PYTHON"),
        path_var("TIDEWIRE_PY_PEERS_DIR"),
    ) {
        (Some(python), Some(dir)) => {
            let peers = PythonPeers { python, dir };
            if !peers.python.exists() || !peers.client_script().exists() {
                skip(&format!(
                    "the Python peers are not where the environment says: {peers:?}"
                ));
                return None;
            }
            Some(peers)
        }
        _ => {
            skip("TIDEWIRE_PY_PYTHON and TIDEWIRE_PY_PEERS_DIR are not set (see .ci/run)");
            None
        }
    }
}
