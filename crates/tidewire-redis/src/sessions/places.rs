//! The sessions this replica holds (their places): noted when opened, kept fresh in Redis
//! while used, forgotten when they end.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use axum::extract::Request;
use http::StatusCode;
use tidewire_core::transport::Principal;

use super::shared::{ALIVE_FOR, Place, Routing, millis};

/// The most sessions a replica keeps the places of; past it the least recently used is
/// forgotten (its requests then reach only this replica).
const MAX_PLACES: usize = 100_000;

impl Routing {
    pub(super) fn places(&self) -> std::sync::MutexGuard<'_, HashMap<String, Place>> {
        self.places.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the session `id`, opened here for `subject`, was just used.
    pub(super) fn opened(&self, id: &str, subject: Option<String>) {
        if self.is_leaving() {
            return;
        }
        let mut places = self.places();
        if places.len() >= MAX_PLACES && !places.contains_key(id) {
            let oldest = places
                .iter()
                .min_by_key(|(_, place)| place.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                places.remove(&oldest);
                tracing::warn!("too many sessions to keep the places of; the oldest is forgotten");
            }
        }
        let used = std::time::Instant::now();
        places.insert(id.to_owned(), Place { used, subject });
    }

    /// Adds to `pipe` the commands that write the place of session `id`, for `subject`, for
    /// `ttl`.
    pub(super) fn write_place(
        &self,
        pipe: &mut redis::Pipeline,
        id: &str,
        subject: Option<&str>,
        ttl: Duration,
    ) {
        let key = self.session_key(id);
        pipe.cmd("HSET").arg(&key).arg("owner").arg(&self.node);
        if let Some(subject) = subject {
            pipe.arg("subject").arg(subject);
        }
        pipe.ignore();
        pipe.cmd("PEXPIRE")
            .arg(&key)
            .arg(millis(ttl).max(1))
            .ignore();
    }

    /// Writes the place of every session used here within its ttl (each for what is left of
    /// it), and forgets the others.
    pub(super) async fn keep_places(&self) {
        if self.is_leaving() {
            return;
        }
        let now = std::time::Instant::now();
        let live: Vec<(String, Place, Duration)> = {
            let mut places = self.places();
            places.retain(|_, place| now.duration_since(place.used) < self.session_ttl);
            places
                .iter()
                .map(|(id, place)| {
                    let left = self.session_ttl - now.duration_since(place.used);
                    (id.clone(), place.clone(), left)
                })
                .collect()
        };
        if live.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        // Alive first: a place is only followed to a live replica.
        pipe.cmd("SET")
            .arg(self.alive_key(&self.node))
            .arg(1)
            .arg("PX")
            .arg(millis(ALIVE_FOR))
            .ignore();
        for (id, place, left) in &live {
            self.write_place(&mut pipe, id, place.subject.as_deref(), *left);
        }
        let kept: Result<(), _> = pipe.query_async(&mut self.redis.connection()).await;
        if let Err(error) = kept {
            tracing::warn!(%error, "the places of this replica's sessions could not be written");
        }
    }
}

/// What of a request for a session decides, once it is answered, whether the session ended.
pub(super) struct Asked {
    deleting: bool,
    acting_for: Option<Principal>,
}

impl Asked {
    pub(super) fn of(request: &Request) -> Self {
        Self {
            deleting: request.method() == http::Method::DELETE,
            acting_for: request.extensions().get::<Principal>().cloned(),
        }
    }
}

impl Routing {
    /// After a request for session `id` of this replica's was answered `status`: its place is
    /// forgotten when it ended (a DELETE done, or 404 to whom it was opened for: to anyone else
    /// a 404 refuses a session that goes on), else kept as used.
    pub(super) async fn settle(&self, id: &str, asked: &Asked, status: StatusCode) {
        let ended = status == StatusCode::NOT_FOUND || (asked.deleting && status.is_success());
        {
            let mut places = self.places();
            let Some(place) = places.get_mut(id) else {
                return;
            };
            if !(ended
                && Principal::may_use_as(place.subject.as_deref(), asked.acting_for.as_ref()))
            {
                place.used = std::time::Instant::now();
                return;
            }
            places.remove(id);
        }
        self.remove_place(id).await;
    }

    /// Removes the place of session `id` from Redis (this replica has forgotten it already).
    pub(super) async fn remove_place(&self, id: &str) {
        let removed: Result<(), _> = redis::cmd("DEL")
            .arg(self.session_key(id))
            .query_async(&mut self.redis.connection())
            .await;
        if let Err(error) = removed {
            tracing::warn!(%error, "an ended session's place could not be removed");
        }
    }
}

/// Forgets the place of a legacy HTTP+SSE session when its stream's body is dropped (the
/// stream ended, or its client went away): the session ended with it.
pub(super) struct Forget {
    pub(super) shared: Arc<Routing>,
    pub(super) id: String,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.shared.places().remove(&self.id);
        let (shared, id) = (self.shared.clone(), std::mem::take(&mut self.id));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { shared.remove_place(&id).await });
        }
    }
}
