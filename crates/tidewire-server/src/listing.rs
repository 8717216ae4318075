//! The four lists (tools, resources, resource templates, prompts): one generic handler, paged
//! from the server's registries, for both eras.

use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedParams, Prompt, Resource, ResourceTemplate, Tool,
};

use crate::registry::{PromptEntry, Registry, ResourceEntry, TemplateEntry, ToolEntry};
use crate::server::Inner;
use crate::stateless::CacheItem;

/// A list result, and where its items come from.
pub(crate) trait Listing: serde::Serialize + Sized {
    /// The registry entry an item is read from.
    type Entry;
    /// One item of the list.
    type Item;
    /// The registry of the list.
    fn registry(server: &Inner) -> &Registry<Self::Entry>;
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
pub(crate) fn list<L: Listing>(server: &Inner, params: &PaginatedParams) -> Result<L, ErrorObject> {
    let (items, next) =
        L::registry(server).page(params.cursor.as_deref(), server.page_size, L::item)?;
    Ok(L::from_page(items, next))
}

impl Listing for ListToolsResult {
    type Entry = ToolEntry;
    type Item = Tool;
    fn registry(server: &Inner) -> &Registry<ToolEntry> {
        &server.tools
    }
    fn item(entry: &ToolEntry) -> Tool {
        entry.tool.clone()
    }
    fn cache_item(entry: &ToolEntry) -> CacheItem {
        CacheItem::Tool(entry.tool.name.clone())
    }
    fn from_page(items: Vec<Tool>, next_cursor: Option<String>) -> Self {
        let mut result = Self::new(items);
        result.next_cursor = next_cursor;
        result
    }
}

impl Listing for ListResourcesResult {
    type Entry = ResourceEntry;
    type Item = Resource;
    fn registry(server: &Inner) -> &Registry<ResourceEntry> {
        &server.resources
    }
    fn item(entry: &ResourceEntry) -> Resource {
        entry.resource.clone()
    }
    fn cache_item(entry: &ResourceEntry) -> CacheItem {
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
    type Entry = TemplateEntry;
    type Item = ResourceTemplate;
    fn registry(server: &Inner) -> &Registry<TemplateEntry> {
        &server.templates
    }
    fn item(entry: &TemplateEntry) -> ResourceTemplate {
        entry.template.clone()
    }
    fn cache_item(entry: &TemplateEntry) -> CacheItem {
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
    type Entry = PromptEntry;
    type Item = Prompt;
    fn registry(server: &Inner) -> &Registry<PromptEntry> {
        &server.prompts
    }
    fn item(entry: &PromptEntry) -> Prompt {
        entry.prompt.clone()
    }
    fn cache_item(entry: &PromptEntry) -> CacheItem {
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
