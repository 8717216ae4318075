//! Shared generators: text, JSON values, valid-ish JSON-RPC messages and mutated bytes.

use super::*;

/// Strings that parsers tend to trip over.
pub(crate) const ODD_STRINGS: &[&str] = &[
    "",
    " ",
    "\0",
    "\u{FEFF}",
    "\u{FEFF}x",
    "\"",
    "\\",
    "\\u0000",
    "\n",
    "\r\n",
    "\r",
    "\u{2028}",
    "\u{85}",
    "😀",
    "é",
    "\u{10FFFF}",
    "2.0",
    "null",
    "{}",
    "[",
    "}",
    "data: x",
    "%00",
    "\u{7f}",
];

/// What a huge string is made of.
pub(crate) const FILL: &[char] = &['x', 'é', '😀', '\u{FEFF}', '"', '\\', '\0', '\u{2028}'];

pub(crate) fn small_text() -> BoxedStrategy<String> {
    prop_oneof![
        6 => regex("[a-z/_.]{0,12}"),
        3 => any::<String>(),
        2 => vec(any::<char>(), 0..16).prop_map(String::from_iter),
        2 => select(ODD_STRINGS).prop_map(str::to_owned),
    ]
    .boxed()
}

/// One character repeated up to `max` times.
pub(crate) fn huge_text(max: usize) -> BoxedStrategy<String> {
    (select(FILL), 1..max)
        .prop_map(|(c, n)| std::iter::repeat_n(c, n).collect::<String>())
        .boxed()
}

/// Mostly small text, sometimes a few hundred KB.
pub(crate) fn text() -> BoxedStrategy<String> {
    prop_oneof![
        12 => small_text(),
        1 => huge_text(300_000),
    ]
    .boxed()
}

pub(crate) fn json_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        // Not finite: null.
        any::<f64>().prop_map(Value::from),
        small_text().prop_map(Value::String),
    ]
    .boxed()
}

pub(crate) fn json_value() -> BoxedStrategy<Value> {
    json_leaf()
        .prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..4).prop_map(Value::Array),
                vec((small_text(), inner), 0..4)
                    .prop_map(|members| Value::Object(members.into_iter().collect())),
            ]
        })
        .boxed()
}

pub(crate) fn json_object() -> BoxedStrategy<Value> {
    vec((small_text(), json_value()), 0..4)
        .prop_map(|members| Value::Object(members.into_iter().collect()))
        .boxed()
}

/// A value wrapped in up to 24 levels of arrays and objects.
pub(crate) fn nested() -> BoxedStrategy<Value> {
    (json_value(), vec(any::<bool>(), 0..24))
        .prop_map(|(mut value, levels)| {
            for in_array in levels {
                value = if in_array {
                    Value::Array(vec![value])
                } else {
                    json!({ "a": value })
                };
            }
            value
        })
        .boxed()
}

pub(crate) const JSONRPC_VERSIONS: &[&str] = &["1.0", "2", "", " 2.0", "2.0 ", "2.00", "3.0"];

pub(crate) fn jsonrpc_member() -> BoxedStrategy<Option<Value>> {
    prop_oneof![
        12 => Just(Some(json!("2.0"))),
        1 => Just(None),
        1 => select(JSONRPC_VERSIONS).prop_map(|v| Some(json!(v))),
        1 => Just(Some(json!(2.0))),
        1 => Just(Some(Value::Null)),
    ]
    .boxed()
}

/// Ids that are no string or integer, as JSON text.
pub(crate) const ODD_IDS: &[&str] = &[
    "1.5",
    "1.0",
    "-0",
    "1e3",
    "null",
    "{}",
    "[]",
    "[1]",
    "true",
    "{\"id\":1}",
    "\"\"",
];

pub(crate) fn id_value() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => (0i64..8).prop_map(Value::from),
        2 => any::<i64>().prop_map(Value::from),
        1 => ((1u64 << 63)..=u64::MAX).prop_map(Value::from),
        2 => small_text().prop_map(Value::String),
        1 => select(ODD_IDS)
            .prop_map(|id| serde_json::from_str::<Value>(id).expect("an odd id is JSON")),
    ]
    .boxed()
}

pub(crate) const METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/call",
    "tools/list",
    "resources/read",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "",
    "rpc.discover",
];

pub(crate) fn method_value() -> BoxedStrategy<Value> {
    prop_oneof![
        6 => select(METHODS).prop_map(Value::from),
        3 => small_text().prop_map(Value::String),
        1 => huge_text(300_000).prop_map(Value::String),
        // Mostly not a string.
        1 => json_leaf(),
    ]
    .boxed()
}

pub(crate) fn params_value() -> BoxedStrategy<Value> {
    prop_oneof![
        4 => json_object(),
        2 => json_value(),
        1 => nested(),
        1 => json_leaf(),
    ]
    .boxed()
}

pub(crate) const ERROR_CODES: &[i64] = &[
    -32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32042, 0, 1,
];

pub(crate) fn error_value() -> BoxedStrategy<Value> {
    let code = prop_oneof![
        4 => select(ERROR_CODES).prop_map(Value::from),
        2 => any::<i64>().prop_map(Value::from),
        1 => ((1u64 << 63)..=u64::MAX).prop_map(Value::from),
        1 => Just(json!(1.5)),
        1 => Just(json!("-32600")),
        1 => Just(Value::Null),
    ];
    prop_oneof![
        4 => (code, small_text(), option::of(json_value())).prop_map(|(code, message, data)| {
            let mut error = json!({ "code": code, "message": message });
            if let Some(data) = data {
                error["data"] = data;
            }
            error
        }),
        1 => json_value(),
    ]
    .boxed()
}

/// Which members a generated message gets.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Request,
    Notification,
    Result,
    Error,
    /// Every member that was generated.
    Anything,
}

pub(crate) const EXTRA_KEYS: &[&str] = &["_meta", "foo", "ID", "Method", "jsonrpc ", "\u{FEFF}id"];

pub(crate) fn put(map: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        map.insert(key.to_owned(), value);
    }
}

/// A valid-ish JSON-RPC message object.
pub(crate) fn message_value() -> BoxedStrategy<Value> {
    let kind = prop_oneof![
        3 => Just(Kind::Request),
        2 => Just(Kind::Notification),
        1 => Just(Kind::Result),
        1 => Just(Kind::Error),
        1 => Just(Kind::Anything),
    ];
    (
        kind,
        jsonrpc_member(),
        option::weighted(0.95, id_value()),
        option::weighted(0.95, method_value()),
        option::weighted(0.7, params_value()),
        option::weighted(0.9, json_value()),
        option::weighted(0.9, error_value()),
        vec((select(EXTRA_KEYS), json_leaf()), 0..3),
    )
        .prop_map(
            |(kind, jsonrpc, id, method, params, result, error, extra)| {
                let mut map = Map::new();
                for (key, value) in extra {
                    map.insert(key.to_owned(), value);
                }
                put(&mut map, "jsonrpc", jsonrpc);
                match kind {
                    Kind::Request => {
                        put(&mut map, "id", id);
                        put(&mut map, "method", method);
                        put(&mut map, "params", params);
                    }
                    Kind::Notification => {
                        put(&mut map, "method", method);
                        put(&mut map, "params", params);
                    }
                    Kind::Result => {
                        put(&mut map, "id", id);
                        put(&mut map, "result", result);
                    }
                    Kind::Error => {
                        put(&mut map, "id", id);
                        put(&mut map, "error", error);
                    }
                    Kind::Anything => {
                        put(&mut map, "id", id);
                        put(&mut map, "method", method);
                        put(&mut map, "params", params);
                        put(&mut map, "result", result);
                        put(&mut map, "error", error);
                    }
                }
                Value::Object(map)
            },
        )
        .boxed()
}

/// A message as a JSON array of its members in declaration order, the form serde accepts for
/// a struct: mostly the one a typed pass takes for a response.
pub(crate) fn positional_message() -> BoxedStrategy<Value> {
    prop_oneof![
        3 => (id_value(), json_value())
            .prop_map(|(id, result)| json!(["2.0", id, null, null, result, null])),
        1 => (
            jsonrpc_member(),
            option::of(id_value()),
            option::of(method_value()),
            option::of(params_value()),
            option::of(json_value()),
            option::of(error_value()),
            0usize..=8,
        )
            .prop_map(|(jsonrpc, id, method, params, result, error, len)| {
                let members = [jsonrpc, id, method, params, result, error];
                Value::Array(
                    members
                        .into_iter()
                        .map(|member| member.unwrap_or(Value::Null))
                        .chain(std::iter::repeat(Value::Null))
                        .take(len)
                        .collect(),
                )
            }),
    ]
    .boxed()
}

/// The members a typed pass reads.
pub(crate) const KNOWN_KEYS: &[&str] = &["jsonrpc", "id", "method", "params", "result", "error"];
pub(crate) const PREFIXES: &[&[u8]] = &[b"\xEF\xBB\xBF", b" ", b"\0", b"\n", b"\t\r\n ", b"\xFF"];
pub(crate) const SUFFIXES: &[&str] = &[
    " x", "}", "]", ",", "\0", "\u{FEFF}", "{}", " \n", "garbage",
];

/// A change to serialized bytes.
#[derive(Debug, Clone)]
pub(crate) enum Mutation {
    Truncate(Index),
    Insert(Index, u8),
    Flip(Index, u8),
    Remove(Index),
    /// A second member with this name, right after the opening brace.
    DuplicateKey(&'static str, Value),
    Prefix(&'static [u8]),
    Suffix(Vec<u8>),
}

impl Mutation {
    fn apply(&self, bytes: &mut Vec<u8>) {
        match self {
            Self::Truncate(at) => bytes.truncate(at.index(bytes.len() + 1)),
            Self::Insert(at, byte) => {
                let at = at.index(bytes.len() + 1);
                bytes.insert(at, *byte);
            }
            Self::Flip(at, mask) => {
                if !bytes.is_empty() {
                    let at = at.index(bytes.len());
                    bytes[at] ^= *mask;
                }
            }
            Self::Remove(at) => {
                if !bytes.is_empty() {
                    let at = at.index(bytes.len());
                    bytes.remove(at);
                }
            }
            Self::DuplicateKey(key, value) => {
                if bytes.first() == Some(&b'{') {
                    let mut member = format!("{}:{value}", Value::from(*key)).into_bytes();
                    if bytes.get(1) != Some(&b'}') {
                        member.push(b',');
                    }
                    let mut out = Vec::with_capacity(bytes.len() + member.len());
                    out.push(b'{');
                    out.extend_from_slice(&member);
                    out.extend_from_slice(&bytes[1..]);
                    *bytes = out;
                }
            }
            Self::Prefix(prefix) => {
                let mut out = prefix.to_vec();
                out.extend_from_slice(bytes);
                *bytes = out;
            }
            Self::Suffix(suffix) => bytes.extend_from_slice(suffix),
        }
    }
}

pub(crate) fn mutation() -> BoxedStrategy<Mutation> {
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        (any::<Index>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Insert(at, byte)),
        (any::<Index>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip(at, mask)),
        any::<Index>().prop_map(Mutation::Remove),
        (select(KNOWN_KEYS), json_leaf())
            .prop_map(|(key, value)| Mutation::DuplicateKey(key, value)),
        select(PREFIXES).prop_map(Mutation::Prefix),
        prop_oneof![
            select(SUFFIXES).prop_map(|suffix| suffix.as_bytes().to_vec()),
            vec(any::<u8>(), 1..8),
        ]
        .prop_map(Mutation::Suffix),
    ]
    .boxed()
}

/// Documents that no serializer writes.
pub(crate) const RAW_DOCS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":-1e400,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1e400}}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"ping","x":1e400}"#,
    r#"{"jsonrpc":"2.0","id":"\ud800","method":"ping"}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"ping","x":"\ud800"}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"ping","id":2}"#,
    r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"x"}"#,
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
    r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
    r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"x"}}"#,
    r#"{"\u006aSONRPC":"2.0","\u0069d":1,"method":"ping"}"#,
    r#"{"jsonrpc":"2.0","\u0069d":1,"method":"ping"}"#,
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\0ing\"}",
    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"x\":\"\u{FF}\"}",
    "\u{FEFF}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}",
    "",
    " ",
    "null",
    "[]",
    "{}",
    "[{}]",
    "[\"2.0\",1,\"ping\"]",
];

/// What follows a complete JSON value and makes the whole no JSON.
pub(crate) const GARBAGE: &[&str] = &[" x", "x", "}", "]", ",1", " {}", "\0", "\u{FEFF}", ":"];

pub(crate) fn deep(depth: usize, objects: bool, closed: bool) -> Vec<u8> {
    let (open, close) = if objects {
        ("{\"a\":", "}")
    } else {
        ("[", "]")
    };
    let mut text = open.repeat(depth);
    text.push('1');
    if closed {
        text.push_str(&close.repeat(depth));
    }
    text.into_bytes()
}

pub(crate) fn raw_document() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        // A complete value followed by more: no JSON.
        3 => (json_leaf(), select(GARBAGE)).prop_map(|(value, garbage)| {
            let mut bytes = value.to_string().into_bytes();
            bytes.extend_from_slice(garbage.as_bytes());
            bytes
        }),
        // Nesting up to 10,000 levels, closed or not.
        2 => (1usize..10_000, any::<bool>(), any::<bool>())
            .prop_map(|(depth, objects, closed)| deep(depth, objects, closed)),
        2 => select(RAW_DOCS).prop_map(|doc| doc.as_bytes().to_vec()),
        // Integers of up to 400 digits as ids.
        1 => (1usize..400, any::<bool>()).prop_map(|(digits, negative)| {
            let sign = if negative { "-" } else { "" };
            let zeros = "0".repeat(digits);
            format!(r#"{{"jsonrpc":"2.0","id":{sign}1{zeros},"method":"ping"}}"#).into_bytes()
        }),
        1 => vec(any::<u8>(), 0..64),
    ]
    .boxed()
}

/// The bytes of one message, as a peer may send them.
#[derive(Debug, Clone)]
pub(crate) enum Input {
    /// A JSON value, serialized (compact or pretty), then changed.
    Json {
        value: Value,
        pretty: bool,
        mutations: Vec<Mutation>,
    },
    /// Bytes built directly.
    Raw(Vec<u8>),
}

impl Input {
    pub(crate) fn bytes(&self) -> Vec<u8> {
        match self {
            Self::Json {
                value,
                pretty,
                mutations,
            } => {
                let mut bytes = if *pretty {
                    serde_json::to_vec_pretty(value)
                } else {
                    serde_json::to_vec(value)
                }
                .expect("a JSON value serializes");
                for mutation in mutations {
                    mutation.apply(&mut bytes);
                }
                bytes
            }
            Self::Raw(bytes) => bytes.clone(),
        }
    }

    pub(crate) fn value(&self) -> Option<&Value> {
        match self {
            Self::Json { value, .. } => Some(value),
            Self::Raw(_) => None,
        }
    }
}

pub(crate) fn codec_input() -> BoxedStrategy<Input> {
    let value = prop_oneof![
        10 => message_value(),
        2 => positional_message(),
        1 => vec(message_value(), 0..4).prop_map(Value::Array),
        1 => json_value(),
    ];
    let mutations = prop_oneof![
        1 => Just(Vec::<Mutation>::new()),
        1 => vec(mutation(), 1..3),
    ];
    prop_oneof![
        12 => (value, proptest::bool::weighted(0.1), mutations)
            .prop_map(|(value, pretty, mutations)| Input::Json { value, pretty, mutations }),
        3 => raw_document().prop_map(Input::Raw),
    ]
    .boxed()
}
