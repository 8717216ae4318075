//! What a benchmark server counts for `bench --counts`: its heap allocations and the tasks it
//! spawns, read through `GET /counts` (`{"allocations": N, "tasks": M}`, the running totals).
//! Every peer server (tidewire's, rmcp's, the ceiling) serves the same route with `--counts`,
//! so all three are counted the same way.
//!
//! - Allocations need the build feature `count-allocs`, which makes DHAT's allocator the global
//!   allocator of every binary of this crate (the `unsafe impl GlobalAlloc` is dhat's; nothing
//!   here needs `unsafe`). It takes a lock and a short backtrace on every allocation, so that
//!   build is for counting only. The count is `dhat::HeapStats::total_blocks`: every `alloc`
//!   and every `realloc` in the process, on every thread, while the profiler [`start`]ed runs.
//! - Tasks need `RUSTFLAGS="--cfg tokio_unstable"`: tokio's `spawned_tasks_count` of the
//!   runtime serving the route (`tokio::spawn` and the like, by any crate; not
//!   `spawn_blocking`).
//!
//! A counter the build lacks reads `null`.

/// DHAT's allocator, counting while a profiler runs.
#[cfg(feature = "count-allocs")]
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// Counting, while this lives (see [`start`]).
#[must_use = "allocations are counted only while this lives"]
pub struct Counting {
    #[cfg(feature = "count-allocs")]
    _profiler: Option<dhat::Profiler>,
}

impl std::fmt::Debug for Counting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counting").finish_non_exhaustive()
    }
}

/// Starts counting allocations when `counting` (DHAT's profiler in testing mode: no file, no
/// output; four frames per backtrace, its minimum). A `count-allocs` build that does not count
/// says on stderr that its timings mean nothing; a build without the feature does nothing.
pub fn start(program: &str, counting: bool) -> Counting {
    #[cfg(feature = "count-allocs")]
    {
        if !counting {
            eprintln!(
                "{program}: built with the count-allocs feature (dhat's allocator): \
                 its timings are not representative"
            );
        }
        Counting {
            _profiler: counting.then(|| {
                dhat::Profiler::builder()
                    .testing()
                    .trim_backtraces(Some(4))
                    .build()
            }),
        }
    }
    #[cfg(not(feature = "count-allocs"))]
    {
        let _ = (program, counting);
        Counting {}
    }
}

/// Heap blocks allocated (every `alloc` and `realloc`) since counting started.
#[cfg(feature = "count-allocs")]
fn allocations() -> Option<u64> {
    Some(dhat::HeapStats::get().total_blocks)
}

/// Not counted without `count-allocs`.
#[cfg(not(feature = "count-allocs"))]
fn allocations() -> Option<u64> {
    None
}

/// Tasks spawned on this runtime since it started (tokio's unstable metric).
#[cfg(all(tokio_unstable, target_has_atomic = "64"))]
fn tasks() -> Option<u64> {
    Some(
        tokio::runtime::Handle::current()
            .metrics()
            .spawned_tasks_count(),
    )
}

/// Not counted without `--cfg tokio_unstable`.
#[cfg(not(all(tokio_unstable, target_has_atomic = "64")))]
fn tasks() -> Option<u64> {
    None
}

/// `router` with `GET /counts`, the running totals as JSON.
pub fn route<S: Clone + Send + Sync + 'static>(router: axum::Router<S>) -> axum::Router<S> {
    router.route(
        "/counts",
        axum::routing::get(|| async {
            serde_json::json!({ "allocations": allocations(), "tasks": tasks() }).to_string()
        }),
    )
}
