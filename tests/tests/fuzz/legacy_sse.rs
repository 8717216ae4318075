//! Target: the legacy HTTP+SSE server's POST path (`/messages?sessionId=…`): any body, any
//! `Content-Type`, for the session a real stream opened, for another id or for none. Every
//! answer is a status the endpoint answers with (never 500), no server task panics, and the
//! stream still carries the answer to a `ping` posted after the junk.

use tidewire_sse::server::{LegacySse, SseConfig};

use super::generators::*;
use super::*;

/// The statuses the POST path may answer with.
const ALLOWED: &[u16] = &[202, 400, 403, 404, 413, 415, 429, 503];
/// The body limit of the endpoint under test.
const MAX_BODY: usize = 64 * 1024;

/// Which session a POST names.
#[derive(Debug, Clone)]
pub(crate) enum Names {
    /// The one this case's stream opened.
    Real,
    /// No `sessionId` at all.
    Omit,
    /// Any other text.
    Other(String),
}

#[derive(Debug, Clone)]
pub(crate) struct Post {
    names: Names,
    content_type: Option<&'static str>,
    body: Vec<u8>,
}

fn post() -> impl Strategy<Value = Post> {
    let names = prop_oneof![
        6 => Just(Names::Real),
        1 => Just(Names::Omit),
        1 => small_text().prop_map(Names::Other),
    ];
    let content_type = option::weighted(
        0.9,
        select(
            &[
                "application/json",
                "application/json; charset=utf-8",
                "text/plain",
                "application/json\u{0}",
            ][..],
        ),
    );
    let body = prop_oneof![
        8 => codec_input().prop_map(|input| input.bytes()),
        1 => Just(vec![b' '; MAX_BODY + 1]),
    ];
    (names, content_type, body).prop_map(|(names, content_type, body)| Post {
        names,
        content_type,
        body,
    })
}

fn request(uri: &str, method: Method, content_type: Option<&str>, body: Vec<u8>) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, "127.0.0.1:3000");
    if let Some(content_type) = content_type {
        builder = builder.header(header::CONTENT_TYPE, content_type);
    }
    builder
        .body(Body::from(body))
        .unwrap_or_else(|_| Request::new(Body::empty()))
}

/// A stream of the SSE events of a GET answer.
type Events = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<Event, EventStreamError<axum::Error>>> + Send>,
>;

/// Opens a stream; returns its events and the POST URL its `endpoint` event names.
async fn open(router: &axum::Router) -> Result<(Events, String), TestCaseError> {
    let answer = router
        .clone()
        .oneshot(request("/sse", Method::GET, None, Vec::new()))
        .await
        .map_err(|e: Infallible| fail(e.to_string()))?;
    prop_assert_eq!(answer.status(), StatusCode::OK);
    let mut events: Events = Box::pin(answer.into_body().into_data_stream().eventsource());
    let endpoint = timeout(WAIT, events.next())
        .await
        .map_err(|_| fail("no endpoint event".to_owned()))?
        .ok_or_else(|| fail("the stream ended at once".to_owned()))?
        .map_err(|e| fail(e.to_string()))?;
    prop_assert_eq!(&endpoint.event, "endpoint");
    Ok((events, endpoint.data))
}

async fn run_case(router: &axum::Router, posts: &[Post]) -> Result<(), TestCaseError> {
    let (mut events, endpoint) = open(router).await?;
    for post in posts {
        let uri = match &post.names {
            Names::Real => endpoint.clone(),
            Names::Omit => "/messages".to_owned(),
            Names::Other(text) => {
                let id: String = url_safe(text);
                format!("/messages?sessionId={id}")
            }
        };
        let answer = router
            .clone()
            .oneshot(request(
                &uri,
                Method::POST,
                post.content_type,
                post.body.clone(),
            ))
            .await
            .map_err(|e: Infallible| fail(e.to_string()))?;
        let status = answer.status().as_u16();
        prop_assert!(
            ALLOWED.contains(&status),
            "status {} for {:?}",
            status,
            post
        );
    }
    // The junk took nothing down: the stream answers a ping posted now.
    let ping = br#"{"jsonrpc":"2.0","id":"fuzz-final","method":"ping"}"#.to_vec();
    let answer = router
        .clone()
        .oneshot(request(
            &endpoint,
            Method::POST,
            Some("application/json"),
            ping,
        ))
        .await
        .map_err(|e: Infallible| fail(e.to_string()))?;
    prop_assert_eq!(answer.status().as_u16(), 202);
    loop {
        let event = timeout(WAIT, events.next())
            .await
            .map_err(|_| fail("no answer to the ping on the stream".to_owned()))?
            .ok_or_else(|| fail("the stream ended".to_owned()))?
            .map_err(|e| fail(e.to_string()))?;
        if event.data.contains("fuzz-final") {
            return Ok(());
        }
    }
}

/// `text` with only the characters a query value may hold unescaped.
fn url_safe(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '%'))
        .collect()
}

#[test]
fn legacy_sse() {
    const TARGET: &str = "legacy_sse";
    let runtime = fuzz::runtime(TARGET);
    let router = runtime.block_on(async {
        let config = SseConfig::default().max_body(MAX_BODY);
        LegacySse::new(config, tidewire_demo::demo_server()).router("/sse", "/messages")
    });
    fuzz::run_scaled(TARGET, 2, vec(post(), 0..6), |posts| {
        server_case(&runtime, TARGET, run_case(&router, &posts))
    });
    assert_eq!(fuzz::worker_panics(TARGET), 0, "server tasks panicked");
}
