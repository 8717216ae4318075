//! The server's tools, resources, templates and prompts, and their handlers.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use serde_json::Value;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CallToolResult, CompleteParams, CompleteResult, GetPromptResult, Prompt, ReadResourceResult,
    Resource, ResourceTemplate, Tool,
};
use tidewire_core::text::excerpt;

use crate::error::ToolError;
use crate::uri_template::UriTemplate;

// The entries are generic over the context their handlers take (always `crate::Context`), so
// that the registry, and the server state holding it, do not depend on the context module,
// which depends on them (a context hands out the server).

/// A tool handler: the arguments as JSON, and the context.
pub(crate) type ToolFn<C> =
    dyn Fn(Value, C) -> BoxFuture<'static, Result<CallToolResult, ToolError>> + Send + Sync;
/// A resource reader: the URI, the template's variables (none for a fixed resource), the
/// context.
pub(crate) type ReadFn<C> = dyn Fn(
        String,
        HashMap<String, String>,
        C,
    ) -> BoxFuture<'static, Result<ReadResourceResult, ErrorObject>>
    + Send
    + Sync;
/// A prompt handler: the arguments, and the context.
pub(crate) type PromptFn<C> = dyn Fn(HashMap<String, String>, C) -> BoxFuture<'static, Result<GetPromptResult, ErrorObject>>
    + Send
    + Sync;
/// The completion handler.
pub(crate) type CompleteFn<C> = dyn Fn(CompleteParams, C) -> BoxFuture<'static, Result<CompleteResult, ErrorObject>>
    + Send
    + Sync;

/// A tool and its handler.
pub(crate) struct ToolEntry<C> {
    pub(crate) tool: Tool,
    pub(crate) handler: Arc<ToolFn<C>>,
}

/// A resource and its reader.
pub(crate) struct ResourceEntry<C> {
    pub(crate) resource: Resource,
    pub(crate) handler: Arc<ReadFn<C>>,
}

/// A resource template, its parsed form and its reader.
pub(crate) struct TemplateEntry<C> {
    pub(crate) template: ResourceTemplate,
    pub(crate) parsed: UriTemplate,
    pub(crate) handler: Arc<ReadFn<C>>,
}

/// A prompt and its handler.
pub(crate) struct PromptEntry<C> {
    pub(crate) prompt: Prompt,
    pub(crate) handler: Arc<PromptFn<C>>,
}

/// Something listed by a key, in insertion order; a new entry with a known key replaces the old.
pub(crate) struct Registry<T> {
    entries: RwLock<Vec<Arc<T>>>,
    key: fn(&T) -> &str,
}

impl<T> Registry<T> {
    pub(crate) fn new(key: fn(&T) -> &str) -> Self {
        Self {
            entries: RwLock::new(Vec::new()),
            key,
        }
    }

    /// Adds or replaces; returns true when something was replaced.
    pub(crate) fn insert(&self, entry: T) -> bool {
        let mut entries = self
            .entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = (self.key)(&entry).to_owned();
        let entry = Arc::new(entry);
        if let Some(slot) = entries.iter_mut().find(|e| (self.key)(e) == key) {
            *slot = entry;
            true
        } else {
            entries.push(entry);
            false
        }
    }

    /// Removes by key; returns true when something was removed.
    pub(crate) fn remove(&self, key: &str) -> bool {
        let mut entries = self
            .entries
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = entries.len();
        entries.retain(|e| (self.key)(e) != key);
        entries.len() != before
    }

    pub(crate) fn get(&self, key: &str) -> Option<Arc<T>> {
        self.read().iter().find(|e| (self.key)(e) == key).cloned()
    }

    /// One page of the entries, mapped by `map` (only the page is mapped), and the next cursor.
    pub(crate) fn page<U>(
        &self,
        cursor: Option<&str>,
        page_size: usize,
        map: impl Fn(&T) -> U,
    ) -> Result<(Vec<U>, Option<String>), ErrorObject> {
        page(&self.read(), cursor, page_size, |entry| map(entry))
    }

    pub(crate) fn snapshot(&self) -> Vec<Arc<T>> {
        self.read().clone()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<T>>> {
        self.entries
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub(crate) fn boxed_tool<C, F, Fut>(handler: F) -> Arc<ToolFn<C>>
where
    F: Fn(Value, C) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<CallToolResult, ToolError>> + Send + 'static,
{
    Arc::new(move |args, ctx| Box::pin(handler(args, ctx)))
}

/// One page of `items`, starting at the opaque `cursor`, with the cursor of the next page.
///
/// # Errors
/// `-32602` for a cursor this server did not issue.
pub(crate) fn page<T, U>(
    items: &[T],
    cursor: Option<&str>,
    page_size: usize,
    map: impl Fn(&T) -> U,
) -> Result<(Vec<U>, Option<String>), ErrorObject> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .strip_prefix("p")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n <= items.len())
            .ok_or_else(|| {
                let c = excerpt(c);
                ErrorObject::invalid_params(format!("invalid cursor {c:?}"))
            })?,
    };
    let end = start.saturating_add(page_size).min(items.len());
    let next = (end < items.len()).then(|| format!("p{end}"));
    Ok((items[start..end].iter().map(map).collect(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_to_the_end_and_reject_foreign_cursors() {
        let items: Vec<u32> = (0..7).collect();
        let (a, next) = page(&items, None, 3, Clone::clone).expect("first");
        assert_eq!(a, vec![0, 1, 2]);
        let (b, next) = page(&items, next.as_deref(), 3, Clone::clone).expect("second");
        assert_eq!(b, vec![3, 4, 5]);
        let (c, next) = page(&items, next.as_deref(), 3, Clone::clone).expect("third");
        assert_eq!(c, vec![6]);
        assert!(next.is_none());
        assert!(page(&items, Some("p99"), 3, Clone::clone).is_err());
        assert!(page(&items, Some("garbage"), 3, Clone::clone).is_err());
    }

    #[test]
    fn registry_replaces_by_key_and_keeps_order() {
        let r: Registry<(String, u32)> = Registry::new(|e| e.0.as_str());
        assert!(!r.insert(("a".into(), 1)));
        assert!(!r.insert(("b".into(), 2)));
        assert!(r.insert(("a".into(), 3)));
        let all: Vec<_> = r.snapshot().iter().map(|e| (e.0.clone(), e.1)).collect();
        assert_eq!(all, vec![("a".into(), 3), ("b".into(), 2)]);
        assert!(r.remove("a"));
        assert!(!r.remove("a"));
        assert!(r.get("b").is_some());
    }
}
