//! The stream of notifications the server sends.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use tidewire_core::schema::ServerNotification;
use tokio::sync::broadcast;

/// A callback that sees every notification the server sends, in order, on the connection's
/// reader. Keep it short: hand long work to a task.
pub(crate) type NotificationCallback = Arc<dyn Fn(&ServerNotification) + Send + Sync>;

/// Some notifications were dropped because a [`NotificationStream`] was read too slowly.
///
/// The stream goes on with the oldest notification it still holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("missed {0} server notifications because the stream was read too slowly")]
pub struct Lagged(pub u64);

/// The notifications the server sends, typed and in order: a bounded [`Stream`] of
/// `Result<ServerNotification, Lagged>`.
///
/// Each stream has its own buffer, of the size set by
/// [`ClientBuilder::notification_buffer`](crate::ClientBuilder::notification_buffer). When a
/// stream falls further behind than that, the oldest notifications are dropped and the next item
/// is `Err(Lagged(n))` saying how many; nothing is lost silently. The stream ends once the
/// connection has closed and everything buffered has been read.
///
/// `notifications/progress` and `notifications/cancelled` appear here too, although progress
/// for a request is also delivered to that request's callback or stream.
pub struct NotificationStream {
    inner: BoxStream<'static, Result<ServerNotification, Lagged>>,
}

impl NotificationStream {
    pub(crate) fn new(rx: broadcast::Receiver<ServerNotification>) -> Self {
        let inner = futures::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Ok(notification) => Some((Ok(notification), rx)),
                Err(broadcast::error::RecvError::Lagged(n)) => Some((Err(Lagged(n)), rx)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        });
        Self {
            inner: Box::pin(inner),
        }
    }

    /// The next item; `None` once the connection has closed and the buffer is drained.
    pub async fn recv(&mut self) -> Option<Result<ServerNotification, Lagged>> {
        futures::StreamExt::next(self).await
    }
}

impl Stream for NotificationStream {
    type Item = Result<ServerNotification, Lagged>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl std::fmt::Debug for NotificationStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotificationStream").finish_non_exhaustive()
    }
}
