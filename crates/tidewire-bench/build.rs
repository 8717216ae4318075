//! Declares the `tokio_unstable` cfg: `bench-server` reads tokio's count of spawned tasks only
//! when built with `RUSTFLAGS="--cfg tokio_unstable"` (see docs/performance.md, "Allocations and
//! tasks per request").

fn main() {
    println!("cargo::rustc-check-cfg=cfg(tokio_unstable)");
    println!("cargo::rerun-if-changed=build.rs");
}
