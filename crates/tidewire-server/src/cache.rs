//! Caching hints (2026-07-28): `ttlMs` and `cacheScope` on `server/discover`, the four lists and
//! `resources/read`.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::Value;
pub use tidewire_core::schema::CacheScope;

/// How long a client may keep a result, and who may share it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheHint {
    /// How long the result stays fresh (sent in whole milliseconds; zero: stale at once).
    pub ttl: Duration,
    /// Who may share a cached copy.
    pub scope: CacheScope,
}

impl CacheHint {
    /// Stale at once, private: what a server says when told nothing (the default).
    pub const NONE: Self = Self {
        ttl: Duration::ZERO,
        scope: CacheScope::Private,
    };

    /// Fresh for `ttl`, shareable across users.
    pub const fn public(ttl: Duration) -> Self {
        Self {
            ttl,
            scope: CacheScope::Public,
        }
    }

    /// Fresh for `ttl`, within one authorization context only.
    pub const fn private(ttl: Duration) -> Self {
        Self {
            ttl,
            scope: CacheScope::Private,
        }
    }

    /// The hint of a result made of parts with these hints: the shortest lifetime, and private
    /// if any part is.
    pub fn combine(self, other: Self) -> Self {
        Self {
            ttl: self.ttl.min(other.ttl),
            scope: if self.scope == CacheScope::Private || other.scope == CacheScope::Private {
                CacheScope::Private
            } else {
                CacheScope::Public
            },
        }
    }

    /// Writes `ttlMs` and `cacheScope` into `result`, unless the handler set them itself.
    pub(crate) fn write(self, result: &mut Value) {
        if let Value::Object(map) = result {
            let ms = u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX);
            map.entry("ttlMs").or_insert_with(|| Value::from(ms));
            map.entry("cacheScope").or_insert_with(|| {
                serde_json::to_value(self.scope).unwrap_or_else(|_| Value::from("private"))
            });
        }
    }
}

impl Default for CacheHint {
    fn default() -> Self {
        Self::NONE
    }
}

/// What a per-item hint is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CacheItem {
    /// A tool, by name: counts toward `tools/list`.
    Tool(String),
    /// A prompt, by name: counts toward `prompts/list`.
    Prompt(String),
    /// A resource, by URI: counts toward `resources/list` and is its `resources/read` hint.
    Resource(String),
    /// A resource template, by URI template: counts toward `resources/templates/list`, and is
    /// the `resources/read` hint of the URIs it matches.
    Template(String),
}

/// The server's hints: a default, and per item.
#[derive(Debug, Clone, Default)]
pub(crate) struct CacheHints {
    pub(crate) default: CacheHint,
    pub(crate) items: HashMap<CacheItem, CacheHint>,
}

impl CacheHints {
    /// The hint of one item (its own, or the default).
    pub(crate) fn of(&self, item: &CacheItem) -> CacheHint {
        self.items.get(item).copied().unwrap_or(self.default)
    }

    /// The hint of a whole list: the same on every page, so it is taken over every item.
    pub(crate) fn of_list(&self, items: impl Iterator<Item = CacheItem>) -> CacheHint {
        items.fold(self.default, |hint, item| hint.combine(self.of(&item)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_takes_its_shortest_lifetime_and_private_if_any_item_is() {
        let mut hints = CacheHints {
            default: CacheHint::public(Duration::from_secs(60)),
            items: HashMap::new(),
        };
        hints.items.insert(
            CacheItem::Tool("b".into()),
            CacheHint::private(Duration::from_secs(5)),
        );
        let tools = |names: &[&str]| {
            names
                .iter()
                .map(|n| CacheItem::Tool((*n).to_owned()))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            hints.of_list(tools(&["a"]).into_iter()),
            CacheHint::public(Duration::from_secs(60))
        );
        assert_eq!(
            hints.of_list(tools(&["a", "b"]).into_iter()),
            CacheHint::private(Duration::from_secs(5))
        );
        let mut result = serde_json::json!({"tools": [], "ttlMs": 7});
        CacheHint::public(Duration::from_millis(1500)).write(&mut result);
        assert_eq!(result["ttlMs"], 7, "a handler's own value stays");
        assert_eq!(result["cacheScope"], "public");
    }
}
