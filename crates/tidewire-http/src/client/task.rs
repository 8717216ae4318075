//! Background tasks that cannot die silently: a panic in one is caught and turned into text, so
//! whoever waits on the task's work can be told instead of waiting for ever.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use tidewire_core::text::panic_message;

/// Runs `task`; a panic inside it comes back as `Err` with the panic's message.
pub(crate) async fn catch<F: Future>(task: F) -> Result<F::Output, String> {
    AssertUnwindSafe(task)
        .catch_unwind()
        .await
        .map_err(|panic| panic_message(&*panic))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explode() {
        panic!("boom");
    }

    #[tokio::test]
    async fn a_panic_becomes_its_message() {
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(5), async {
            (catch(async { 7 }).await, catch(async { explode() }).await)
        })
        .await
        .expect("in time");
        assert_eq!(outcome, (Ok(7), Err("boom".to_owned())));
    }
}
