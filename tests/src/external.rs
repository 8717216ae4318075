//! Finding the outside programs some tests need (the Python SDK peers, the official schemas).
//!
//! Each is found through an environment variable. When it is unset the test prints why it skips
//! and passes — unless `TIDEWIRE_REQUIRE_EXTERNAL=1`, which `.ci/run` sets: then it fails.

use std::io::Write as _;
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
/// The reason goes to the process's real stderr, past the test harness's capture, so
/// `cargo test` shows every skip as it happens (`SKIPPED test_name: reason`) instead of a test
/// that passed in no time.
///
/// # Panics
/// When `TIDEWIRE_REQUIRE_EXTERNAL=1`.
pub fn skip(reason: &str) {
    assert!(
        !required(),
        "required by TIDEWIRE_REQUIRE_EXTERNAL=1: {reason}"
    );
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("a test");
    // `eprintln!` would be captured (and shown only for a failing test); a write to the stderr
    // handle is not.
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: {reason}");
}

fn path_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Debian's `prometheus` program named by `TIDEWIRE_PROMETHEUS`, or `None` after printing why
/// the test skips.
///
/// # Panics
/// When it is required and missing.
pub fn prometheus() -> Option<PathBuf> {
    let Some(program) = path_var("TIDEWIRE_PROMETHEUS") else {
        skip("TIDEWIRE_PROMETHEUS is not set (see .ci/run)");
        return None;
    };
    if !program.exists() {
        skip(&format!("no Prometheus at {}", program.display()));
        return None;
    }
    Some(program)
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

/// The Python peer server on a free loopback port, killed when dropped.
#[derive(Debug)]
pub struct PythonPeerServer {
    child: tokio::process::Child,
    /// The port it listens on.
    pub port: u16,
}

impl PythonPeerServer {
    /// Starts `peer_server.py TRANSPORT --port P` (`sse`, `streamable-http` or `websocket`) and
    /// waits, within 30 s, until the port accepts connections.
    ///
    /// # Panics
    /// When the server cannot start or does not listen in time (a test failure).
    pub async fn start(peers: &PythonPeers, transport: &str) -> Self {
        let port = {
            let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
            probe.local_addr().expect("local addr").port()
        };
        let mut child = tokio::process::Command::new(&peers.python)
            .arg(peers.server_script())
            .args([transport, "--port", &port.to_string()])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start the Python peer server");
        let limit = std::time::Duration::from_secs(30);
        let started = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the Python peer server ({transport}) exited at startup: {status}");
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                break;
            }
            assert!(
                started.elapsed() < limit,
                "the Python peer server ({transport}) did not listen on port {port} within {limit:?}"
            );
            // Nothing announces readiness but the port itself; poll it.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        Self { child, port }
    }

    /// `http://127.0.0.1:PORT` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for PythonPeerServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// The Python interpreter with the official SDK (`TIDEWIRE_PY_PYTHON`), or `None` after
/// printing why the test skips.
///
/// # Panics
/// When it is required and missing.
pub fn python_interpreter() -> Option<PathBuf> {
    match path_var("TIDEWIRE_PY_PYTHON") {
        Some(python) if python.exists() => Some(python),
        Some(python) => {
            skip(&format!(
                "TIDEWIRE_PY_PYTHON names no file: {}",
                python.display()
            ));
            None
        }
        None => {
            skip("TIDEWIRE_PY_PYTHON is not set (see .ci/run)");
            None
        }
    }
}

/// `tests/python/authorization_server.py`: an OAuth authorization server built on the official
/// Python SDK's auth routes (metadata, registration, PKCE, token, revocation), with opaque
/// tokens checked at its `/introspect` and test controls under `/control/`. Killed when
/// dropped.
#[derive(Debug)]
pub struct PythonAuthorizationServer {
    child: std::process::Child,
    /// Its issuer identifier, as the SDK writes it (`http://127.0.0.1:PORT/`).
    pub issuer: String,
}

impl PythonAuthorizationServer {
    /// Starts it with `python` and waits (30 s at most) for the issuer URL it prints once it
    /// listens.
    ///
    /// # Panics
    /// When it does not start in time (a test failure).
    pub fn start(python: &std::path::Path) -> Self {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/python/authorization_server.py"
        );
        let (child, issuer) = spawn_until(
            std::process::Command::new(python).arg(script),
            "the Python authorization server",
            |line| line.starts_with("http://"),
        );
        let issuer = issuer.trim().to_owned();
        assert!(issuer.starts_with("http://127.0.0.1:"), "{issuer:?}");
        Self { child, issuer }
    }

    /// `issuer` followed by `path` (no leading slash).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.issuer)
    }
}

impl Drop for PythonAuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `redis-server` of its own on a free loopback port (no persistence), killed when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: std::process::Child,
    /// Its port.
    pub port: u16,
}

impl RedisServer {
    /// The `redis-server` program named by `TIDEWIRE_REDIS_SERVER`, started; `None` after
    /// printing why the test skips when the variable is unset.
    ///
    /// # Panics
    /// When it is required and missing, or does not start within 30 s.
    pub fn start() -> Option<Self> {
        let Some(program) = path_var("TIDEWIRE_REDIS_SERVER") else {
            skip("TIDEWIRE_REDIS_SERVER is not set (see .ci/run)");
            return None;
        };
        Some(Self::start_on(&program, free_port()))
    }

    /// `program` on `port`, announcing itself ready before this returns.
    ///
    /// # Panics
    /// When it does not start within 30 s.
    pub fn start_on(program: &std::path::Path, port: u16) -> Self {
        let mut command = std::process::Command::new(program);
        command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--loglevel", "notice"]);
        let (child, _) = spawn_until(&mut command, "redis-server", |line| {
            line.contains("Ready to accept connections")
        });
        Self { child, port }
    }

    /// Its URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills it at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port free on 127.0.0.1 now.
///
/// # Panics
/// When no port can be bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts `command` (stdin closed, stderr inherited) and waits, 30 s at most, for the first
/// line of its stdout that `ready` accepts, reading the rest on so it never blocks writing.
///
/// # Panics
/// When it cannot start, or says nothing `ready` accepts in time.
fn spawn_until(
    command: &mut std::process::Command,
    what: &str,
    ready: impl Fn(&str) -> bool + Send + 'static,
) -> (std::process::Child, String) {
    use std::io::BufRead as _;

    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let stdout = child.stdout.take().expect("its stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tell = Some(tx);
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            if ready(&line)
                && let Some(tx) = tell.take()
            {
                let _ = tx.send(line);
            }
        }
    });
    let line = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .unwrap_or_else(|_| panic!("{what} is not ready within 30 s"));
    (child, line)
}
