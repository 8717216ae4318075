//! The methods of each direction as enums, for dispatching incoming messages.
//!
//! Each enum has one variant per method that the sender of that direction may use (in any
//! handshake revision), holding the decoded params, and an `Other` variant for methods tidewire
//! does not know. [`ClientRequest::from_parts`] and friends decode in a single typed pass.

use std::borrow::Cow;

use serde_json::Value;

use super::{
    CallTool, CancelTask, CancelledNotification, Complete, CreateMessage, Discover, Elicit,
    ElicitationCompleteNotification, GetPrompt, GetSkill, GetTask, GetTaskPayload, Initialize,
    InitializedNotification, JsonObject, ListPrompts, ListResourceTemplates, ListResources,
    ListRoots, ListSkills, ListTasks, ListTools, LoggingMessageNotification, NotificationType,
    Ping, ProgressNotification, PromptListChangedNotification, ReadDirectory, ReadResource,
    RequestType, ResourceListChangedNotification, ResourceUpdatedNotification,
    RootsListChangedNotification, SetLevel, Subscribe, SubscriptionsListen, TaskStatusNotification,
    ToolListChangedNotification, Unsubscribe, UpdateTask,
};
use crate::jsonrpc::ErrorObject;

/// Decodes `params` (absent or `null` reads as `{}`) into `T`, or explains what is wrong.
fn decode_params<T>(
    method: &str,
    params: Option<Value>,
    from_value: fn(Value) -> Result<T, serde_json::Error>,
) -> Result<T, ErrorObject> {
    let value = match params {
        None | Some(Value::Null) => Value::Object(JsonObject::new()),
        Some(v) => v,
    };
    // serde quotes the value it could not read, which is the peer's text: only an excerpt.
    from_value(value).map_err(|e| {
        let reason = crate::text::excerpt(&e.to_string());
        ErrorObject::invalid_params(format_args!("method `{method}`: {reason}"))
    })
}

/// Serialises decoded params back to JSON. Our params types always serialise to an object, so
/// the error case is unreachable in practice; it yields no params rather than a panic.
fn encode_params<T: serde::Serialize>(params: &T) -> Option<Value> {
    serde_json::to_value(params).ok()
}

macro_rules! method_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident : $kind:ident {
            $( $variant:ident($marker:ident) = $method:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        #[allow(clippy::large_enum_variant)]
        pub enum $name {
            $(
                #[doc = concat!("`", $method, "`.")]
                $variant(<$marker as $kind>::Params),
            )+
            /// A method tidewire does not know, with its raw params.
            Other {
                /// The method name.
                method: String,
                /// The raw params.
                params: Option<Value>,
            },
        }

        impl $name {
            /// Decodes a message's method and params. An unknown method gives `Other`; params
            /// that do not match the method give an `Invalid params` (-32602) error naming the
            /// method. Absent params are read as `{}`.
            pub fn from_parts(method: &str, params: Option<Value>) -> Result<Self, ErrorObject> {
                match method {
                    $( <$marker as $kind>::METHOD => decode_params(method, params, <$marker as $kind>::params_from_value).map(Self::$variant), )+
                    _ => Ok(Self::Other {
                        method: method.to_owned(),
                        params,
                    }),
                }
            }

            /// The method name.
            pub fn method(&self) -> &str {
                match self {
                    $( Self::$variant(_) => <$marker as $kind>::METHOD, )+
                    Self::Other { method, .. } => method,
                }
            }

            /// The method name and the params as JSON, ready for the wire.
            pub fn into_parts(self) -> (Cow<'static, str>, Option<Value>) {
                match self {
                    $( Self::$variant(p) => (Cow::Borrowed(<$marker as $kind>::METHOD), encode_params(&p)), )+
                    Self::Other { method, params } => (Cow::Owned(method), params),
                }
            }

            /// Every method name this enum decodes (everything else is `Other`).
            pub const METHODS: &'static [&'static str] = &[ $( $method, )+ ];
        }
    };
}

method_enum! {
    /// A request from the client to the server.
    pub enum ClientRequest: RequestType {
        Initialize(Initialize) = "initialize",
        Ping(Ping) = "ping",
        ListResources(ListResources) = "resources/list",
        ListResourceTemplates(ListResourceTemplates) = "resources/templates/list",
        ReadResource(ReadResource) = "resources/read",
        Subscribe(Subscribe) = "resources/subscribe",
        Unsubscribe(Unsubscribe) = "resources/unsubscribe",
        ListPrompts(ListPrompts) = "prompts/list",
        GetPrompt(GetPrompt) = "prompts/get",
        ListTools(ListTools) = "tools/list",
        CallTool(CallTool) = "tools/call",
        SetLevel(SetLevel) = "logging/setLevel",
        Complete(Complete) = "completion/complete",
        GetTask(GetTask) = "tasks/get",
        GetTaskPayload(GetTaskPayload) = "tasks/result",
        ListTasks(ListTasks) = "tasks/list",
        CancelTask(CancelTask) = "tasks/cancel",
        ListSkills(ListSkills) = "skills/list",
        GetSkill(GetSkill) = "skills/get",
        ReadDirectory(ReadDirectory) = "resources/directory/read",
    }
}

method_enum! {
    /// A request from the client to a server of the stateless revision (2026-07-28): what it
    /// keeps of the session era, and what it adds (`server/discover`, `subscriptions/listen`,
    /// the tasks extension's `tasks/get`, `tasks/update` and `tasks/cancel`, and the skills
    /// extension's `skills/list`, `skills/get` and `resources/directory/read`; the tasks extension's removed
    /// `tasks/result` and `tasks/list` are `Other`).
    /// The session-era methods it drops (`initialize`, `ping`, `logging/setLevel`,
    /// `resources/subscribe` and `resources/unsubscribe`) are `Other`, as is every unknown one.
    pub enum StatelessRequest: RequestType {
        Discover(Discover) = "server/discover",
        ListTools(ListTools) = "tools/list",
        CallTool(CallTool) = "tools/call",
        ListResources(ListResources) = "resources/list",
        ListResourceTemplates(ListResourceTemplates) = "resources/templates/list",
        ReadResource(ReadResource) = "resources/read",
        ListPrompts(ListPrompts) = "prompts/list",
        GetPrompt(GetPrompt) = "prompts/get",
        Complete(Complete) = "completion/complete",
        Listen(SubscriptionsListen) = "subscriptions/listen",
        GetTask(GetTask) = "tasks/get",
        UpdateTask(UpdateTask) = "tasks/update",
        CancelTask(CancelTask) = "tasks/cancel",
        ListSkills(ListSkills) = "skills/list",
        GetSkill(GetSkill) = "skills/get",
        ReadDirectory(ReadDirectory) = "resources/directory/read",
    }
}

method_enum! {
    /// A request from the server to the client.
    pub enum ServerRequest: RequestType {
        Ping(Ping) = "ping",
        CreateMessage(CreateMessage) = "sampling/createMessage",
        ListRoots(ListRoots) = "roots/list",
        Elicit(Elicit) = "elicitation/create",
        GetTask(GetTask) = "tasks/get",
        GetTaskPayload(GetTaskPayload) = "tasks/result",
        ListTasks(ListTasks) = "tasks/list",
        CancelTask(CancelTask) = "tasks/cancel",
    }
}

method_enum! {
    /// A notification from the client to the server.
    pub enum ClientNotification: NotificationType {
        Cancelled(CancelledNotification) = "notifications/cancelled",
        Initialized(InitializedNotification) = "notifications/initialized",
        Progress(ProgressNotification) = "notifications/progress",
        RootsListChanged(RootsListChangedNotification) = "notifications/roots/list_changed",
        TaskStatus(TaskStatusNotification) = "notifications/tasks/status",
    }
}

method_enum! {
    /// A notification from the server to the client.
    pub enum ServerNotification: NotificationType {
        Cancelled(CancelledNotification) = "notifications/cancelled",
        Progress(ProgressNotification) = "notifications/progress",
        ResourceListChanged(ResourceListChangedNotification) = "notifications/resources/list_changed",
        ResourceUpdated(ResourceUpdatedNotification) = "notifications/resources/updated",
        PromptListChanged(PromptListChangedNotification) = "notifications/prompts/list_changed",
        ToolListChanged(ToolListChangedNotification) = "notifications/tools/list_changed",
        LoggingMessage(LoggingMessageNotification) = "notifications/message",
        ElicitationComplete(ElicitationCompleteNotification) = "notifications/elicitation/complete",
        TaskStatus(TaskStatusNotification) = "notifications/tasks/status",
    }
}

/// The `'static` name of a request method tidewire knows (either side, either era), for a
/// caller that keeps a method name without copying it; `None` for any other.
pub fn known_request_method(method: &str) -> Option<&'static str> {
    [
        ClientRequest::METHODS,
        StatelessRequest::METHODS,
        ServerRequest::METHODS,
    ]
    .into_iter()
    .flatten()
    .find(|known| **known == method)
    .copied()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::{ErrorCode, RequestId};
    use crate::schema::{EmptyParams, HasMeta};

    #[test]
    fn a_known_method_is_found_by_its_name_and_no_other() {
        for method in [
            "tools/call",
            "server/discover",
            "sampling/createMessage",
            "ping",
        ] {
            let known = known_request_method(method).expect(method);
            assert_eq!(known, method);
        }
        for method in ["tools/Call", "tools/call ", "", "notifications/initialized"] {
            assert_eq!(known_request_method(method), None, "{method:?}");
        }
    }

    /// Every listed method decodes to its own variant (or fails with invalid params), never to
    /// `Other`: the literal names match the marker types' `METHOD`.
    macro_rules! check_method_list {
        ($ty:ident) => {
            for m in $ty::METHODS {
                match $ty::from_parts(m, None) {
                    Ok($ty::Other { .. }) => panic!("{m} decoded as Other"),
                    Ok(decoded) => assert_eq!(decoded.method(), *m),
                    Err(e) => assert_eq!(e.code(), ErrorCode::INVALID_PARAMS, "{m}"),
                }
            }
        };
    }

    #[test]
    fn method_lists_match_the_markers() {
        check_method_list!(ClientRequest);
        check_method_list!(ServerRequest);
        check_method_list!(ClientNotification);
        check_method_list!(ServerNotification);
    }

    #[test]
    fn decodes_known_methods() {
        let r = ClientRequest::from_parts(
            "tools/call",
            Some(json!({"name": "add", "arguments": {"a": 1}, "_meta": {"progressToken": 1}})),
        )
        .expect("decode");
        let ClientRequest::CallTool(p) = &r else {
            panic!("expected CallTool, got {r:?}");
        };
        assert_eq!(p.name, "add");
        assert_eq!(p.progress_token(), Some(RequestId::Number(1)));
        let (method, params) = r.into_parts();
        assert_eq!(method, "tools/call");
        assert_eq!(
            params,
            Some(json!({"name": "add", "arguments": {"a": 1}, "_meta": {"progressToken": 1}}))
        );
    }

    #[test]
    fn missing_params_read_as_empty_object() {
        assert_eq!(
            ClientRequest::from_parts("ping", None).expect("ping"),
            ClientRequest::Ping(EmptyParams::new())
        );
        assert!(matches!(
            ClientRequest::from_parts("tools/list", Some(Value::Null)).expect("list"),
            ClientRequest::ListTools(_)
        ));
        assert!(matches!(
            ClientNotification::from_parts("notifications/initialized", None).expect("init"),
            ClientNotification::Initialized(_)
        ));
    }

    #[test]
    fn unknown_methods_are_other() {
        let r = ClientRequest::from_parts("server/discover", Some(json!({"x": 1}))).expect("other");
        assert_eq!(r.method(), "server/discover");
        assert_eq!(
            r.clone().into_parts(),
            (
                Cow::Owned("server/discover".to_owned()),
                Some(json!({"x": 1}))
            )
        );
        assert!(matches!(r, ClientRequest::Other { .. }));
        // A server-to-client method arriving at a server is not a client request.
        assert!(matches!(
            ClientRequest::from_parts("sampling/createMessage", None).expect("other"),
            ClientRequest::Other { .. }
        ));
        assert!(matches!(
            ServerNotification::from_parts("notifications/future", None).expect("other"),
            ServerNotification::Other { params: None, .. }
        ));
    }

    #[test]
    fn the_stateless_revision_drops_the_session_methods() {
        assert!(matches!(
            StatelessRequest::from_parts("server/discover", None).expect("discover"),
            StatelessRequest::Discover(_)
        ));
        assert!(matches!(
            StatelessRequest::from_parts(
                "subscriptions/listen",
                Some(json!({"notifications": {}}))
            )
            .expect("listen"),
            StatelessRequest::Listen(_)
        ));
        for dropped in [
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
        ] {
            assert!(matches!(
                StatelessRequest::from_parts(dropped, None).expect("other"),
                StatelessRequest::Other { .. }
            ));
        }
    }

    #[test]
    fn bad_params_are_invalid_params_naming_the_method() {
        let err = ClientRequest::from_parts("tools/call", Some(json!({"arguments": {}})))
            .expect_err("missing name");
        assert_eq!(err.code(), ErrorCode::INVALID_PARAMS);
        assert!(err.message.contains("tools/call"), "{}", err.message);
        assert!(err.message.contains("name"), "{}", err.message);

        let err = ClientRequest::from_parts("logging/setLevel", Some(json!({"level": "loud"})))
            .expect_err("bad level");
        assert_eq!(err.code(), ErrorCode::INVALID_PARAMS);
        assert!(err.message.contains("logging/setLevel"), "{}", err.message);

        let err = ServerNotification::from_parts("notifications/progress", Some(json!([1])))
            .expect_err("array params");
        assert_eq!(err.code(), ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn every_direction_round_trips() {
        let cases: Vec<(&str, Value)> = vec![
            (
                "notifications/progress",
                json!({"progressToken": "t", "progress": 1.0}),
            ),
            (
                "notifications/message",
                json!({"level": "error", "data": "x"}),
            ),
            (
                "notifications/resources/updated",
                json!({"uri": "file:///a"}),
            ),
            (
                "notifications/elicitation/complete",
                json!({"elicitationId": "e"}),
            ),
        ];
        for (method, params) in cases {
            let n = ServerNotification::from_parts(method, Some(params.clone())).expect(method);
            assert_eq!(
                n.clone().into_parts(),
                (Cow::Borrowed(method), Some(params))
            );
        }
        let s = ServerRequest::from_parts(
            "sampling/createMessage",
            Some(json!({"messages": [], "maxTokens": 5})),
        )
        .expect("sampling");
        assert!(matches!(s, ServerRequest::CreateMessage(_)));
        let c = ClientNotification::from_parts(
            "notifications/cancelled",
            Some(json!({"requestId": "7"})),
        )
        .expect("cancelled");
        let ClientNotification::Cancelled(p) = c else {
            panic!("cancelled");
        };
        assert_eq!(p.request_id, Some(RequestId::from("7")));
    }
}
