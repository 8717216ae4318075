//! [`watch_drain`]: a request's handler under the eye of its server's drain, which cancels what
//! still runs when the drain's deadline passes ([`Lifecycle::cancel_in_flight`]).

use std::future::Future;
use std::pin::Pin;

use tokio_util::sync::CancellationToken;

use super::CancelPolicy;
use crate::lifecycle::Lifecycle;

/// How a handler ended under [`watch_drain`].
#[derive(Debug)]
pub enum Watched<T> {
    /// It returned, the drain did not touch it (the request may have been cancelled by its
    /// client, as before).
    Returned(T),
    /// The drain cancelled it and, cooperative, it returned on its own after being told: what
    /// it returned is the request's answer.
    Stopped(T),
    /// The drain cancelled it, and (under [`CancelPolicy::Abort`]) it is not polled again: the
    /// caller drops it, and answers the request with
    /// [`draining_error`](crate::lifecycle::draining_error), so its client can retry on
    /// another server.
    Dropped,
}

/// Runs `handler`, the handler of a request whose cancellation token is `cancel`, until it
/// returns or `lifecycle` cancels what is in flight. Then the token fires (the handler's
/// context is told); under [`CancelPolicy::Cooperative`] the handler runs on to its own return
/// ([`Watched::Stopped`]), under any other policy it is not polled again ([`Watched::Dropped`]):
/// the caller drops it before it answers for the request (after its token fired, so its
/// `on_cancel` guards run). A request its client had cancelled before is left as it was
/// ([`Watched::Returned`]).
///
/// A handler that is ready on its first poll costs nothing more: the drain is watched only
/// once the handler waits.
///
/// The handler is pinned by the caller and borrowed here: a request's future is large, and
/// taking it by value would store it twice in the caller's state and copy it on every move.
pub async fn watch_drain<F: Future>(
    mut handler: Pin<&mut F>,
    lifecycle: &Lifecycle,
    cancel: &CancellationToken,
    policy: CancelPolicy,
) -> Watched<F::Output> {
    tokio::select! {
        biased;
        output = &mut handler => return Watched::Returned(output),
        () = lifecycle.cancelling() => {}
    }
    if cancel.is_cancelled() {
        // Its client cancelled it first: what happens to it was decided then.
        return Watched::Returned(handler.await);
    }
    cancel.cancel();
    if policy == CancelPolicy::Cooperative {
        Watched::Stopped(handler.await)
    } else {
        Watched::Dropped
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn a_handler_that_returns_is_not_touched() {
        tokio::time::timeout(Duration::from_secs(60), async {
            let (lifecycle, cancel) = (Lifecycle::new(), CancellationToken::new());
            let handler = std::pin::pin!(async { 7 });
            let done = watch_drain(handler, &lifecycle, &cancel, CancelPolicy::Abort).await;
            assert!(matches!(done, Watched::Returned(7)));
            assert!(!cancel.is_cancelled());
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn a_cooperative_handler_is_told_and_its_own_return_is_kept() {
        tokio::time::timeout(Duration::from_secs(60), async {
            let (lifecycle, cancel) = (Lifecycle::new(), CancellationToken::new());
            let told = cancel.clone();
            let handler = async move {
                told.cancelled().await;
                "stopped between two steps"
            };
            let watched = tokio::spawn({
                let (lifecycle, cancel) = (lifecycle.clone(), cancel.clone());
                async move {
                    let handler = std::pin::pin!(handler);
                    watch_drain(handler, &lifecycle, &cancel, CancelPolicy::Cooperative).await
                }
            });
            tokio::task::yield_now().await;
            lifecycle.cancel_in_flight();
            let done = tokio::time::timeout(LIMIT, watched)
                .await
                .expect("in time")
                .expect("ran");
            assert!(
                matches!(done, Watched::Stopped("stopped between two steps")),
                "{done:?}"
            );
            assert!(cancel.is_cancelled());
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn an_aborting_handler_is_dropped_after_its_token_fired() {
        tokio::time::timeout(Duration::from_secs(60), async {
            let (lifecycle, cancel) = (Lifecycle::new(), CancellationToken::new());
            let saw_cancel = Arc::new(AtomicBool::new(false));
            struct Guard(CancellationToken, Arc<AtomicBool>);
            impl Drop for Guard {
                fn drop(&mut self) {
                    self.1.store(self.0.is_cancelled(), Ordering::Release);
                }
            }
            let guard = Guard(cancel.clone(), saw_cancel.clone());
            let handler = async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            };
            lifecycle.cancel_in_flight();
            let mut handler = Box::pin(handler);
            let done = tokio::time::timeout(
                LIMIT,
                watch_drain(handler.as_mut(), &lifecycle, &cancel, CancelPolicy::Abort),
            )
            .await
            .expect("in time");
            assert!(matches!(done, Watched::Dropped));
            drop(handler);
            assert!(
                saw_cancel.load(Ordering::Acquire),
                "dropped after its token fired"
            );
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn a_request_its_client_cancelled_stays_cancelled() {
        tokio::time::timeout(Duration::from_secs(60), async {
            let (lifecycle, cancel) = (Lifecycle::new(), CancellationToken::new());
            cancel.cancel();
            lifecycle.cancel_in_flight();
            let handler = async {
                tokio::task::yield_now().await;
                "the client's cancel"
            };
            let handler = std::pin::pin!(handler);
            let done = tokio::time::timeout(
                LIMIT,
                watch_drain(handler, &lifecycle, &cancel, CancelPolicy::Cooperative),
            )
            .await
            .expect("in time");
            assert!(matches!(done, Watched::Returned("the client's cancel")));
        })
        .await
        .expect("the test took longer than its limit");
    }
}
