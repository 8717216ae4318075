//! The checks every request passes before it reaches a session, each with a clear answer.

// A refused request is answered with an axum `Response`; returning it as the error keeps the
// handlers flat, and it is built once per refused request, never on the happy path.
#![allow(clippy::result_large_err)]

use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tidewire_core::ProtocolVersion;
use tidewire_core::http::reply as http_reply;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, RequestId};

/// `MCP-Protocol-Version`. The header names are made once, as `HeaderName`s: a lookup by
/// `&str` checks and lowers the name's every byte first.
pub(crate) const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Session-Id`.
pub(crate) use tidewire_core::http::sessions::SESSION_ID_HEADER as SESSION_ID;
/// `Last-Event-ID`.
pub(crate) const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// An HTTP error answer with an id-less JSON-RPC error body.
pub(crate) fn error(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Response {
    error_for(status, None, ErrorObject::new(code, message))
}

/// An HTTP error answer with a JSON-RPC error body for `id`.
pub(crate) fn error_for(status: StatusCode, id: Option<RequestId>, error: ErrorObject) -> Response {
    http_reply::json_rpc_error(status, id, error).into_response()
}

/// Whether one `Accept` media range (its parameters already cut off) covers `media`. Media
/// types are case-insensitive; `type/*` and `*/*` cover `media` too. (`media`'s own type is
/// looked for only for a `type/*` range: this runs for every range of every request.)
fn covers(range: &str, media: &str) -> bool {
    if range.eq_ignore_ascii_case(media) || range == "*/*" {
        return true;
    }
    range.strip_suffix("/*").is_some_and(|kind| {
        media
            .split_once('/')
            .is_some_and(|(media_kind, _)| media_kind.eq_ignore_ascii_case(kind))
    })
}

/// `Accept` must list what we may answer with (H5, H14): 406 otherwise. One pass over the
/// header, marking each needed type it covers.
pub(crate) fn check_accept<const N: usize>(
    headers: &HeaderMap,
    needed: &[&str; N],
) -> Result<(), Response> {
    let mut covered = [false; N];
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let range = item.split_once(';').map_or(item, |(range, _)| range).trim();
            for (done, media) in covered.iter_mut().zip(needed) {
                *done = *done || covers(range, media);
            }
        }
    }
    let missing = covered
        .iter()
        .zip(needed)
        .find(|(done, _)| !**done)
        .map(|(_, media)| *media);
    match missing {
        None => Ok(()),
        Some(missing) => Err(error(
            StatusCode::NOT_ACCEPTABLE,
            ErrorCode::INVALID_REQUEST,
            format!(
                "Not Acceptable: the Accept header must include {} (missing {missing})",
                needed.join(" and ")
            ),
        )),
    }
}

/// A POST body must be JSON: 415 otherwise.
pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), Response> {
    let ok = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    if ok {
        Ok(())
    } else {
        Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::INVALID_REQUEST,
            "Unsupported Media Type: the body must be application/json",
        ))
    }
}

/// `MCP-Protocol-Version` (H25): unknown → 400; absent → 2025-03-26.
/// True when `MCP-Protocol-Version` is present and names no session-era revision (2026-07-28,
/// or a version this build does not know): the request is one of the stateless wire.
pub(crate) fn names_stateless_revision(headers: &HeaderMap) -> bool {
    headers.get(PROTOCOL_VERSION).is_some_and(|value| {
        value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<ProtocolVersion>().ok())
            .is_none_or(|v| !v.uses_handshake())
    })
}

pub(crate) fn protocol_version(headers: &HeaderMap) -> Result<ProtocolVersion, Response> {
    match headers.get(PROTOCOL_VERSION) {
        None => Ok(ProtocolVersion::V2025_03_26),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<ProtocolVersion>().ok())
            .ok_or_else(|| {
                error(
                    StatusCode::BAD_REQUEST,
                    ErrorCode::INVALID_REQUEST,
                    format!(
                        "Bad Request: unsupported MCP-Protocol-Version {:?} (supported: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25)",
                        value.to_str().unwrap_or("<not text>")
                    ),
                )
            }),
    }
}

/// The session id a request names, if any.
pub(crate) fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The HTTP status of a stateless request answered with this JSON-RPC error code.
pub(crate) fn status_of(code: i64) -> StatusCode {
    match ErrorCode(code) {
        ErrorCode::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        ErrorCode::PARSE_ERROR
        | ErrorCode::INVALID_REQUEST
        | ErrorCode::INVALID_PARAMS
        | ErrorCode::HEADER_MISMATCH
        | ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY
        | ErrorCode::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::super::config::HttpConfig;
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_str(v).expect("header"));
        }
        map
    }

    /// The endpoint's `Host`/`Origin` rule, which its handler applies first.
    fn check_origin_and_host(headers: &HeaderMap, config: &HttpConfig) -> Result<(), String> {
        config
            .limits
            .hosts
            .check(headers)
            .map_err(|refused| refused.0)
    }

    #[test]
    fn loopback_hosts_and_origins_pass_others_do_not() {
        let config = HttpConfig::default();
        for host in ["localhost:3000", "127.0.0.1:8080", "[::1]:9", "localhost"] {
            assert!(
                check_origin_and_host(&headers(&[("host", host)]), &config).is_ok(),
                "{host}"
            );
        }
        assert!(check_origin_and_host(&headers(&[("host", "evil.example:80")]), &config).is_err());
        assert!(
            check_origin_and_host(&headers(&[("host", "localhost.evil.example")]), &config)
                .is_err()
        );
        let with_origin = |o: &str| headers(&[("host", "127.0.0.1:1"), ("origin", o)]);
        assert!(check_origin_and_host(&with_origin("http://localhost:5173"), &config).is_ok());
        assert!(check_origin_and_host(&with_origin("https://evil.example"), &config).is_err());
        assert!(check_origin_and_host(&with_origin("null"), &config).is_err());
        let config = HttpConfig::default()
            .allow_host("api.example.com")
            .allow_origin("https://app.example.com");
        assert!(
            check_origin_and_host(&headers(&[("host", "api.example.com:443")]), &config).is_ok()
        );
        assert!(check_origin_and_host(&with_origin("https://app.example.com"), &config).is_ok());
    }

    #[test]
    fn accept_and_versions() {
        let both = headers(&[("accept", "application/json, text/event-stream")]);
        assert!(check_accept(&both, &["application/json", "text/event-stream"]).is_ok());
        assert!(check_accept(&headers(&[("accept", "*/*")]), &["text/event-stream"]).is_ok());
        assert!(
            check_accept(
                &headers(&[("accept", "application/json")]),
                &["application/json", "text/event-stream"]
            )
            .is_err()
        );
        assert!(check_accept(&HeaderMap::new(), &["text/event-stream"]).is_err());
        let needed = ["application/json", "text/event-stream"];
        for (accept, ok) in [
            ("Application/JSON;q=0.9 , TEXT/*", true),
            ("application/*, text/event-stream; q=0.5", true),
            ("text/*, application/xml", false),
            ("application/json-seq, text/event-stream", false),
            ("application/jsonx, */*;q=0.1", true),
            ("*/json, text/event-stream", false),
            (" , ;, application/json,text/event-stream", true),
        ] {
            let got = check_accept(&headers(&[("accept", accept)]), &needed).is_ok();
            assert_eq!(got, ok, "{accept:?}");
        }
        let mut two = headers(&[("accept", "application/json")]);
        two.append(
            "accept",
            "text/event-stream".parse().expect("a header value"),
        );
        assert!(check_accept(&two, &needed).is_ok(), "two Accept headers");
        assert_eq!(
            protocol_version(&HeaderMap::new()).ok(),
            Some(ProtocolVersion::V2025_03_26)
        );
        assert!(protocol_version(&headers(&[("mcp-protocol-version", "1999-01-01")])).is_err());
        assert!(
            check_content_type(&headers(&[(
                "content-type",
                "application/json; charset=utf-8"
            )]))
            .is_ok()
        );
        assert!(check_content_type(&headers(&[("content-type", "text/plain")])).is_err());
    }
}
