//! The four lists (tools, resources, resource templates, prompts): one generic handler, paged
//! from the server's registries, for both eras.

use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedParams, Prompt, Resource, ResourceTemplate, Tool,
};

use crate::cache::CacheItem;
use crate::context::{Context, ServerInner};
use crate::registry::{PromptEntry, Registry, ResourceEntry, TemplateEntry, ToolEntry};

/// A list result, and where its items come from.
pub(crate) trait Listing: serde::Serialize + Sized {
    /// The registry entry an item is read from.
    type Entry;
    /// One item of the list.
    type Item;
    /// The registry of the list.
    fn registry(server: &ServerInner) -> &Registry<Self::Entry>;
    /// The item of an entry.
    fn item(entry: &Self::Entry) -> Self::Item;
    /// What a caching hint of the entry is keyed by (the stateless revision).
    fn cache_item(entry: &Self::Entry) -> CacheItem;
    /// The result of one page.
    fn from_page(items: Vec<Self::Item>, next_cursor: Option<String>) -> Self;
}

/// The page `params` asks for.
///
/// # Errors
/// `-32602` for a cursor this server did not issue.
pub(crate) fn list<L: Listing>(
    server: &ServerInner,
    params: &PaginatedParams,
) -> Result<L, ErrorObject> {
    let (items, next) =
        L::registry(server).page(params.cursor.as_deref(), server.page_size, L::item)?;
    Ok(L::from_page(items, next))
}

impl Listing for ListToolsResult {
    type Entry = ToolEntry<Context>;
    type Item = Tool;
    fn registry(server: &ServerInner) -> &Registry<ToolEntry<Context>> {
        &server.tools
    }
    fn item(entry: &ToolEntry<Context>) -> Tool {
        entry.tool.clone()
    }
    fn cache_item(entry: &ToolEntry<Context>) -> CacheItem {
        CacheItem::Tool(entry.tool.name.clone())
    }
    fn from_page(items: Vec<Tool>, next_cursor: Option<String>) -> Self {
        let mut result = Self::new(items);
        result.next_cursor = next_cursor;
        result
    }
}

impl Listing for ListResourcesResult {
    type Entry = ResourceEntry<Context>;
    type Item = Resource;
    fn registry(server: &ServerInner) -> &Registry<ResourceEntry<Context>> {
        &server.resources
    }
    fn item(entry: &ResourceEntry<Context>) -> Resource {
        entry.resource.clone()
    }
    fn cache_item(entry: &ResourceEntry<Context>) -> CacheItem {
        CacheItem::Resource(entry.resource.uri.clone())
    }
    fn from_page(items: Vec<Resource>, next_cursor: Option<String>) -> Self {
        Self {
            resources: items,
            next_cursor,
            ..Default::default()
        }
    }
}

impl Listing for ListResourceTemplatesResult {
    type Entry = TemplateEntry<Context>;
    type Item = ResourceTemplate;
    fn registry(server: &ServerInner) -> &Registry<TemplateEntry<Context>> {
        &server.templates
    }
    fn item(entry: &TemplateEntry<Context>) -> ResourceTemplate {
        entry.template.clone()
    }
    fn cache_item(entry: &TemplateEntry<Context>) -> CacheItem {
        CacheItem::Template(entry.template.uri_template.clone())
    }
    fn from_page(items: Vec<ResourceTemplate>, next_cursor: Option<String>) -> Self {
        Self {
            resource_templates: items,
            next_cursor,
            ..Default::default()
        }
    }
}

impl Listing for ListPromptsResult {
    type Entry = PromptEntry<Context>;
    type Item = Prompt;
    fn registry(server: &ServerInner) -> &Registry<PromptEntry<Context>> {
        &server.prompts
    }
    fn item(entry: &PromptEntry<Context>) -> Prompt {
        entry.prompt.clone()
    }
    fn cache_item(entry: &PromptEntry<Context>) -> CacheItem {
        CacheItem::Prompt(entry.prompt.name.clone())
    }
    fn from_page(items: Vec<Prompt>, next_cursor: Option<String>) -> Self {
        Self {
            prompts: items,
            next_cursor,
            ..Default::default()
        }
    }
}
