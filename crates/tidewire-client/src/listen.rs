//! [`Listen`]: the change notifications a caller asked for, one loop for both eras.
//!
//! On the stateless revision (2026-07-28) it is a `subscriptions/listen` request kept open: the
//! server acknowledges it first, then sends only the types asked for, each tagged with the
//! request's id, which is how they are told apart from another listen's. Dropping the [`Listen`]
//! drops the request, which cancels it. On a session it is the session's own notifications
//! (the GET stream on Streamable HTTP), filtered the same way, with `resources/subscribe` for the
//! URIs asked for (and `resources/unsubscribe` when dropped).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use futures::stream::BoxStream;
use serde_json::Value;
use tidewire_core::schema::{
    ListenParams, NotificationType, RequestType, ServerNotification, SubscriptionFilter,
    SubscriptionsAcknowledged, SubscriptionsListen, meta_keys,
};
use tidewire_core::session::InFlight;
use tokio::sync::broadcast;

use crate::client::Client;
use crate::error::ClientError;
use crate::notifications::Lagged;

/// How long a listen waits for the server's acknowledgement.
const ACK_TIMEOUT: Duration = Duration::from_secs(30);

/// The change notifications asked for with [`Client::listen`]: a bounded stream of
/// `Result<ServerNotification, Lagged>`, like [`NotificationStream`](crate::NotificationStream),
/// holding only list changes and resource updates that match the filter.
///
/// It ends when the server ends the subscription or the connection closes. Dropping it ends the
/// subscription.
pub struct Listen {
    honoured: SubscriptionFilter,
    items: BoxStream<'static, Result<ServerNotification, Lagged>>,
    /// The open `subscriptions/listen` request (stateless); done once it has completed.
    request: Option<Pin<Box<InFlight<Value>>>>,
    /// Unsubscribes the session's resources when dropped.
    session: Option<Unsubscribe>,
}

impl Listen {
    /// What the server agreed to send: the filter asked for, less what it does not offer.
    pub fn honoured(&self) -> &SubscriptionFilter {
        &self.honoured
    }

    /// Ends the subscription and waits until the server has been told: on a session, the
    /// `resources/unsubscribe` requests are answered; on the stateless revision, the listen
    /// request is cancelled (dropping a `Listen` does the same without waiting).
    ///
    /// # Errors
    /// When a `resources/unsubscribe` fails.
    pub async fn end(mut self) -> Result<(), ClientError> {
        self.request = None;
        if let Some(mut session) = self.session.take() {
            for uri in std::mem::take(&mut session.uris) {
                session.client.unsubscribe(uri).await?;
            }
        }
        Ok(())
    }
}

impl Stream for Listen {
    type Item = Result<ServerNotification, Lagged>;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Poll::Ready(item) = self.items.as_mut().poll_next(cx) {
            return Poll::Ready(item);
        }
        // The request completes when the server ends the subscription (its `complete` result)
        // or the connection goes: the stream ends with it.
        if let Some(request) = &mut self.request
            && request.as_mut().poll(cx).is_ready()
        {
            self.request = None;
            return Poll::Ready(None);
        }
        Poll::Pending
    }
}

impl std::fmt::Debug for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listen")
            .field("honoured", &self.honoured)
            .finish_non_exhaustive()
    }
}

/// Whether `notification` is one `filter` asks for.
fn wanted(filter: &SubscriptionFilter, notification: &ServerNotification) -> bool {
    let on = |flag: Option<bool>| flag == Some(true);
    match notification {
        ServerNotification::ToolListChanged(_) => on(filter.tools_list_changed),
        ServerNotification::PromptListChanged(_) => on(filter.prompts_list_changed),
        ServerNotification::ResourceListChanged(_) => on(filter.resources_list_changed),
        ServerNotification::ResourceUpdated(params) => filter
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.contains(&params.uri)),
        _ => false,
    }
}

/// The subscription id a notification carries, if any.
fn tag(notification: &ServerNotification) -> Option<Value> {
    let (_, params) = notification.clone().into_parts();
    params?
        .get("_meta")?
        .get(meta_keys::SUBSCRIPTION_ID)
        .cloned()
}

/// A receiver turned into a stream of the notifications `keep` accepts.
fn filtered(
    rx: broadcast::Receiver<ServerNotification>,
    keep: impl Fn(&ServerNotification) -> bool + Send + Sync + 'static,
) -> BoxStream<'static, Result<ServerNotification, Lagged>> {
    Box::pin(futures::stream::unfold(
        (rx, keep),
        |(mut rx, keep)| async move {
            loop {
                match rx.recv().await {
                    Ok(n) if keep(&n) => return Some((Ok(n), (rx, keep))),
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        return Some((Err(Lagged(n)), (rx, keep)));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        },
    ))
}

impl Client {
    /// Listens for the change notifications `filter` asks for: list changes of tools, prompts
    /// and resources, and updates of the resources it names. One loop serves both eras (see
    /// [`Listen`]).
    ///
    /// ```no_run
    /// # async fn demo(client: tidewire_client::Client) -> Result<(), tidewire_client::ClientError> {
    /// use futures::StreamExt;
    /// use tidewire_core::schema::{ServerNotification, SubscriptionFilter};
    ///
    /// let mut changes = client
    ///     .listen(SubscriptionFilter {
    ///         tools_list_changed: Some(true),
    ///         resource_subscriptions: Some(vec!["file:///log".into()]),
    ///         ..SubscriptionFilter::default()
    ///     })
    ///     .await?;
    /// while let Some(Ok(change)) = changes.next().await {
    ///     if let ServerNotification::ToolListChanged(_) = change {
    ///         let tools = client.list_all_tools().await?;
    ///         # let _ = tools;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As any request: the server refused the listen (or a `resources/subscribe`), or did not
    /// acknowledge it within 30 s.
    pub async fn listen(&self, filter: SubscriptionFilter) -> Result<Listen, ClientError> {
        if self.inner.envelope.is_some() {
            self.listen_stateless(filter).await
        } else {
            self.listen_session(filter).await
        }
    }

    async fn listen_stateless(&self, filter: SubscriptionFilter) -> Result<Listen, ClientError> {
        // Subscribed before the request goes, so the acknowledgement cannot be missed.
        let mut rx = self.inner.template.resubscribe();
        let asks_for_tasks = filter.task_ids.as_ref().is_some_and(|ids| !ids.is_empty());
        let params = ListenParams {
            notifications: filter,
            meta: None,
        };
        let params = serde_json::to_value(params).map_err(|e| ClientError::InvalidResponse {
            method: SubscriptionsListen::METHOD.to_owned(),
            reason: e.to_string(),
        })?;
        // Tasks are the tasks extension's: a listen that names some declares it.
        let mut request = self.request_raw(SubscriptionsListen::METHOD, params);
        if asks_for_tasks {
            request = request.merge_meta(self.declaring_tasks());
        }
        // Kept open for as long as the listen lasts: its result ends the stream.
        let request = request.no_timeout().send().await?;
        let id = request.id().to_json();
        let mut request: Pin<Box<InFlight<Value>>> = Box::pin(request);
        let ack = async {
            loop {
                match rx.recv().await {
                    Ok(n)
                        if n.method() == SubscriptionsAcknowledged::METHOD
                            && tag(&n).as_ref() == Some(&id) =>
                    {
                        let (_, params) = n.into_parts();
                        return Ok(params
                            .and_then(|p| p.get("notifications").cloned())
                            .and_then(|f| serde_json::from_value(f).ok())
                            .unwrap_or_default());
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(ClientError::Session(
                            tidewire_core::session::SessionError::Closed(
                                "the connection closed before the listen was acknowledged"
                                    .to_owned(),
                            ),
                        ));
                    }
                }
            }
        };
        let honoured: SubscriptionFilter = tokio::select! {
            ack = tokio::time::timeout(ACK_TIMEOUT, ack) => ack.map_err(|_| ClientError::InvalidResponse {
                method: SubscriptionsListen::METHOD.to_owned(),
                reason: format!("no acknowledgement within {ACK_TIMEOUT:?}"),
            })??,
            ended = request.as_mut() => {
                // Answered before any acknowledgement: an error, or an empty subscription.
                ended?;
                return Err(ClientError::InvalidResponse {
                    method: SubscriptionsListen::METHOD.to_owned(),
                    reason: "the listen ended before it was acknowledged".to_owned(),
                });
            }
        };
        let items = filtered(rx, move |n| tag(n).as_ref() == Some(&id));
        Ok(Listen {
            honoured,
            items,
            request: Some(request),
            session: None,
        })
    }

    async fn listen_session(&self, filter: SubscriptionFilter) -> Result<Listen, ClientError> {
        let caps = self.server_capabilities();
        let yes =
            |flag: Option<bool>, offered: bool| (flag == Some(true) && offered).then_some(true);
        let resources = caps.resources.as_ref();
        let mut uris = Vec::new();
        if resources.is_some_and(|r| r.subscribe == Some(true)) {
            for uri in filter.resource_subscriptions.iter().flatten() {
                self.subscribe(uri.clone()).await?;
                uris.push(uri.clone());
            }
        }
        let honoured = SubscriptionFilter {
            tools_list_changed: yes(
                filter.tools_list_changed,
                caps.tools
                    .as_ref()
                    .is_some_and(|t| t.list_changed == Some(true)),
            ),
            prompts_list_changed: yes(
                filter.prompts_list_changed,
                caps.prompts
                    .as_ref()
                    .is_some_and(|p| p.list_changed == Some(true)),
            ),
            resources_list_changed: yes(
                filter.resources_list_changed,
                resources.is_some_and(|r| r.list_changed == Some(true)),
            ),
            resource_subscriptions: (!uris.is_empty()).then(|| uris.clone()),
            // A session hears of its tasks unasked (`notifications/tasks/status`).
            task_ids: None,
        };
        let keep = honoured.clone();
        let items = filtered(self.inner.template.resubscribe(), move |n| wanted(&keep, n));
        Ok(Listen {
            honoured,
            items,
            request: None,
            session: (!uris.is_empty()).then(|| Unsubscribe {
                client: self.clone(),
                uris,
            }),
        })
    }
}

/// Unsubscribes a session's resources when a [`Listen`] goes.
struct Unsubscribe {
    client: Client,
    uris: Vec<String>,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let (client, uris) = (self.client.clone(), std::mem::take(&mut self.uris));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for uri in uris {
                    if let Err(error) = client.unsubscribe(uri).await {
                        tracing::debug!(%error, "resources/unsubscribe after a listen failed");
                    }
                }
            });
        }
    }
}
