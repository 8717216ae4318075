//! The client's cache of stateless results (2026-07-28): the four lists and `resources/read` are
//! kept for the `ttlMs` the server gave them, keyed by method and params.
//!
//! One client has one set of credentials, so `private` and `public` entries alike are kept
//! per client and never shared with another. A list change drops the matching list at once (and
//! every `resources/read` on a resource list change); a resource update drops that resource's
//! reads. Requests that carry input answers (`inputResponses`, `requestState`) are never cached,
//! and neither is a result that still asks for input. Bounded in entries and bytes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;
use tidewire_core::schema::{ServerNotification, result_type};

/// Entries kept at most.
const MAX_ENTRIES: usize = 512;
/// Bytes of results (as JSON) kept at most.
const MAX_BYTES: usize = 8 * 1024 * 1024;
/// The longest a result is kept, whatever it says.
const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// The methods whose results may be cached.
const CACHEABLE: [&str; 5] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

struct Entry {
    value: Value,
    expires: Instant,
    bytes: usize,
}

/// The cache.
#[derive(Default)]
pub(crate) struct ResultCache {
    entries: Mutex<HashMap<(String, String), Entry>>,
}

impl ResultCache {
    /// The key of a request, when its result may be cached.
    pub(crate) fn key(method: &str, params: &Value) -> Option<(String, String)> {
        if !CACHEABLE.contains(&method) {
            return None;
        }
        if params.get("inputResponses").is_some() || params.get("requestState").is_some() {
            return None;
        }
        // The `_meta` envelope is the same on every request of a client: not part of the key.
        let mut params = params.clone();
        if let Value::Object(map) = &mut params {
            map.remove("_meta");
        }
        Some((method.to_owned(), params.to_string()))
    }

    /// A fresh cached result.
    pub(crate) fn get(&self, key: &(String, String)) -> Option<Value> {
        let mut entries = self.lock();
        match entries.get(key) {
            Some(entry) if entry.expires > Instant::now() => Some(entry.value.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `result` for its `ttlMs` (nothing when it is absent, zero, or asks for input).
    pub(crate) fn put(&self, key: (String, String), result: &Value) {
        let complete = result
            .get("resultType")
            .and_then(Value::as_str)
            .is_none_or(|t| t == result_type::COMPLETE);
        let ttl = result
            .get("ttlMs")
            .and_then(Value::as_u64)
            .map(Duration::from_millis)
            .unwrap_or_default()
            .min(MAX_TTL);
        if !complete || ttl.is_zero() {
            return;
        }
        let bytes = result.to_string().len();
        if bytes > MAX_BYTES / 4 {
            return;
        }
        let now = Instant::now();
        let mut entries = self.lock();
        entries.retain(|_, e| e.expires > now);
        let mut total: usize = entries.values().map(|e| e.bytes).sum();
        while entries.len() >= MAX_ENTRIES || total + bytes > MAX_BYTES {
            // The entry that would go stale first makes room.
            let Some(soonest) = entries
                .iter()
                .min_by_key(|(_, e)| e.expires)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(gone) = entries.remove(&soonest) {
                total -= gone.bytes;
            }
        }
        entries.insert(
            key,
            Entry {
                value: result.clone(),
                expires: now + ttl,
                bytes,
            },
        );
    }

    /// Drops what a notification says is stale.
    pub(crate) fn invalidate(&self, notification: &ServerNotification) {
        let mut entries = self.lock();
        match notification {
            ServerNotification::ToolListChanged(_) => entries.retain(|(m, _), _| m != "tools/list"),
            ServerNotification::PromptListChanged(_) => {
                entries.retain(|(m, _), _| m != "prompts/list");
            }
            ServerNotification::ResourceListChanged(_) => entries.retain(|(m, _), _| {
                !matches!(
                    m.as_str(),
                    "resources/list" | "resources/templates/list" | "resources/read"
                )
            }),
            ServerNotification::ResourceUpdated(params) => {
                let uri = Value::from(params.uri.as_str());
                entries.retain(|(m, p), _| {
                    m != "resources/read"
                        || serde_json::from_str::<Value>(p)
                            .ok()
                            .is_none_or(|p| p.get("uri") != Some(&uri))
                });
            }
            _ => {}
        }
    }

    /// Entries kept now (fresh or not).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tidewire_core::schema::ResourceUpdatedNotificationParams;

    use super::*;

    #[test]
    fn results_are_kept_for_their_ttl_and_dropped_when_stale() {
        let cache = ResultCache::default();
        let key = ResultCache::key("tools/list", &json!({"_meta": {"x": 1}})).expect("cacheable");
        assert_eq!(
            key,
            ResultCache::key("tools/list", &json!({})).expect("same key")
        );
        cache.put(key.clone(), &json!({"tools": [], "ttlMs": 0}));
        assert!(cache.get(&key).is_none(), "ttl 0 is stale at once");
        cache.put(key.clone(), &json!({"tools": [], "ttlMs": 60_000}));
        assert!(cache.get(&key).is_some());
        cache.invalidate(&ServerNotification::ToolListChanged(Default::default()));
        assert!(cache.get(&key).is_none(), "a list change drops the list");
        assert!(ResultCache::key("tools/call", &json!({})).is_none());
        assert!(
            ResultCache::key("resources/read", &json!({"uri": "a", "requestState": "s"})).is_none()
        );
    }

    #[test]
    fn an_update_drops_that_resource_only() {
        let cache = ResultCache::default();
        let a = ResultCache::key("resources/read", &json!({"uri": "a://1"})).expect("key");
        let b = ResultCache::key("resources/read", &json!({"uri": "a://2"})).expect("key");
        for key in [&a, &b] {
            cache.put(key.clone(), &json!({"contents": [], "ttlMs": 60_000}));
        }
        cache.invalidate(&ServerNotification::ResourceUpdated(
            ResourceUpdatedNotificationParams::new("a://1"),
        ));
        assert!(cache.get(&a).is_none());
        assert!(cache.get(&b).is_some());
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = ResultCache::default();
        for i in 0..(MAX_ENTRIES + 10) {
            let key =
                ResultCache::key("resources/read", &json!({"uri": format!("u{i}")})).expect("key");
            cache.put(key, &json!({"contents": [], "ttlMs": 60_000}));
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
    }
}
