//! Target: documents a peer of another kind writes: the envelope a replica forwards through
//! Redis (any bytes on an owner's inbox, a replica being a peer of another), the metadata an
//! authorization server publishes, and the trace context a client puts in `_meta`.

use super::*;

/// Header names, the credentials among them (which never cross between replicas).
const HEADER_NAMES: &[&str] = &[
    "authorization",
    "Authorization",
    "proxy-authorization",
    "cookie",
    "mcp-session-id",
    "content-type",
    "x-y",
    "bad name",
    "",
    "é",
];

/// Endpoints an authorization server could name, allowed and not.
const ENDPOINTS: &[&str] = &[
    "https://as.example/authorize",
    "https://",
    "http://127.0.0.1:8080/token",
    "http://127.1.2.3/t",
    "http://[::1]:9/t",
    "http://localhost/t",
    "http://app.localhost/t",
    "HTTP://LOCALHOST/t",
    "http://as.example/token",
    "http://127.0.0.1.evil.example/t",
    "http://localhost.evil.example/t",
    "file:///etc/passwd",
    "javascript:alert(1)",
    "data:text/html,x",
    "ftp://as.example/",
    "//as.example/t",
    "not a url",
    "",
];

/// `traceparent` values, well-formed and not.
const TRACEPARENTS: &[&str] = &[
    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
    "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
    "00-4bf92f35-00f067aa-01",
    "",
];

#[derive(Debug, Clone)]
pub(crate) struct ReplicaCase {
    envelope: Value,
    raw: String,
    metadata: Value,
    meta: Value,
}

fn replica_case() -> impl Strategy<Value = ReplicaCase> {
    let header = (select(HEADER_NAMES), "[ -~]{0,12}|\\PC{0,4}");
    let envelope = (
        "[a-z0-9]{0,8}",
        prop_oneof![
            Just("GET".to_owned()),
            Just("POST".to_owned()),
            Just("DELETE".to_owned()),
            "\\PC{0,6}"
        ],
        prop_oneof![
            Just("/mcp".to_owned()),
            Just("/sse?x=1".to_owned()),
            "\\PC{0,12}"
        ],
        vec(header, 0..6),
        prop_oneof![
            Just("e30=".to_owned()),
            Just("!!".to_owned()),
            "[A-Za-z0-9+/=]{0,12}"
        ],
        option::of(("[a-z]{0,6}", vec("[a-z:]{0,6}", 0..3))),
        any::<bool>(),
    )
        .prop_map(|(rid, method, uri, headers, body, principal, brief)| {
            let headers: Vec<Value> = headers.into_iter().map(|(n, v)| json!([n, v])).collect();
            let mut envelope = json!({
                "rid": rid, "from": "replica-b", "method": method, "uri": uri,
                "headers": headers, "body": body, "brief": brief,
            });
            if let Some((subject, scopes)) = principal {
                envelope["principal"] = json!({"subject": subject, "scopes": scopes});
            }
            envelope
        });
    let endpoint = prop_oneof![select(ENDPOINTS).prop_map(str::to_owned), "\\PC{0,16}"];
    let metadata = (
        endpoint.clone(),
        endpoint.clone(),
        option::of(endpoint),
        any::<bool>(),
    )
        .prop_map(|(authorization, token, registration, with_issuer)| {
            let mut metadata = json!({
                "authorization_endpoint": authorization, "token_endpoint": token,
            });
            if with_issuer {
                metadata["issuer"] = json!("https://as.example");
            }
            if let Some(registration) = registration {
                metadata["registration_endpoint"] = json!(registration);
            }
            metadata
        });
    let traceparent = prop_oneof![select(TRACEPARENTS).prop_map(str::to_owned), "\\PC{0,60}"];
    let meta = (
        traceparent,
        option::of("\\PC{0,20}"),
        option::of("\\PC{0,20}"),
    )
        .prop_map(|(traceparent, tracestate, baggage)| {
            let mut meta = json!({ "traceparent": traceparent });
            if let Some(state) = tracestate {
                meta["tracestate"] = json!(state);
            }
            if let Some(baggage) = baggage {
                meta["baggage"] = json!(baggage);
            }
            meta
        });
    (envelope, any::<String>(), metadata, meta).prop_map(|(envelope, raw, metadata, meta)| {
        ReplicaCase {
            envelope,
            raw,
            metadata,
            meta,
        }
    })
}

/// Whether the client may use `url` as an endpoint: `https` with a host, or `http` to this
/// machine (written out here, apart from the code under test).
fn allowed_endpoint(url: &str) -> bool {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return false;
    };
    match parsed.scheme() {
        "https" => parsed.host_str().is_some_and(|host| !host.is_empty()),
        "http" => parsed.host_str().is_some_and(|host| {
            let ip = host
                .strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .unwrap_or(host);
            match ip.parse::<std::net::IpAddr>() {
                Ok(ip) => ip.is_loopback(),
                Err(_) => {
                    let name = host.to_ascii_lowercase();
                    name == "localhost" || name.ends_with(".localhost")
                }
            }
        }),
        _ => false,
    }
}

fn check_replica_documents(case: &ReplicaCase) -> Result<(), TestCaseError> {
    // The forwarded envelope: whatever the bytes, a rebuilt request carries no credential.
    let envelope = case.envelope.to_string();
    for payload in [envelope.as_bytes(), case.raw.as_bytes()] {
        let (request, _piece) = tidewire_redis::__fuzz_forwarded(payload);
        if let Some(request) = request {
            for name in ["authorization", "proxy-authorization", "cookie"] {
                prop_assert!(
                    !request.headers().contains_key(name),
                    "{} crossed between replicas: {:?}",
                    name,
                    request.headers()
                );
            }
        }
    }

    // Authorization-server metadata: accepted only with endpoints the client may use.
    let metadata = case.metadata.to_string();
    for document in [metadata.as_bytes(), case.raw.as_bytes()] {
        if let Some(endpoints) = tidewire::auth::client::__fuzz_server_metadata(document) {
            for endpoint in endpoints {
                prop_assert!(allowed_endpoint(&endpoint), "accepted {:?}", endpoint);
            }
        }
    }

    // Trace context: any `_meta` is read without a panic; a context read has a trace id.
    tidewire_otel::propagation::install();
    for meta in [case.meta.clone(), json!(case.raw)] {
        let context = tidewire_otel::propagation::extract(Some(&meta));
        use opentelemetry::trace::TraceContextExt as _;
        let span = context.span().span_context().clone();
        if span.is_valid() {
            prop_assert_ne!(span.trace_id(), opentelemetry::trace::TraceId::INVALID);
        }
    }
    Ok(())
}

#[test]
fn replica_documents() {
    fuzz::run("replica_documents", replica_case(), |case| {
        check_replica_documents(&case)
    });
}
