//! Serving skills (the `io.modelcontextprotocol/skills` extension) in both eras: `skills/list`,
//! `skills/get` and `resources/directory/read` from the server's [`SkillSet`], and each skill
//! file as a plain resource (so `resources/list` and `resources/read` serve them like any
//! other).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    BlobResourceContents, DIRECTORY_MIME_TYPE, GetSkillParams, GetSkillResult, ListSkillsResult,
    PaginatedParams, ReadDirectoryParams, ReadDirectoryResult, ReadResourceResult, Resource,
    TextResourceContents,
};
use tidewire_core::text::excerpt;
use tidewire_skills::{DirectoryChild, SkillFile, SkillSet};

use crate::registry::{ReadFn, ResourceEntry, page};
use crate::state::ServerState;

/// The skills of `server`, or `-32601` when it offers none (the extension is not declared, so
/// its methods are unknown).
fn skills<C>(server: &ServerState<C>, method: &str) -> Result<Arc<SkillSet>, ErrorObject> {
    server
        .skills
        .clone()
        .ok_or_else(|| ErrorObject::method_not_found(method))
}

/// `skills/list`: a page of entries (a skill is never split across pages).
pub(crate) fn list<C>(
    server: &ServerState<C>,
    params: &PaginatedParams,
) -> Result<ListSkillsResult, ErrorObject> {
    let set = skills(server, "skills/list")?;
    let (skills, next_cursor) = page(
        set.skills(),
        params.cursor.as_deref(),
        server.page_size,
        tidewire_skills::Skill::entry,
    )?;
    Ok(ListSkillsResult {
        skills,
        next_cursor,
        ..ListSkillsResult::default()
    })
}

/// `skills/get`: the entry of the skill whose `SKILL.md` is at `uri`, or `-32602`.
pub(crate) fn get<C>(
    server: &ServerState<C>,
    params: &GetSkillParams,
) -> Result<GetSkillResult, ErrorObject> {
    let set = skills(server, "skills/get")?;
    let skill = set.skill(&params.uri).ok_or_else(|| {
        ErrorObject::invalid_params(format!(
            "no skill has its SKILL.md at {:?}",
            excerpt(&params.uri)
        ))
    })?;
    Ok(GetSkillResult {
        skill: skill.entry(),
        meta: None,
        extra: Default::default(),
    })
}

/// `resources/directory/read`: a page of the folder's direct children, folders as
/// `inode/directory`; `-32602` for anything that is not a folder of a skill.
pub(crate) fn read_directory<C>(
    server: &ServerState<C>,
    params: &ReadDirectoryParams,
) -> Result<ReadDirectoryResult, ErrorObject> {
    let set = skills(server, "resources/directory/read")?;
    let children = set.directory(&params.uri).ok_or_else(|| {
        ErrorObject::invalid_params(format!(
            "{:?} is not a directory resource",
            excerpt(&params.uri)
        ))
    })?;
    let (resources, next_cursor) = page(
        &children,
        params.cursor.as_deref(),
        server.page_size,
        |child| match child {
            DirectoryChild::File(file) => file_resource(file),
            DirectoryChild::Folder(uri) => {
                let mut folder = Resource::new(*uri, uri.rsplit('/').next().unwrap_or(uri));
                folder.mime_type = Some(DIRECTORY_MIME_TYPE.to_owned());
                folder
            }
        },
    )?;
    Ok(ReadDirectoryResult {
        resources,
        next_cursor,
        ..ReadDirectoryResult::default()
    })
}

/// Every file of the set as a resource with its reader: a `SKILL.md` named and described by
/// its frontmatter, the others by their file name.
pub(crate) fn resources<C: 'static>(set: &SkillSet) -> Vec<ResourceEntry<C>> {
    let mut entries = Vec::new();
    for file in set.files() {
        let mut resource = file_resource(file);
        if let Some(skill) = set.skill(file.uri()) {
            resource.name = skill.name().to_owned();
            resource.description = Some(skill.description().to_owned());
        }
        let contents = contents(file);
        let handler: Arc<ReadFn<C>> = Arc::new(move |_uri, _vars, _ctx| {
            let result = contents.clone();
            Box::pin(async move { Ok(result) })
        });
        entries.push(ResourceEntry { resource, handler });
    }
    entries
}

/// A file as a resource in a listing.
fn file_resource(file: &SkillFile) -> Resource {
    let mut resource = Resource::new(file.uri(), file.name());
    resource.mime_type = Some(file.mime_type().to_owned());
    resource.size = Some(file.size());
    resource
}

/// What reading the file answers: its text when it is UTF-8 (the digest covers exactly these
/// bytes), its bytes in base64 otherwise.
fn contents(file: &SkillFile) -> ReadResourceResult {
    let part = match file.text() {
        Some(text) => TextResourceContents::new(file.uri(), text)
            .with_mime_type(file.mime_type())
            .into(),
        None => BlobResourceContents::new(file.uri(), STANDARD.encode(file.bytes()))
            .with_mime_type(file.mime_type())
            .into(),
    };
    ReadResourceResult::new(vec![part])
}
