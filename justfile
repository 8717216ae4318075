# Mirrors .ci/run (which also installs the outside programs the interop tests need).

# Everything CI checks, in CI's order (less its installs, the outside programs the tests then
# skip without, the conformance suites, the benchmarks and the soak: `just ci-full` runs those).
ci: fmt cycles timeouts clippy clippy-features doc test

# No module imports one that imports it back.
cycles:
    python3 .ci/module_cycles.py crates/*/src tests/src

# Every async test awaits under a time limit.
timeouts:
    python3 .ci/test_timeouts.py crates tests

# Formatting check.
fmt:
    cargo fmt --all -- --check

# Lints, warnings as errors.
clippy:
    cargo clippy --workspace --all-targets -- -D warnings

# The facade's features one by one: each half builds alone (a client-only build compiles no axum).
clippy-features:
    bash .ci/clippy-features

# API docs, warnings as errors.
doc:
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps

# The README's test command.
test:
    cargo test --workspace

# The full CI script, with the Python peers and the official schemas from ../shared.
ci-full:
    bash .ci/run

# The quick benchmark comparison (tidewire, rmcp and the raw-HTTP ceiling; see docs/performance.md).
bench:
    cargo build --release -p tidewire-bench && target/release/bench --quick

# The scale-out benchmark: replicas behind HAProxy, in memory and on Redis (needs redis-server and
# haproxy: TIDEWIRE_REDIS_SERVER, TIDEWIRE_HAPROXY; see docs/scale-out.md).
bench-scale:
    cargo build --release -p tidewire-bench && target/release/bench --scale-out --quick

# The fuzz targets (proptest) for a set time each: `just fuzz 60` runs every target for 60 s.
fuzz secs="30":
    TIDEWIRE_FUZZ_SECS={{secs}} cargo test --release -p tidewire-tests --test fuzz -- --nocapture --test-threads 1
