//! A fuzz harness for stable Rust, on proptest: a target is a strategy that builds
//! structure-aware inputs and a property that must hold for every one of them
//! (`tests/tests/fuzz.rs` holds the targets, one `#[test]` each).
//!
//! [`run`] hands a target to proptest's [`TestRunner`]. A panic inside the property is caught by
//! the runner, counted as a failure and shrunk like any other failure; the test then panics
//! with the target's name, the smallest failing input and the seed that replays it. Each target
//! prints one line to stdout (shown with `--nocapture`):
//! `fuzz <name>: <N> cases in <S> s, 0 failures`.
//!
//! ## The budget, from the environment
//! - `TIDEWIRE_FUZZ_SECS=S`: run each target for about `S` seconds, in batches of fresh runners
//!   with fresh random seeds, until the time is up (what `just fuzz S` does).
//! - `TIDEWIRE_FUZZ_CASES=N`: otherwise, `N` cases per target. When neither is set, each target
//!   runs [`DEFAULT_CASES`] cases divided by its divisor (see [`run_scaled`]): the short smoke
//!   that `cargo test --workspace` runs in CI.
//! - `TIDEWIRE_FUZZ_SEED=S`: one batch from the seed `S` (a `u64`, printed with every failure)
//!   to replay a failure; its size is `TIDEWIRE_FUZZ_CASES` (or the default), and
//!   `TIDEWIRE_FUZZ_SECS` is then ignored.
//!
//! ## Panics in server tasks
//! A server under test runs tasks that nobody awaits, where a panic fails no test by itself.
//! [`runtime`] names its threads after the target and a panic hook counts the panics on them;
//! a target compares [`worker_panics`] before and after each case.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::{Mutex, Once, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};

/// Cases per target when neither `TIDEWIRE_FUZZ_SECS` nor `TIDEWIRE_FUZZ_CASES` is set.
pub const DEFAULT_CASES: u32 = 64;

/// The most cases one runner (one seed) runs in a timed run.
const MAX_BATCH: u32 = 256;
/// The cases of the first batch of a timed run, which measures the time a case takes.
const FIRST_BATCH: u32 = 8;
/// How long shrinking one failure may take, in milliseconds.
const SHRINK_TIME_MS: u32 = 120_000;
/// The most bytes of a failing input's `Debug` text that a failure message shows.
const SHOW: usize = 16 * 1024;
/// The start of the names of the runtime threads whose panics are counted.
const THREAD_PREFIX: &str = "fuzz-";

/// The names of the counted threads on which a panic happened, one entry per panic.
static PANICS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static HOOK: Once = Once::new();

/// Runs `test` on inputs from `strategy` for the budget the environment sets, then prints the
/// target's line.
///
/// # Panics
/// When a case fails (with the smallest failing input and the seed that replays it), or when an
/// environment variable is not a whole number.
pub fn run<S: Strategy>(
    name: &str,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    run_scaled(name, 1, strategy, test);
}

/// [`run`] for a slow target: when the case count is the default, it runs
/// `DEFAULT_CASES / divisor` cases (at least one). An explicit `TIDEWIRE_FUZZ_CASES` and the
/// timed budget apply unchanged.
///
/// # Panics
/// As [`run`].
pub fn run_scaled<S: Strategy>(
    name: &str,
    divisor: u32,
    strategy: S,
    test: impl Fn(S::Value) -> Result<(), TestCaseError>,
) {
    let budget = Budget::from_env(divisor);
    let started = Instant::now();
    let mut passed: u64 = 0;
    let mut batches: u32 = 0;
    loop {
        let (cases, seed) = match budget {
            Budget::Cases { cases, seed } => {
                if batches > 0 {
                    break;
                }
                (cases, seed.unwrap_or_else(fresh_seed))
            }
            Budget::Time(total) => {
                let elapsed = started.elapsed();
                if batches > 0 && elapsed >= total {
                    break;
                }
                (batch_size(total, elapsed, passed), fresh_seed())
            }
        };
        run_batch(name, &strategy, &test, cases, seed, passed);
        passed += u64::from(cases);
        batches += 1;
    }
    println!(
        "fuzz {name}: {passed} cases in {:.1} s, 0 failures",
        started.elapsed().as_secs_f64()
    );
}

/// A multi-thread tokio runtime with one worker for the target `target`: its threads are named
/// after it, so that [`worker_panics`] counts the panics on them. Block on it from the property
/// (with a timeout around every wait).
///
/// # Panics
/// When the runtime cannot be built.
pub fn runtime(target: &str) -> tokio::runtime::Runtime {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            if let Some(name) = thread.name()
                && name.starts_with(THREAD_PREFIX)
            {
                PANICS
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(name.to_owned());
            }
            previous(info);
        }));
    });
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name(format!("{THREAD_PREFIX}{target}"))
        .enable_all()
        .build()
        .expect("a tokio runtime for the fuzz target")
}

/// How many panics happened so far on the threads of the runtime [`runtime`] built for
/// `target`.
pub fn worker_panics(target: &str) -> usize {
    let name = format!("{THREAD_PREFIX}{target}");
    PANICS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|panicked| **panicked == name)
        .count()
}

/// How much fuzzing a target gets.
#[derive(Debug, Clone, Copy)]
enum Budget {
    /// One batch of this many cases, from the given seed or a fresh one.
    Cases { cases: u32, seed: Option<u64> },
    /// Batches until this much time has passed (at least one).
    Time(Duration),
}

impl Budget {
    fn from_env(divisor: u32) -> Self {
        let seed = env_number("TIDEWIRE_FUZZ_SEED");
        let secs = env_number("TIDEWIRE_FUZZ_SECS");
        let cases = env_number("TIDEWIRE_FUZZ_CASES");
        match (seed, secs, cases) {
            (None, Some(secs), _) => Self::Time(Duration::from_secs(secs)),
            (seed, _, Some(cases)) => Self::Cases {
                cases: u32::try_from(cases).unwrap_or(u32::MAX).max(1),
                seed,
            },
            (seed, _, None) => Self::Cases {
                cases: (DEFAULT_CASES / divisor.max(1)).max(1),
                seed,
            },
        }
    }
}

/// The whole number in the environment variable `name`, if it is set.
fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let number = text
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} must be a whole number, not {text:?}"));
    Some(number)
}

/// The next batch of a timed run: as many cases as seem to fit in the time left.
fn batch_size(total: Duration, elapsed: Duration, passed: u64) -> u32 {
    if passed == 0 {
        return FIRST_BATCH;
    }
    let per_case = elapsed.as_secs_f64() / passed as f64;
    let left = total.saturating_sub(elapsed).as_secs_f64();
    let fit = (left / per_case.max(1e-6)).ceil();
    fit.clamp(1.0, f64::from(MAX_BATCH)) as u32
}

/// One runner, one seed, `cases` cases; panics with the smallest failing input on a failure.
fn run_batch<S: Strategy>(
    name: &str,
    strategy: &S,
    test: &impl Fn(S::Value) -> Result<(), TestCaseError>,
    cases: u32,
    seed: u64,
    passed: u64,
) {
    let config = Config {
        cases,
        failure_persistence: None,
        max_shrink_time: SHRINK_TIME_MS,
        ..Config::default()
    };
    let mut runner = TestRunner::new_with_rng(config, rng(seed));
    match runner.run(strategy, test) {
        Ok(()) => {}
        Err(TestError::Fail(reason, input)) => panic!(
            "fuzz {name}: a case failed after {passed} passing cases: {reason}\n\
             smallest failing input: {}\n\
             replay it with: TIDEWIRE_FUZZ_SEED={seed} TIDEWIRE_FUZZ_CASES={cases} \
             cargo test -p tidewire-tests --test fuzz {name} -- --nocapture",
            shorten(&format!("{input:#?}"))
        ),
        Err(TestError::Abort(reason)) => {
            panic!("fuzz {name}: proptest gave up after {passed} passing cases: {reason}")
        }
    }
}

/// A seed nobody chose: the process's random hash keys over the clock.
fn fresh_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos());
    RandomState::new().hash_one(nanos)
}

/// The runner's random generator for `seed`: ChaCha, keyed with `seed` spread over 32 bytes
/// (SplitMix64).
fn rng(seed: u64) -> TestRng {
    let mut state = seed;
    let mut key = [0u8; 32];
    for chunk in key.chunks_exact_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    TestRng::from_seed(RngAlgorithm::ChaCha, &key)
}

/// `text`, cut to [`SHOW`] bytes (on a character boundary) when longer.
fn shorten(text: &str) -> String {
    if text.len() <= SHOW {
        return text.to_owned();
    }
    let mut end = SHOW;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}
