//! Schema conformance: every request, result and notification tidewire can build, checked
//! against the official JSON schema of each handshake revision.
//!
//! The schemas are read from `$TIDEWIRE_SPEC_DIR/<revision>/schema.json`. Without that variable
//! the test only prints a note and passes, so a plain `cargo test` works anywhere; CI sets it.
//!
//! For each corpus entry and each revision whose schema defines the entry's type, the payload is
//! serialised from tidewire's types, adapted with `schema::compat::adapt_outgoing` for that
//! revision, wrapped in a JSON-RPC message and validated against the type's definition, the
//! direction union (`ClientRequest`, `ServerResult`, …) and the generic JSON-RPC definition. The
//! test also checks that every member of the direction unions of every revision is covered by
//! the corpus. All problems are collected and reported together.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use tidewire_core::ProtocolVersion;
use tidewire_core::ProtocolVersion::{V2024_11_05, V2025_06_18, V2025_11_25};
use tidewire_core::jsonrpc::RequestId;
use tidewire_core::schema::compat::{PayloadKind, adapt_outgoing};
use tidewire_core::schema::*;

const CLIENT_REQ: &str = "ClientRequest";
const SERVER_REQ: &str = "ServerRequest";
const CLIENT_NOTE: &str = "ClientNotification";
const SERVER_NOTE: &str = "ServerNotification";
const CLIENT_RES: &str = "ClientResult";
const SERVER_RES: &str = "ServerResult";

/// What kind of message a corpus entry is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Shape {
    Request,
    Notification,
    Result,
}

/// One message to validate.
struct Case {
    /// The schema definition of the whole message (requests and notifications) or of the result.
    definition: &'static str,
    /// The direction union the message must belong to.
    union: &'static str,
    method: &'static str,
    shape: Shape,
    payload: Value,
    /// The oldest revision the payload is meant for: it uses features that compat cannot
    /// express in older revisions (they need capabilities that only exist from then on).
    since: ProtocolVersion,
}

impl Case {
    fn label(&self, index: usize) -> String {
        format!("#{index} {} {:?}", self.method, self.shape)
    }
}

fn to_json<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("corpus values serialise")
}

#[derive(Default)]
struct Corpus(Vec<Case>);

impl Corpus {
    fn add<T: Serialize>(
        &mut self,
        (method, shape): (&'static str, Shape),
        since: ProtocolVersion,
        union: &'static str,
        definition: &'static str,
        payload: &T,
    ) {
        let payload = to_json(payload);
        self.0.push(Case {
            definition,
            union,
            method,
            shape,
            payload,
            since,
        });
    }

    fn req<R: RequestType>(&mut self, union: &'static str, def: &'static str, p: &R::Params) {
        self.add((R::METHOD, Shape::Request), V2024_11_05, union, def, p);
    }

    fn req_since<R: RequestType>(
        &mut self,
        since: ProtocolVersion,
        def: &'static str,
        p: &R::Params,
    ) {
        let union = if def.starts_with("Elicit") || def.starts_with("CreateMessage") {
            SERVER_REQ
        } else {
            CLIENT_REQ
        };
        self.add((R::METHOD, Shape::Request), since, union, def, p);
    }

    fn res<R: RequestType>(&mut self, union: &'static str, def: &'static str, r: &R::Result) {
        self.add((R::METHOD, Shape::Result), V2024_11_05, union, def, r);
    }

    fn res_since<R: RequestType>(
        &mut self,
        since: ProtocolVersion,
        def: &'static str,
        r: &R::Result,
    ) {
        self.add((R::METHOD, Shape::Result), since, CLIENT_RES, def, r);
    }

    fn note<N: NotificationType>(&mut self, union: &'static str, def: &'static str, p: &N::Params) {
        self.add((N::METHOD, Shape::Notification), V2024_11_05, union, def, p);
    }
}

// ---------------------------------------------------------------------------------------------
// Realistic values with the optional members filled in.
// ---------------------------------------------------------------------------------------------

fn token_meta(token: impl Into<RequestId>) -> Option<Meta> {
    let mut meta = Meta::with_progress_token(token);
    meta.insert("com.example/trace".into(), json!("t-1"));
    Some(meta)
}

fn meta() -> Option<Meta> {
    let mut meta = Meta::new();
    meta.insert("com.example/origin".into(), json!("corpus"));
    Some(meta)
}

fn obj() -> Option<JsonObject> {
    Some(JsonObject::new())
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn icon() -> Icon {
    let mut icon = Icon::new("https://example.com/icon-48.png");
    icon.mime_type = Some("image/png".into());
    icon.sizes = strings(&["48x48"]);
    icon.theme = Some(IconTheme::Light);
    icon
}

fn annotations() -> Annotations {
    let mut a = Annotations::for_audience([Role::User, Role::Assistant]).with_priority(0.8);
    a.last_modified = Some("2025-06-01T12:00:00Z".into());
    a
}

fn implementation(name: &str) -> Implementation {
    let mut imp = Implementation::new(name, "1.2.3").with_title(format!("{name} (tidewire)"));
    imp.description = Some("A corpus implementation".into());
    imp.icons = vec![icon()];
    imp.website_url = Some("https://example.com".into());
    imp
}

fn experimental(name: &str) -> Option<JsonObject> {
    let mut map = JsonObject::new();
    map.insert(name.into(), json!({"level": 2}));
    Some(map)
}

fn client_capabilities() -> ClientCapabilities {
    let sampling = TaskSamplingRequests {
        create_message: obj(),
        ..Default::default()
    };
    let elicitation = TaskElicitationRequests {
        create: obj(),
        ..Default::default()
    };
    let requests = ClientTaskRequests {
        sampling: Some(sampling),
        elicitation: Some(elicitation),
        ..Default::default()
    };
    ClientCapabilities {
        experimental: experimental("com.example/feature"),
        roots: Some(RootsCapability {
            list_changed: Some(true),
            ..Default::default()
        }),
        sampling: Some(SamplingCapability {
            context: obj(),
            tools: obj(),
            ..Default::default()
        }),
        elicitation: Some(ElicitationCapability {
            form: obj(),
            url: obj(),
            ..Default::default()
        }),
        tasks: Some(ClientTasksCapability {
            list: obj(),
            cancel: obj(),
            requests: Some(requests),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn server_capabilities() -> ServerCapabilities {
    let mut caps = ServerCapabilities::default()
        .with_tools(true)
        .with_prompts(true)
        .with_resources(true, true)
        .with_logging()
        .with_completions();
    let tools = TaskToolsRequests {
        call: obj(),
        ..Default::default()
    };
    let requests = ServerTaskRequests {
        tools: Some(tools),
        ..Default::default()
    };
    caps.tasks = Some(ServerTasksCapability {
        list: obj(),
        cancel: obj(),
        requests: Some(requests),
        ..Default::default()
    });
    caps.experimental = experimental("com.example/streaming");
    caps
}

fn tool() -> Tool {
    let input = json!({
        "type": "object",
        "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"]
    });
    let output = json!({
        "type": "object",
        "properties": {"temperature": {"type": "number"}},
        "required": ["temperature"]
    });
    let hints = ToolAnnotations {
        title: Some("Weather lookup".into()),
        read_only_hint: Some(true),
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(true),
    };
    let mut tool = Tool::new("get_weather", "Current weather for a city", input)
        .with_title("Weather")
        .with_output_schema(output)
        .with_annotations(hints);
    tool.execution = Some(ToolExecution {
        task_support: Some(TaskSupport::Optional),
    });
    tool.icons = vec![icon()];
    tool.meta = meta();
    tool
}

fn resource_link() -> ResourceLink {
    let mut link = ResourceLink::new("file:///project/src/main.rs", "main.rs");
    link.title = Some("Entry point".into());
    link.description = Some("The program's entry point".into());
    link.mime_type = Some("text/x-rust".into());
    link.size = Some(2048);
    link.annotations = Some(annotations());
    link.icons = vec![icon()];
    link.meta = meta();
    link
}

/// One block of every kind, with annotations and `_meta`.
fn all_blocks() -> Vec<ContentBlock> {
    let mut text = TextContent::new("It is 21 °C in Lisbon.");
    text.annotations = Some(annotations());
    text.meta = meta();
    let mut image = ImageContent::new("iVBORw0KGgo=", "image/png");
    image.annotations = Some(annotations());
    let mut audio = AudioContent::new("UklGRiQAAABXQVZF", "audio/wav");
    audio.annotations = Some(annotations());
    audio.meta = meta();
    let readme = TextResourceContents::new("file:///project/README.md", "# Project");
    let mut embedded = EmbeddedResource::new(readme.with_mime_type("text/markdown"));
    embedded.annotations = Some(annotations());
    embedded.meta = meta();
    let logo = BlobResourceContents::new("file:///project/logo.png", "iVBORw0KGgo=");
    vec![
        ContentBlock::Text(text),
        ContentBlock::Image(image),
        ContentBlock::Audio(audio),
        ContentBlock::ResourceLink(resource_link()),
        ContentBlock::Resource(embedded),
        ContentBlock::resource(logo.with_mime_type("image/png")),
    ]
}

fn task(status: TaskStatus) -> Task {
    let mut task = Task::new("task-42", status, "2025-11-25T10:00:00Z");
    task.status_message = Some("Fetching forecasts".into());
    task.last_updated_at = "2025-11-25T10:00:05Z".into();
    task.ttl = Some(60_000);
    task.poll_interval = Some(1_000);
    task
}

fn sampling_params() -> CreateMessageParams {
    let blocks = vec![
        SamplingContent::text("What is in this picture and this recording?"),
        SamplingContent::Image(ImageContent::new("iVBORw0KGgo=", "image/png")),
        SamplingContent::Audio(AudioContent::new("UklGRiQAAABXQVZF", "audio/wav")),
    ];
    let mut first = SamplingMessage::new(Role::User, OneOrMany::Many(blocks));
    first.meta = meta();
    let messages = vec![first, SamplingMessage::assistant_text("A cat purring.")];
    let mut p = CreateMessageParams::new(messages, 512);
    p.model_preferences = Some(ModelPreferences {
        hints: vec![ModelHint {
            name: Some("sonnet".into()),
        }],
        cost_priority: Some(0.3),
        speed_priority: Some(0.5),
        intelligence_priority: Some(0.9),
    });
    p.system_prompt = Some("You are a careful assistant.".into());
    p.include_context = Some(IncludeContext::ThisServer);
    p.temperature = Some(0.7);
    p.stop_sequences = strings(&["\n\nUser:"]);
    p.metadata = experimental("provider");
    p.meta = token_meta(9);
    p
}

fn tool_use() -> SamplingContent {
    let mut input = JsonObject::new();
    input.insert("city".into(), json!("Lisbon"));
    let (id, name, meta) = ("call-1".into(), "get_weather".into(), meta());
    SamplingContent::ToolUse(ToolUseContent {
        id,
        name,
        input,
        meta,
    })
}

fn sampling_params_with_tools() -> CreateMessageParams {
    let mut structured = JsonObject::new();
    structured.insert("temperature".into(), json!(21));
    let result = SamplingContent::ToolResult(ToolResultContent {
        tool_use_id: "call-1".into(),
        content: vec![ContentBlock::text("21 °C")],
        structured_content: Some(structured),
        is_error: Some(false),
        meta: None,
    });
    let messages = vec![
        SamplingMessage::user_text("Weather in Lisbon?"),
        SamplingMessage::new(Role::Assistant, OneOrMany::Many(vec![tool_use()])),
        SamplingMessage::new(Role::User, OneOrMany::Many(vec![result])),
    ];
    let mut p = CreateMessageParams::new(messages, 256);
    p.tools = vec![tool()];
    p.tool_choice = Some(ToolChoice {
        mode: Some(ToolChoiceMode::Auto),
    });
    p.task = Some(TaskMetadata { ttl: Some(30_000) });
    p
}

fn basic_form() -> ElicitationSchema {
    let name = StringSchema {
        title: Some("Name".into()),
        description: Some("Your full name".into()),
        min_length: Some(1),
        max_length: Some(100),
        ..Default::default()
    };
    let email = StringSchema {
        format: Some(StringFormat::Email),
        ..Default::default()
    };
    let age = NumberSchema {
        kind: NumberKind::Integer,
        title: Some("Age".into()),
        minimum: Some(0.0),
        maximum: Some(150.0),
        ..Default::default()
    };
    let plan = LegacyTitledEnumSchema {
        values: strings(&["free", "pro"]),
        enum_names: strings(&["Free", "Pro"]),
        ..Default::default()
    };
    ElicitationSchema::new()
        .property("name", PrimitiveSchema::String(name), true)
        .property("email", PrimitiveSchema::String(email), true)
        .property("age", PrimitiveSchema::Number(age), false)
        .property(
            "newsletter",
            PrimitiveSchema::boolean().with_title("News"),
            false,
        )
        .property(
            "size",
            PrimitiveSchema::single_select(["s", "m", "l"]),
            false,
        )
        .property("plan", PrimitiveSchema::LegacyTitledEnum(plan), false)
}

fn full_form() -> ElicitationSchema {
    let color = TitledSingleSelectEnumSchema {
        title: Some("Colour".into()),
        one_of: vec![EnumOption::new("r", "Red"), EnumOption::new("g", "Green")],
        default: Some("g".into()),
        ..Default::default()
    };
    let tags = UntitledMultiSelectEnumSchema {
        min_items: Some(1),
        max_items: Some(2),
        items: UntitledEnumItems {
            values: strings(&["a", "b", "c"]),
        },
        default: strings(&["a"]),
        ..Default::default()
    };
    let pets = [EnumOption::new("cat", "Cat"), EnumOption::new("dog", "Dog")];
    let score = NumberSchema {
        default: Some(0.5),
        ..Default::default()
    };
    let mut form = basic_form()
        .property("color", PrimitiveSchema::TitledSingleSelect(color), false)
        .property("tags", PrimitiveSchema::MultiSelect(tags), false)
        .property("pets", PrimitiveSchema::titled_multi_select(pets), false)
        .property("score", PrimitiveSchema::Number(score), false);
    form.schema = Some("https://json-schema.org/draft/2020-12/schema".into());
    form
}

// ---------------------------------------------------------------------------------------------
// The corpus.
// ---------------------------------------------------------------------------------------------

fn client_requests(c: &mut Corpus) {
    let mut init = InitializeParams::new(V2025_11_25, client_capabilities(), implementation("c"));
    init.meta = meta();
    c.req::<Initialize>(CLIENT_REQ, "InitializeRequest", &init);
    let mut ping = EmptyParams::new();
    ping.set_progress_token("ping-1");
    c.req::<Ping>(CLIENT_REQ, "PingRequest", &ping);
    let mut page = PaginatedParams::after("cursor-2");
    page.meta = token_meta(1);
    c.req::<ListResources>(CLIENT_REQ, "ListResourcesRequest", &page);
    let first = PaginatedParams::first_page();
    c.req::<ListResourceTemplates>(CLIENT_REQ, "ListResourceTemplatesRequest", &first);
    let mut read = ReadResourceParams::new("file:///project/README.md");
    read.meta = token_meta("read-1");
    c.req::<ReadResource>(CLIENT_REQ, "ReadResourceRequest", &read);
    let mut sub = SubscribeParams::new("file:///project/README.md");
    sub.meta = meta();
    c.req::<Subscribe>(CLIENT_REQ, "SubscribeRequest", &sub);
    let unsub = UnsubscribeParams::new("file:///project/README.md");
    c.req::<Unsubscribe>(CLIENT_REQ, "UnsubscribeRequest", &unsub);
    c.req::<ListPrompts>(CLIENT_REQ, "ListPromptsRequest", &page);
    let mut prompt = GetPromptParams::new("code_review").with_argument("language", "rust");
    prompt.meta = token_meta(2);
    c.req::<GetPrompt>(CLIENT_REQ, "GetPromptRequest", &prompt);
    c.req::<ListTools>(CLIENT_REQ, "ListToolsRequest", &page);
    let args = json!({"city": "Lisbon", "units": "c"});
    let mut call = CallToolParams::new("get_weather").with_arguments(args);
    call.meta = token_meta(3);
    c.req::<CallTool>(CLIENT_REQ, "CallToolRequest", &call);
    call.task = Some(TaskMetadata { ttl: Some(60_000) });
    c.req_since::<CallTool>(V2025_11_25, "CallToolRequest", &call);
    let mut level = SetLevelParams::new(LoggingLevel::Warning);
    level.meta = meta();
    c.req::<SetLevel>(CLIENT_REQ, "SetLevelRequest", &level);
    let title = Some("Code review".into());
    let reference = CompletionReference::Prompt(PromptReference {
        name: "code_review".into(),
        title,
    });
    let mut complete = CompleteParams::new(reference, "language", "ru");
    let resolved = BTreeMap::from([("framework".to_owned(), "tokio".to_owned())]);
    complete.context = Some(CompletionContext {
        arguments: Some(resolved),
    });
    complete.meta = token_meta(4);
    c.req::<Complete>(CLIENT_REQ, "CompleteRequest", &complete);
    let reference = CompletionReference::resource("file:///project/{path}");
    c.req::<Complete>(
        CLIENT_REQ,
        "CompleteRequest",
        &CompleteParams::new(reference, "path", "src/"),
    );
}

/// Task requests and results exist in both directions.
fn tasks(c: &mut Corpus) {
    for (req, res) in [(CLIENT_REQ, SERVER_RES), (SERVER_REQ, CLIENT_RES)] {
        let mut id = TaskIdParams::new("task-42");
        id.meta = meta();
        c.req::<GetTask>(req, "GetTaskRequest", &id);
        c.req::<GetTaskPayload>(req, "GetTaskPayloadRequest", &id);
        c.req::<ListTasks>(req, "ListTasksRequest", &PaginatedParams::after("cursor-7"));
        c.req::<CancelTask>(req, "CancelTaskRequest", &id);

        let mut got = TaskResult::from(task(TaskStatus::Working));
        got.meta = meta();
        c.res::<GetTask>(res, "GetTaskResult", &got);
        let underlying = CallToolResult::text("21 °C");
        let mut payload = GetTaskPayloadResult::from_result(&underlying).expect("payload");
        payload
            .meta
            .get_or_insert_with(Meta::new)
            .set_related_task("task-42");
        c.res::<GetTaskPayload>(res, "GetTaskPayloadResult", &payload);
        let list = ListTasksResult {
            tasks: vec![task(TaskStatus::Completed), task(TaskStatus::InputRequired)],
            next_cursor: Some("cursor-3".into()),
            meta: meta(),
            ..Default::default()
        };
        c.res::<ListTasks>(res, "ListTasksResult", &list);
        let mut cancelled = task(TaskStatus::Cancelled);
        cancelled.ttl = None;
        c.res::<CancelTask>(res, "CancelTaskResult", &cancelled.into());
    }
}

fn server_requests(c: &mut Corpus) {
    let mut ping = EmptyParams::new();
    ping.set_progress_token(11);
    c.req::<Ping>(SERVER_REQ, "PingRequest", &ping);
    c.req::<CreateMessage>(SERVER_REQ, "CreateMessageRequest", &sampling_params());
    let with_tools = sampling_params_with_tools();
    c.req_since::<CreateMessage>(V2025_11_25, "CreateMessageRequest", &with_tools);
    let mut roots = EmptyParams::new();
    roots.meta = meta();
    c.req::<ListRoots>(SERVER_REQ, "ListRootsRequest", &roots);
    let mut form = ElicitParams::form("Please fill in your profile", basic_form());
    if let ElicitParams::Form(f) = &mut form {
        f.meta = token_meta("elicit-1");
    }
    c.req::<Elicit>(SERVER_REQ, "ElicitRequest", &form);
    let mut full = ElicitParams::form("Please tell us more", full_form());
    if let ElicitParams::Form(f) = &mut full {
        f.task = Some(TaskMetadata { ttl: Some(120_000) });
    }
    c.req_since::<Elicit>(V2025_11_25, "ElicitRequest", &full);
    let url = "https://auth.example.com/login?session=abc";
    let url = ElicitParams::url("Sign in to continue", url, "elicit-7");
    c.req_since::<Elicit>(V2025_11_25, "ElicitRequest", &url);
}

fn notifications(c: &mut Corpus) {
    let why = Some("User pressed stop".to_owned());
    let cancelled = CancelledNotificationParams::new(7, why);
    c.note::<CancelledNotification>(CLIENT_NOTE, "CancelledNotification", &cancelled);
    let empty = EmptyParams::new();
    c.note::<InitializedNotification>(CLIENT_NOTE, "InitializedNotification", &empty);
    let mut progress = ProgressNotificationParams::new("read-1", 50.0, Some(100.0));
    progress = progress.with_message("Halfway there");
    progress.meta = meta();
    c.note::<ProgressNotification>(CLIENT_NOTE, "ProgressNotification", &progress);
    c.note::<RootsListChangedNotification>(CLIENT_NOTE, "RootsListChangedNotification", &empty);
    let mut status = TaskStatusNotificationParams::from(task(TaskStatus::Completed));
    status.meta = meta();
    c.note::<TaskStatusNotification>(CLIENT_NOTE, "TaskStatusNotification", &status);

    let cancelled = CancelledNotificationParams::new("req-9", None);
    c.note::<CancelledNotification>(SERVER_NOTE, "CancelledNotification", &cancelled);
    c.note::<ProgressNotification>(SERVER_NOTE, "ProgressNotification", &progress);
    let def = "ResourceListChangedNotification";
    c.note::<ResourceListChangedNotification>(SERVER_NOTE, def, &empty);
    let mut updated = ResourceUpdatedNotificationParams::new("file:///project/README.md");
    updated.meta = meta();
    c.note::<ResourceUpdatedNotification>(SERVER_NOTE, "ResourceUpdatedNotification", &updated);
    let def = "PromptListChangedNotification";
    c.note::<PromptListChangedNotification>(SERVER_NOTE, def, &empty);
    let mut changed = EmptyParams::new();
    changed.meta = meta();
    c.note::<ToolListChangedNotification>(SERVER_NOTE, "ToolListChangedNotification", &changed);
    let data = json!({"error": "disk full", "free": 0});
    let log = LoggingMessageParams::new(LoggingLevel::Error, data).with_logger("storage");
    c.note::<LoggingMessageNotification>(SERVER_NOTE, "LoggingMessageNotification", &log);
    let done = ElicitationCompleteParams::new("elicit-7");
    let def = "ElicitationCompleteNotification";
    c.note::<ElicitationCompleteNotification>(SERVER_NOTE, def, &done);
    c.note::<TaskStatusNotification>(SERVER_NOTE, "TaskStatusNotification", &status);
}

fn server_results(c: &mut Corpus) {
    let mut init = InitializeResult::new(V2025_11_25, server_capabilities(), implementation("s"));
    init.instructions = Some("Use get_weather for forecasts.".into());
    init.meta = meta();
    c.res::<Initialize>(SERVER_RES, "InitializeResult", &init);
    let empty = EmptyResult::new();
    c.res::<Ping>(SERVER_RES, "EmptyResult", &empty);
    let mut resource = Resource::new("file:///project/README.md", "README.md")
        .with_description("Project overview")
        .with_mime_type("text/markdown");
    resource.title = Some("Read me".into());
    resource.size = Some(1024);
    resource.annotations = Some(annotations());
    resource.icons = vec![icon()];
    resource.meta = meta();
    let list = ListResourcesResult {
        resources: vec![
            resource,
            Resource::new("file:///project/Cargo.toml", "Cargo.toml"),
        ],
        next_cursor: Some("cursor-3".into()),
        meta: meta(),
        ..Default::default()
    };
    c.res::<ListResources>(SERVER_RES, "ListResourcesResult", &list);
    let mut template = ResourceTemplate::new("file:///project/{path}", "project-files");
    template.title = Some("Project files".into());
    template.description = Some("Any file in the project".into());
    template.mime_type = Some("text/plain".into());
    template.annotations = Some(annotations());
    template.icons = vec![icon()];
    template.meta = meta();
    let templates = ListResourceTemplatesResult {
        resource_templates: vec![template],
        meta: meta(),
        ..Default::default()
    };
    c.res::<ListResourceTemplates>(SERVER_RES, "ListResourceTemplatesResult", &templates);
    let mut text = TextResourceContents::new("file:///project/README.md", "# Project");
    text.meta = meta();
    let logo = BlobResourceContents::new("file:///project/logo.png", "iVBORw0KGgo=");
    let contents = vec![text.into(), logo.with_mime_type("image/png").into()];
    let mut read = ReadResourceResult::new(contents);
    read.meta = meta();
    c.res::<ReadResource>(SERVER_RES, "ReadResourceResult", &read);
    c.res::<Subscribe>(SERVER_RES, "EmptyResult", &empty);
    c.res::<Unsubscribe>(SERVER_RES, "EmptyResult", &empty);
    let argument = PromptArgument {
        name: "language".into(),
        title: Some("Language".into()),
        description: Some("The programming language".into()),
        required: Some(true),
    };
    let mut prompt = Prompt::new("code_review", "Review a piece of code").with_argument(argument);
    prompt.title = Some("Code review".into());
    prompt.icons = vec![icon()];
    prompt.meta = meta();
    let prompts = ListPromptsResult {
        prompts: vec![prompt],
        next_cursor: Some("cursor-9".into()),
        meta: meta(),
        ..Default::default()
    };
    c.res::<ListPrompts>(SERVER_RES, "ListPromptsResult", &prompts);
    let mut messages: Vec<PromptMessage> = all_blocks()
        .into_iter()
        .map(|b| PromptMessage::new(Role::User, b))
        .collect();
    messages.push(PromptMessage::assistant_text("Looks good to me."));
    let mut got = GetPromptResult::new(messages);
    got.description = Some("A code review conversation".into());
    got.meta = meta();
    c.res::<GetPrompt>(SERVER_RES, "GetPromptResult", &got);
    let noop = Tool::new("noop", "Does nothing", json!({"type": "object"}));
    let mut tools = ListToolsResult::new(vec![tool(), noop]);
    tools.next_cursor = Some("cursor-5".into());
    tools.meta = meta();
    c.res::<ListTools>(SERVER_RES, "ListToolsResult", &tools);
    let mut call = CallToolResult::success(all_blocks());
    call.structured_content = Some(json!({"temperature": 21}));
    call.is_error = Some(false);
    call.meta = meta();
    c.res::<CallTool>(SERVER_RES, "CallToolResult", &call);
    let mut structured_only = CallToolResult::success(vec![]);
    structured_only.structured_content = Some(json!({"temperature": 19.5}));
    c.res::<CallTool>(SERVER_RES, "CallToolResult", &structured_only);
    let failed = CallToolResult::error_text("Unknown city: Atlantis");
    c.res::<CallTool>(SERVER_RES, "CallToolResult", &failed);
    let mut created = CreateTaskResult::from(task(TaskStatus::Working));
    created.meta = meta();
    let as_task = (CallTool::METHOD, Shape::Result);
    c.add(
        as_task,
        V2025_11_25,
        SERVER_RES,
        "CreateTaskResult",
        &created,
    );
    c.res::<SetLevel>(SERVER_RES, "EmptyResult", &empty);
    let mut completion = CompleteResult::new((0..150).map(|i| format!("value-{i}")).collect());
    completion.meta = meta();
    c.res::<Complete>(SERVER_RES, "CompleteResult", &completion);
}

fn client_results(c: &mut Corpus) {
    c.res::<Ping>(CLIENT_RES, "EmptyResult", &EmptyResult::new());
    let mut sampled = CreateMessageResult::text("example-model-1", "A cat.");
    let texts = vec![
        SamplingContent::text("A cat"),
        SamplingContent::text("purring loudly."),
    ];
    sampled.content = OneOrMany::Many(texts);
    sampled.meta = meta();
    c.res::<CreateMessage>(CLIENT_RES, "CreateMessageResult", &sampled);
    let mut audio = CreateMessageResult::text("example-model-1", "");
    audio.content = SamplingContent::Audio(AudioContent::new("UklGRiQA", "audio/wav")).into();
    c.res::<CreateMessage>(CLIENT_RES, "CreateMessageResult", &audio);
    let mut tool_call = CreateMessageResult::text("example-model-1", "");
    tool_call.content = OneOrMany::Many(vec![SamplingContent::text("Let me check."), tool_use()]);
    tool_call.stop_reason = Some(StopReason::ToolUse);
    c.res_since::<CreateMessage>(V2025_11_25, "CreateMessageResult", &tool_call);
    let project = Root::new("file:///home/user/project").with_name("project");
    let mut roots = ListRootsResult::new(vec![project, Root::new("file:///home/user/notes")]);
    roots.roots[1].meta = meta();
    roots.meta = meta();
    c.res::<ListRoots>(CLIENT_RES, "ListRootsResult", &roots);
    let mut accepted = ElicitResult::accept(BTreeMap::from([
        ("name".to_owned(), ElicitValue::from("Ana")),
        ("email".to_owned(), ElicitValue::from("ana@example.com")),
        ("age".to_owned(), ElicitValue::from(34)),
        ("newsletter".to_owned(), ElicitValue::from(true)),
    ]));
    accepted.meta = meta();
    c.res_since::<Elicit>(V2025_06_18, "ElicitResult", &accepted);
    let tags = ElicitValue::from(strings(&["a", "b"]));
    let with_list = ElicitResult::accept(BTreeMap::from([("tags".to_owned(), tags)]));
    c.res_since::<Elicit>(V2025_11_25, "ElicitResult", &with_list);
    c.res_since::<Elicit>(V2025_06_18, "ElicitResult", &ElicitResult::decline());
    c.res_since::<Elicit>(V2025_06_18, "ElicitResult", &ElicitResult::cancel());
}

fn corpus() -> Corpus {
    let mut c = Corpus::default();
    client_requests(&mut c);
    tasks(&mut c);
    server_requests(&mut c);
    notifications(&mut c);
    server_results(&mut c);
    client_results(&mut c);
    c
}

// ---------------------------------------------------------------------------------------------
// Validation.
// ---------------------------------------------------------------------------------------------

/// One revision's schema and the validators built from it.
struct Revision {
    version: ProtocolVersion,
    document: Value,
    resource: jsonschema::Resource,
    validators: HashMap<&'static str, Result<jsonschema::Validator, String>>,
}

impl Revision {
    fn load(dir: &Path, version: ProtocolVersion) -> Result<Self, String> {
        let path = dir.join(version.as_str()).join("schema.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let document: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let resource = jsonschema::Resource::from_contents(document.clone())
            .map_err(|e| format!("{} is not a usable schema: {e}", path.display()))?;
        Ok(Self {
            version,
            document,
            resource,
            validators: HashMap::new(),
        })
    }

    /// `definitions` (draft-07 revisions) or `$defs` (2020-12 revisions).
    fn definitions_key(&self) -> &'static str {
        if self.document.get("$defs").is_some() {
            "$defs"
        } else {
            "definitions"
        }
    }

    fn definitions(&self) -> Option<&serde_json::Map<String, Value>> {
        self.document
            .get(self.definitions_key())
            .and_then(Value::as_object)
    }

    fn has(&self, definition: &str) -> bool {
        self.definitions()
            .is_some_and(|d| d.contains_key(definition))
    }

    /// The definitions a direction union (`ClientRequest`, …) lists.
    fn union_members(&self, union: &str) -> Vec<String> {
        let key = self.definitions_key();
        let prefix = format!("#/{key}/");
        self.definitions()
            .and_then(|d| d.get(union))
            .and_then(|u| u.get("anyOf"))
            .and_then(Value::as_array)
            .map(|members| {
                members
                    .iter()
                    .filter_map(|m| m.get("$ref").and_then(Value::as_str))
                    .filter_map(|r| r.strip_prefix(prefix.as_str()))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Validates `instance` against `definition`; returns the error messages.
    fn check(&mut self, definition: &'static str, instance: &Value) -> Vec<String> {
        let uri = format!("urn:tidewire:mcp-schema:{}", self.version);
        let key = self.definitions_key();
        let draft = self.document.get("$schema").cloned().unwrap_or(Value::Null);
        let resource = &self.resource;
        let validator = self.validators.entry(definition).or_insert_with(|| {
            let wrapper = json!({"$schema": draft, "$ref": format!("{uri}#/{key}/{definition}")});
            jsonschema::options()
                .should_validate_formats(true)
                .with_resource(uri.clone(), resource.clone())
                .build(&wrapper)
                .map_err(|e| format!("cannot compile a validator for {definition}: {e}"))
        });
        match validator {
            Err(e) => vec![e.clone()],
            Ok(v) => v
                .iter_errors(instance)
                .map(|e| {
                    let at = e.instance_path.to_string();
                    let at = if at.is_empty() {
                        "(root)".to_owned()
                    } else {
                        at
                    };
                    format!("at {at}: {e}")
                })
                .collect(),
        }
    }
}

fn envelope(case: &Case, payload: &Value, index: usize) -> Value {
    // Alternate integer and string ids, since both are valid.
    let id = if index.is_multiple_of(2) {
        json!(index)
    } else {
        json!(format!("req-{index}"))
    };
    let method = case.method;
    match case.shape {
        Shape::Request => json!({"jsonrpc": "2.0", "id": id, "method": method, "params": payload}),
        Shape::Notification => json!({"jsonrpc": "2.0", "method": method, "params": payload}),
        Shape::Result => json!({"jsonrpc": "2.0", "id": id, "result": payload}),
    }
}

const UNIONS: [&str; 6] = [
    CLIENT_REQ,
    SERVER_REQ,
    CLIENT_NOTE,
    SERVER_NOTE,
    CLIENT_RES,
    SERVER_RES,
];

#[test]
fn corpus_conforms_to_every_revision() {
    let Some(dir) = std::env::var_os("TIDEWIRE_SPEC_DIR").map(PathBuf::from) else {
        tidewire_tests::external::skip("TIDEWIRE_SPEC_DIR is not set (see .ci/run)");
        return;
    };
    let corpus = corpus();
    let mut failures: Vec<String> = Vec::new();
    let mut checked = 0usize;
    let mut known: BTreeSet<&str> = BTreeSet::new();

    for version in ProtocolVersion::HANDSHAKE {
        let mut rev = match Revision::load(&dir, version) {
            Ok(rev) => rev,
            Err(e) => {
                failures.push(format!("[{version}] {e}"));
                continue;
            }
        };
        let mut covered: BTreeSet<&str> = BTreeSet::new();
        for (index, case) in corpus.0.iter().enumerate() {
            if !rev.has(case.definition) {
                continue; // the method does not exist in this revision
            }
            known.insert(case.definition);
            if version < case.since {
                continue;
            }
            covered.insert(case.definition);
            let (kind, generic) = match case.shape {
                Shape::Result => (PayloadKind::Result, "JSONRPCResponse"),
                Shape::Request | Shape::Notification => (PayloadKind::Params, "JSONRPCMessage"),
            };
            let mut payload = case.payload.clone();
            adapt_outgoing(version, case.method, kind, &mut payload);
            let message = envelope(case, &payload, index);
            let whole = if case.shape == Shape::Result {
                &payload
            } else {
                &message
            };
            let targets = [
                (case.definition, whole),
                (case.union, whole),
                (generic, &message),
            ];
            for (definition, instance) in targets {
                checked += 1;
                for error in rev.check(definition, instance) {
                    let label = case.label(index);
                    failures.push(format!(
                        "[{version}] {label} against {definition}: {error}\n    sent: {instance}"
                    ));
                }
            }
        }
        // Every member of every direction union must be covered in this revision.
        for union in UNIONS {
            for member in rev.union_members(union) {
                if member != "Result" && !covered.contains(member.as_str()) {
                    failures.push(format!(
                        "[{version}] {union} member {member} has no corpus entry"
                    ));
                }
            }
        }
    }

    // Every corpus definition must exist in at least one revision (catches typos).
    for (index, case) in corpus.0.iter().enumerate() {
        if !known.contains(case.definition) {
            let label = case.label(index);
            failures.push(format!(
                "{label}: definition {} exists in no revision",
                case.definition
            ));
        }
    }

    println!("{checked} validations of {} corpus entries", corpus.0.len());
    for f in &failures {
        eprintln!("{f}\n");
    }
    assert!(
        failures.is_empty(),
        "{} schema conformance failure(s); see above",
        failures.len()
    );
}

/// Every request and notification payload of the corpus decodes through the direction enums and
/// encodes back unchanged.
#[test]
fn corpus_round_trips_through_the_direction_enums() {
    for (index, case) in corpus().0.iter().enumerate() {
        let (method, params) = (case.method, Some(case.payload.clone()));
        let again = match (case.shape, case.union) {
            (Shape::Request, CLIENT_REQ) => {
                ClientRequest::from_parts(method, params).map(ClientRequest::into_parts)
            }
            (Shape::Request, _) => {
                ServerRequest::from_parts(method, params).map(ServerRequest::into_parts)
            }
            (Shape::Notification, CLIENT_NOTE) => {
                ClientNotification::from_parts(method, params).map(ClientNotification::into_parts)
            }
            (Shape::Notification, _) => {
                ServerNotification::from_parts(method, params).map(ServerNotification::into_parts)
            }
            (Shape::Result, _) => continue,
        };
        let label = case.label(index);
        let (name, encoded) = again.unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(name, method, "{label}");
        assert_eq!(encoded.as_ref(), Some(&case.payload), "{label}");
    }
}
