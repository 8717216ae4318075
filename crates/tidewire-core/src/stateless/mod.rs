//! The request envelope of the stateless revision (2026-07-28): what every request's `_meta`
//! must carry, read and checked once, for transports and servers alike.

pub mod header_value;

use serde::Deserialize;
use serde_json::Value;

use crate::ProtocolVersion;
use crate::jsonrpc::{ErrorCode, ErrorObject};
use crate::schema::{ClientCapabilities, Implementation, LoggingLevel, meta_keys};
use crate::text::excerpt;
use crate::version::STATELESS_VERSIONS;

/// What a stateless request says about itself in its `_meta`.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMeta {
    /// The revision it is written in (one this build serves).
    pub version: ProtocolVersion,
    /// What the client can do, for this request.
    pub capabilities: ClientCapabilities,
    /// Who the client says it is (SHOULD be sent; not required).
    pub client_info: Option<Implementation>,
    /// The least severe log level the client wants (none: send no logs).
    pub log_level: Option<LoggingLevel>,
}

impl RequestMeta {
    /// Reads and checks the `_meta` of a stateless request's `params`:
    /// - `-32602` when `_meta`, its protocol version or its client capabilities are missing or of
    ///   the wrong type, or `clientInfo` / `logLevel` are malformed;
    /// - `-32022` with `data.supported` and `data.requested` when the version is not served.
    ///
    /// # Errors
    /// The JSON-RPC error to answer with (HTTP 400 on Streamable HTTP).
    pub fn from_params(params: Option<&Value>) -> Result<Self, ErrorObject> {
        Self::from_meta(params.and_then(|p| p.get("_meta")))
    }

    /// The same, from the request's `_meta` itself (`params._meta`, taken out of the params or
    /// read through [`RequestContext::meta`](crate::session::RequestContext::meta)).
    ///
    /// # Errors
    /// As [`from_params`](Self::from_params).
    pub fn from_meta(meta: Option<&Value>) -> Result<Self, ErrorObject> {
        let (meta, version) = envelope_meta(meta)?;
        let capabilities = meta
            .get(meta_keys::CLIENT_CAPABILITIES)
            // Read in place (a `&Value` is a deserializer): no copy of the tree.
            .map(ClientCapabilities::deserialize)
            .transpose()
            .map_err(|e| {
                ErrorObject::invalid_params(format!(
                    "_meta[{:?}] is not valid: {}",
                    meta_keys::CLIENT_CAPABILITIES,
                    excerpt(&e.to_string())
                ))
            })?
            .unwrap_or_default();
        let client_info = match meta.get(meta_keys::CLIENT_INFO) {
            None | Some(Value::Null) => None,
            Some(info) => Some(Implementation::deserialize(info).map_err(|e| {
                ErrorObject::invalid_params(format!(
                    "_meta[{:?}] is not valid: {}",
                    meta_keys::CLIENT_INFO,
                    excerpt(&e.to_string())
                ))
            })?),
        };
        let log_level = match meta.get(meta_keys::LOG_LEVEL) {
            None | Some(Value::Null) => None,
            Some(level) => Some(LoggingLevel::deserialize(level).map_err(|_| {
                ErrorObject::invalid_params(format!(
                    "_meta[{:?}] must be a log level (debug … emergency)",
                    meta_keys::LOG_LEVEL
                ))
            })?),
        };
        Ok(Self {
            version,
            capabilities,
            client_info,
            log_level,
        })
    }
}

/// The envelope of a stateless request, checked for what a transport needs to know before the
/// request goes further (without decoding the capabilities): `_meta` is an object with a string
/// protocol version and an object of client capabilities (`-32602` otherwise), and the version
/// is served (`-32022` otherwise).
///
/// # Errors
/// The JSON-RPC error to answer with.
pub fn envelope(
    params: Option<&Value>,
) -> Result<(&serde_json::Map<String, Value>, ProtocolVersion), ErrorObject> {
    envelope_meta(params.and_then(|p| p.get("_meta")))
}

/// [`envelope`], given the request's `_meta` itself.
fn envelope_meta(
    meta: Option<&Value>,
) -> Result<(&serde_json::Map<String, Value>, ProtocolVersion), ErrorObject> {
    let meta = meta.and_then(Value::as_object).ok_or_else(|| {
        ErrorObject::invalid_params(
            "a 2026-07-28 request needs params._meta with the protocol version and the \
                 client capabilities",
        )
    })?;
    let requested = match meta.get(meta_keys::PROTOCOL_VERSION) {
        Some(Value::String(v)) => v.as_str(),
        Some(_) => {
            return Err(ErrorObject::invalid_params(format!(
                "_meta[{:?}] must be a string",
                meta_keys::PROTOCOL_VERSION
            )));
        }
        None => {
            return Err(ErrorObject::invalid_params(format!(
                "_meta[{:?}] is required",
                meta_keys::PROTOCOL_VERSION
            )));
        }
    };
    match meta.get(meta_keys::CLIENT_CAPABILITIES) {
        Some(Value::Object(_)) => {}
        Some(_) => {
            return Err(ErrorObject::invalid_params(format!(
                "_meta[{:?}] must be an object",
                meta_keys::CLIENT_CAPABILITIES
            )));
        }
        None => {
            return Err(ErrorObject::invalid_params(format!(
                "_meta[{:?}] is required",
                meta_keys::CLIENT_CAPABILITIES
            )));
        }
    }
    Ok((meta, served(requested)?))
}

/// The stateless revision named by `requested`, or `-32022` naming the ones served.
///
/// # Errors
/// `-32022` UnsupportedProtocolVersion, with `data.supported` and `data.requested`.
pub fn served(requested: &str) -> Result<ProtocolVersion, ErrorObject> {
    match requested.parse::<ProtocolVersion>() {
        Ok(v) if STATELESS_VERSIONS.contains(&v) => Ok(v),
        _ => Err(unsupported_version(requested)),
    }
}

/// `-32022`: the version is not served; names the ones that are.
pub fn unsupported_version(requested: &str) -> ErrorObject {
    let supported: Vec<&str> = STATELESS_VERSIONS.iter().map(|v| v.as_str()).collect();
    ErrorObject::new(
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "Unsupported protocol version {:?} (supported: {})",
            excerpt(requested),
            supported.join(", ")
        ),
    )
    .with_data(serde_json::json!({
        "supported": supported,
        "requested": excerpt(requested),
    }))
}

/// The answer of a server that serves only the stateless revision to `initialize`: `-32022`
/// naming the versions it serves, as the spec asks of such a server.
pub fn initialize_refused(initialize_params: Option<&Value>) -> ErrorObject {
    let requested = initialize_params
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut error = unsupported_version(requested);
    error.message = format!(
        "{}; only the stateless revision is served here: send each request with its _meta, \
         without initialize",
        error.message
    );
    error
}

/// The `_meta` protocol version a stateless request names, if it names one as a string.
pub fn requested_version(params: Option<&Value>) -> Option<&str> {
    params?
        .get("_meta")?
        .get(meta_keys::PROTOCOL_VERSION)?
        .as_str()
}

/// Which member of a request's `params` the `Mcp-Name` header repeats: `name` for `tools/call`
/// and `prompts/get`, `uri` for `resources/read`, `taskId` for the tasks extension's
/// `tasks/get`, `tasks/update` and `tasks/cancel`; none for other methods.
pub fn name_member(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The tasks extension names the task.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// A tool parameter marked `x-mcp-header`: its argument also travels as the HTTP header
/// `Mcp-Param-{header}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// The property of the tool's `inputSchema`.
    pub property: String,
    /// The header's name after `Mcp-Param-`.
    pub header: String,
}

/// Routing headers of one stateless request: lower-case names with their values, in a form that
/// needs no `http` crate. Going out, [`routing_headers`] computes them, the client attaches them
/// to the request's envelope extensions, and the Streamable HTTP client transport sends them
/// (leaving out a pair that is not a valid header; other transports ignore them). Coming in,
/// the HTTP server transport puts a request's `Mcp-Param-*` headers in
/// [`HttpArrival`](crate::transport::HttpArrival) as one of these, for the server's check.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoutingHeaders(Vec<(String, String)>);

impl RoutingHeaders {
    /// The value of the header `name` (lower-case), when there is one.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
    }

    /// Every pair, in the order they were computed.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
    }

    /// How many headers there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds `value` under `name` (lower case), replacing a value of that name.
    pub fn set(&mut self, name: String, value: String) {
        match self.0.iter_mut().find(|(n, _)| *n == name) {
            Some(pair) => pair.1 = value,
            None => self.0.push((name, value)),
        }
    }
}

/// Keeps the first value of each name.
impl FromIterator<(String, String)> for RoutingHeaders {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        let mut headers = Self::default();
        for (name, value) in pairs {
            if headers.get(&name).is_none() {
                headers.0.push((name, value));
            }
        }
        headers
    }
}

/// The HTTP headers a stateless request carries on Streamable HTTP: `MCP-Protocol-Version`
/// (from its `_meta`), `Mcp-Method`, `Mcp-Name` (see [`name_member`]) and, for a `tools/call`,
/// `Mcp-Param-*` for the `marked` parameters whose argument is a string, an integer or a boolean
/// (none for null or absent ones). Values that are not plain visible ASCII are sent as
/// `=?base64?…?=` ([`header_value::encode`]).
pub fn routing_headers(
    method: &str,
    params: Option<&Value>,
    marked: &[HeaderParam],
) -> RoutingHeaders {
    let mut headers = RoutingHeaders::default();
    let version = requested_version(params).unwrap_or(ProtocolVersion::V2026_07_28.as_str());
    headers.set("mcp-protocol-version".to_owned(), version.to_owned());
    headers.set("mcp-method".to_owned(), header_value::encode(method));
    if let Some(value) = name_member(method).and_then(|m| params?.get(m)?.as_str()) {
        headers.set("mcp-name".to_owned(), header_value::encode(value));
    }
    if method == "tools/call" && !marked.is_empty() {
        let arguments = params.and_then(|p| p.get("arguments"));
        for param in marked {
            let value = match arguments.and_then(|a| a.get(&param.property)) {
                Some(Value::String(s)) => header_value::encode(s),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
                _ => continue,
            };
            headers.set(
                format!("mcp-param-{}", param.header.to_ascii_lowercase()),
                value,
            );
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn meta(meta: Value) -> Value {
        json!({ "_meta": meta })
    }

    #[test]
    fn a_complete_meta_is_read() {
        let params = meta(json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
            "io.modelcontextprotocol/logLevel": "warning",
        }));
        let read = RequestMeta::from_params(Some(&params)).expect("valid");
        assert_eq!(read.version, ProtocolVersion::V2026_07_28);
        assert!(read.capabilities.sampling.is_some());
        assert_eq!(read.log_level, Some(LoggingLevel::Warning));
        assert_eq!(read.client_info.map(|i| i.name), Some("c".to_owned()));
    }

    #[test]
    fn missing_parts_are_invalid_params() {
        for params in [
            json!({}),
            meta(json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28"})),
            meta(json!({"io.modelcontextprotocol/clientCapabilities": {}})),
            meta(json!({
                "io.modelcontextprotocol/protocolVersion": 2026,
                "io.modelcontextprotocol/clientCapabilities": {},
            })),
            meta(json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": [],
            })),
        ] {
            let error = RequestMeta::from_params(Some(&params)).expect_err("invalid");
            assert_eq!(error.code, ErrorCode::INVALID_PARAMS.0, "{params}");
        }
    }

    #[test]
    fn initialize_is_refused_naming_the_served_versions() {
        let error = initialize_refused(Some(&json!({"protocolVersion": "2025-11-25"})));
        assert_eq!(error.code, -32022);
        assert_eq!(error.data.expect("data")["requested"], "2025-11-25");
    }

    #[test]
    fn an_unserved_version_names_the_served_ones() {
        let params = meta(json!({
            "io.modelcontextprotocol/protocolVersion": "v999.0.0",
            "io.modelcontextprotocol/clientCapabilities": {},
        }));
        let error = RequestMeta::from_params(Some(&params)).expect_err("unsupported");
        assert_eq!(error.code, -32022);
        let data = error.data.expect("data");
        assert_eq!(data["requested"], "v999.0.0");
        assert_eq!(data["supported"], json!(["2026-07-28"]));
        // A session-era version is not served statelessly either.
        assert!(served("2025-11-25").is_err());
    }

    #[test]
    fn routing_headers_route_and_mirror_marked_arguments() {
        let params = json!({
            "name": "weather",
            "arguments": {"city": "Zürich", "days": 3, "metric": true, "note": null},
            "_meta": {meta_keys::PROTOCOL_VERSION: "2026-07-28"}
        });
        let marked = [
            ("city", "City"),
            ("days", "Days"),
            ("metric", "Metric"),
            ("note", "Note"),
            ("absent", "Absent"),
        ]
        .map(|(property, header)| HeaderParam {
            property: property.to_owned(),
            header: header.to_owned(),
        });
        let headers = routing_headers("tools/call", Some(&params), &marked);
        let get = |name: &str| headers.get(name);
        assert_eq!(get("mcp-protocol-version"), Some("2026-07-28"));
        assert_eq!(get("mcp-method"), Some("tools/call"));
        assert_eq!(get("mcp-name"), Some("weather"));
        assert_eq!(get("mcp-param-days"), Some("3"));
        assert_eq!(get("mcp-param-metric"), Some("true"));
        let city = get("mcp-param-city").expect("the city header");
        assert!(city.starts_with("=?base64?"), "{city}");
        assert_eq!(get("mcp-param-note"), None);
        assert_eq!(get("mcp-param-absent"), None);
        assert_eq!(headers.len(), 6);
        let read = routing_headers("resources/read", Some(&json!({"uri": "file:///a"})), &[]);
        assert_eq!(read.get("mcp-name"), Some("file:///a"));
        assert_eq!(name_member("tools/list"), None);
    }
}
