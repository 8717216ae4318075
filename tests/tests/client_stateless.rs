//! tidewire's client on the stateless revision (2026-07-28) against the demo server, over the
//! connection transports (in-memory, stdio, WebSocket): the eight peer scenarios (sampling /
//! elicitation / roots now travel as `input_required` rounds answered by the same handlers, and
//! change notifications through `subscriptions/listen`), in `Era::Modern` and `Era::Auto`;
//! several rounds and a prompt that asks; and how `Auto` and `Modern` meet a session-only server.
//!
//! On Streamable HTTP, `Era::Modern` runs over `StatelessHttpConnector` (each request a POST of its
//! own; closing it cancels); `Era::Auto` over HTTP needs a change of transport and is not written
//! yet.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use tidewire_client::Era;
use tidewire_core::ProtocolVersion;
use tidewire_core::transport::memory;
use tidewire_server::Eras;
use tidewire_tests::harness::{self, Counters, TransportUnderTest, connect_with, peer_client};
use tidewire_tests::scenarios::{self, text_of};
use tokio::time::timeout;

use tidewire_tests::LIMIT;

/// The peer scenarios that need nothing but requests.
const SCENARIOS: [&str; 6] = [
    "echo",
    "progress",
    "cancel",
    "sampling",
    "elicitation",
    "roots",
];

fn transports() -> Vec<TransportUnderTest> {
    vec![
        TransportUnderTest::Memory,
        TransportUnderTest::Stdio {
            program: env!("CARGO_BIN_EXE_tidewire-demo-stdio").into(),
            args: Vec::new(),
        },
        TransportUnderTest::WebSocket,
    ]
}

async fn peer_scenarios_in(era: Era) {
    for transport in transports() {
        for scenario in SCENARIOS {
            println!("{scenario} over {} ({era:?})", transport.name());
            let counters = Arc::new(Counters::default());
            let h = timeout(
                LIMIT,
                connect_with(&transport, peer_client(&counters).era(era), counters),
            )
            .await
            .expect("connected in time");
            assert_eq!(h.client.era(), Era::Modern, "{}", transport.name());
            assert_eq!(h.client.protocol_version(), ProtocolVersion::V2026_07_28);
            assert_eq!(h.client.server_info().name, "tidewire-demo");
            let outcome = timeout(LIMIT, scenarios::run_peer_scenario(&h, scenario))
                .await
                .expect("the scenario finished in time");
            h.finish().await;
            if let Err(e) = outcome {
                panic!("{scenario} over {} ({era:?}): {e}", transport.name());
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_scenarios_in_era_modern() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        peer_scenarios_in(Era::Modern).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_scenarios_in_era_auto() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        peer_scenarios_in(Era::Auto).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_scenarios_over_streamable_http_in_era_modern() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        for scenario in SCENARIOS {
            let (url, _server, _endpoint) = harness::start_http(harness::HttpMode::Sse).await;
            let counters = Arc::new(Counters::default());
            let transport = tidewire_http::client::StatelessHttpConnector::new(url)
                .connect()
                .await
                .expect("a stateless HTTP transport");
            let client = timeout(
                LIMIT,
                peer_client(&counters).era(Era::Modern).connect(transport),
            )
            .await
            .expect("connected in time")
            .expect("connected");
            assert_eq!(client.era(), Era::Modern);
            let h = harness::Harness::for_client(client, "http-stateless", counters);
            let outcome = timeout(LIMIT, scenarios::run_peer_scenario(&h, scenario))
                .await
                .expect("the scenario finished in time");
            h.finish().await;
            if let Err(e) = outcome {
                panic!("{scenario} over Streamable HTTP (Modern): {e}");
            }
        }
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_rounds_and_a_prompt_that_asks() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let counters = Arc::new(Counters::default());
        let h = connect_with(
            &TransportUnderTest::Memory,
            peer_client(&counters).era(Era::Modern),
            counters.clone(),
        )
        .await;
        // Two questions, one round each: the canned elicitation answers a name, not a colour.
        let text = timeout(
            LIMIT,
            text_of(
                &h.client,
                "test_input_required_result_multi_round",
                json!({}),
            ),
        )
        .await
        .expect("in time")
        .expect("multi-round");
        assert_eq!(text, "peer-canned-name likes ?");
        assert_eq!(counters.elicitation.load(Ordering::SeqCst), 2);
        // Three questions in one round.
        let text = text_of(
            &h.client,
            "test_input_required_result_multiple_inputs",
            json!({}),
        )
        .await
        .expect("multiple inputs");
        assert!(text.contains("peer-canned-name (2 roots)"), "{text}");
        assert_eq!(counters.elicitation.load(Ordering::SeqCst), 3);
        assert_eq!(counters.sampling.load(Ordering::SeqCst), 1);
        assert_eq!(counters.roots.load(Ordering::SeqCst), 1);
        // prompts/get asks too.
        let prompt = h
            .client
            .get_prompt("test_input_required_result_prompt", ())
            .await
            .expect("prompt");
        assert_eq!(prompt.messages.len(), 1);
        assert_eq!(counters.elicitation.load(Ordering::SeqCst), 4);
        // A client with no handler for a question fails clearly.
        let bare = connect_with(
            &TransportUnderTest::Memory,
            tidewire_client::Client::builder(tidewire_core::schema::Implementation::new(
                "bare", "1",
            ))
            .era(Era::Modern),
            Arc::new(Counters::default()),
        )
        .await;
        let error = bare
            .client
            .call_tool("test_input_required_result_elicitation", json!({}))
            .await
            .expect_err("no elicitation capability");
        assert_eq!(error.remote().map(|e| e.code), Some(-32021), "{error}");
        bare.finish().await;
        h.finish().await;
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_falls_back_to_a_session_and_modern_says_it_cannot() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let legacy_only = || tidewire_demo::demo_builder().eras(Eras::Legacy).build();
        let counters = Arc::new(Counters::default());

        let server = legacy_only();
        let (a, b) = memory::duplex();
        tokio::spawn(server.serve(a).1);
        let client = timeout(LIMIT, peer_client(&counters).era(Era::Auto).connect(b))
            .await
            .expect("in time")
            .expect("auto connects");
        assert_eq!(client.era(), Era::Legacy);
        assert_eq!(client.protocol_version(), ProtocolVersion::V2025_11_25);
        assert_eq!(
            text_of(&client, "echo", json!({"text": "hi"})).await,
            Ok("hi".to_owned())
        );
        client.close().await;

        let server = legacy_only();
        let (a, b) = memory::duplex();
        tokio::spawn(server.serve(a).1);
        let refused = timeout(LIMIT, peer_client(&counters).era(Era::Modern).connect(b))
            .await
            .expect("in time");
        let error = refused.expect_err("the server serves sessions only");
        assert_eq!(error.remote().map(|e| e.code), Some(-32601), "{error}");

        // And the default stays the session era, against a dual server too.
        let h = harness::connect(&TransportUnderTest::Memory).await;
        assert_eq!(h.client.era(), Era::Legacy);
        h.finish().await;
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_parameters_travel_in_headers_once_the_tool_is_listed() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _server, _endpoint) = harness::start_http(harness::HttpMode::Sse).await;
        let transport = tidewire_http::client::StatelessHttpConnector::new(url)
            .connect()
            .await
            .expect("a stateless HTTP transport");
        let counters = Arc::new(Counters::default());
        let client = timeout(
            LIMIT,
            peer_client(&counters).era(Era::Modern).connect(transport),
        )
        .await
        .expect("in time")
        .expect("connected");
        let args = json!({"region": "Zürich ✓"});
        // Before the tool is listed the client cannot know its header: the server says so.
        let error = client
            .call_tool("test_x_mcp_header", args.clone())
            .await
            .expect_err("no Mcp-Param-Region yet");
        assert_eq!(error.remote().map(|e| e.code), Some(-32020), "{error}");
        client.list_all_tools().await.expect("tools/list");
        let text = text_of(&client, "test_x_mcp_header", args)
            .await
            .expect("the header matches");
        assert_eq!(text, "region: Zürich ✓");
        client.close().await;
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_auto_picks_the_era_an_http_server_speaks() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        use tidewire::connect::{Fallback, auto as connect_auto};
        use tidewire_http::server::{HttpConfig, StreamableHttp};

        // A dual server: the stateless revision.
        let (url, _server, _endpoint) = harness::start_http(harness::HttpMode::Sse).await;
        let counters = Arc::new(Counters::default());
        let (client, how) = timeout(LIMIT, connect_auto(&url, || peer_client(&counters)))
            .await
            .expect("in time")
            .expect("connects");
        assert!(matches!(how, Fallback::Stateless), "{how:?}");
        assert_eq!(client.era(), Era::Modern);
        assert_eq!(
            text_of(&client, "echo", json!({"text": "a"})).await,
            Ok("a".to_owned())
        );
        client.close().await;

        // A server of sessions only: Streamable HTTP with initialize.
        let server = tidewire_demo::demo_builder().eras(Eras::Legacy).build();
        let endpoint = StreamableHttp::new(HttpConfig::default(), server);
        let app = endpoint.router("/mcp");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let (client, how) = timeout(
            LIMIT,
            connect_auto(&format!("http://{addr}/mcp"), || peer_client(&counters)),
        )
        .await
        .expect("in time")
        .expect("connects");
        assert!(matches!(how, Fallback::StreamableHttp(_)), "{how:?}");
        assert_eq!(client.era(), Era::Legacy);
        assert_eq!(
            text_of(&client, "echo", json!({"text": "b"})).await,
            Ok("b".to_owned())
        );
        client.close().await;
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_are_cached_for_their_ttl_and_dropped_on_change() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        use futures::StreamExt;
        use std::sync::atomic::AtomicUsize;
        use tidewire_core::schema::{ReadResourceResult, Resource, SubscriptionFilter};
        use tidewire_server::{CacheHint, CacheItem};

        let reads = Arc::new(AtomicUsize::new(0));
        let counted = reads.clone();
        let server = tidewire_demo::demo_builder()
            .resource(Resource::new("mem://cached", "cached"), move |uri, _ctx| {
                let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
                async move { Ok(ReadResourceResult::text(uri, format!("read {n}"))) }
            })
            .cache_hint_for(
                CacheItem::Resource("mem://cached".into()),
                CacheHint::private(Duration::from_secs(60)),
            )
            .build();
        let (a, b) = memory::duplex();
        tokio::spawn(server.serve(a).1);
        let counters = Arc::new(Counters::default());
        let client = timeout(LIMIT, peer_client(&counters).era(Era::Modern).connect(b))
            .await
            .expect("in time")
            .expect("connected");
        let text = |r: &ReadResourceResult| {
            serde_json::to_value(&r.contents[0]).expect("json")["text"].clone()
        };

        let first = client.read_resource("mem://cached").await.expect("read");
        let second = client.read_resource("mem://cached").await.expect("read");
        assert_eq!(
            (text(&first), text(&second)),
            (json!("read 1"), json!("read 1"))
        );
        assert_eq!(
            reads.load(Ordering::SeqCst),
            1,
            "the second read came from the cache"
        );
        let fresh = client
            .fresh()
            .read_resource("mem://cached")
            .await
            .expect("read");
        assert_eq!(text(&fresh), json!("read 2"));
        // An update heard on a listen drops the cached read.
        let mut changes = client
            .listen(SubscriptionFilter {
                resource_subscriptions: Some(vec!["mem://cached".into()]),
                ..SubscriptionFilter::default()
            })
            .await
            .expect("listen");
        server.notify_resource_updated("mem://cached").await;
        timeout(LIMIT, changes.next())
            .await
            .expect("in time")
            .expect("an update")
            .expect("no lag");
        let after = client.read_resource("mem://cached").await.expect("read");
        assert_eq!(text(&after), json!("read 3"));
        changes.end().await.expect("end");
        client.close().await;
    })
    .await
    .expect("the test took longer than its limit");
}

/// Starts a slow crawl, gives up on it after 200 ms, and waits for the server to say the crawl
/// stopped before its end: the cancel reached it, in whichever era the client speaks.
async fn crawl_is_cancelled(client: &tidewire_client::Client) {
    let urls: Vec<String> = (0..100).map(|i| format!("u{i}")).collect();
    let given_up = client
        .call_tool("crawl", json!({"urls": urls, "delay_ms": 100}))
        .timeout(Duration::from_millis(200))
        .await;
    assert!(
        given_up.is_err_and(|e| e.is_timeout()),
        "the call ends at its timeout"
    );
    let stopped = async {
        loop {
            let status = client
                .call_tool("crawl_status", json!({}))
                .await
                .expect("crawl_status");
            let status: serde_json::Value =
                serde_json::from_str(status.first_text().unwrap_or("{}")).expect("JSON");
            if status["finished"] == true {
                assert_eq!(status["cancelled"], true, "{status}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    timeout(LIMIT, stopped).await.expect("the crawl stopped");
}

/// One era rule for every transport (issue 27): the default, `Era::Auto`, probes with
/// `server/discover` and speaks the newest era both sides offer — over `StreamableHttpConnector`
/// too, which carries both; HTTP+SSE carries sessions only. A call cancels in either era.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_negotiates_the_newest_era_both_offer_on_every_transport() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        use tidewire_http::server::{HttpConfig, StreamableHttp};

        let info = || tidewire_core::schema::Implementation::new("default", "1");
        let streamable = |url: String| async move {
            let transport = tidewire_http::client::StreamableHttpConnector::new(url)
                .connect()
                .await
                .expect("transport");
            timeout(
                LIMIT,
                tidewire_client::Client::builder(info()).connect(transport),
            )
            .await
            .expect("in time")
            .expect("connects")
        };
        // A server of both eras: the default over Streamable HTTP reaches 2026-07-28.
        let (url, _server, _endpoint) = harness::start_http(harness::HttpMode::Sse).await;
        let client = streamable(url.clone()).await;
        assert_eq!(client.era(), Era::Modern);
        assert_eq!(client.protocol_version().as_str(), "2026-07-28");
        assert_eq!(
            text_of(&client, "echo", json!({"text": "new"})).await,
            Ok("new".to_owned())
        );
        crawl_is_cancelled(&client).await;
        assert_eq!(
            text_of(&client, "echo", json!({"text": "after"})).await,
            Ok("after".to_owned())
        );
        client.close().await;
        // `Era::Modern` asks for it, over the same transport.
        let transport = tidewire_http::client::StreamableHttpConnector::new(url)
            .connect()
            .await
            .expect("transport");
        let client = timeout(
            LIMIT,
            tidewire_client::Client::builder(info())
                .era(Era::Modern)
                .connect(transport),
        )
        .await
        .expect("in time")
        .expect("connects");
        assert_eq!(client.era(), Era::Modern);
        client.close().await;

        // A server of the session era only: the probe is refused, and the default opens a session
        // on the same transport.
        let legacy_only = tidewire_demo::demo_builder().eras(Eras::Legacy).build();
        let http = StreamableHttp::new(HttpConfig::default(), legacy_only);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        tokio::spawn(axum::serve(listener, http.router("/mcp")).into_future());
        let client = streamable(url).await;
        assert_eq!(client.era(), Era::Legacy);
        assert_eq!(
            text_of(&client, "echo", json!({"text": "old"})).await,
            Ok("old".to_owned())
        );
        crawl_is_cancelled(&client).await;
        client.close().await;

        // Over a message stream, the default reaches the stateless revision of a dual server.
        let server = tidewire_demo::demo_server();
        let (a, b) = memory::duplex();
        tokio::spawn(server.serve(a).1);
        let client = timeout(LIMIT, tidewire_client::Client::builder(info()).connect(b))
            .await
            .expect("in time")
            .expect("connects");
        assert_eq!(client.era(), Era::Modern);
        client.close().await;
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fallback_picks_the_transport_the_server_speaks() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        use tidewire::connect::{Fallback, with_fallback};
        use tidewire_sse::server::SseConfig;

        let check = async {
            let builder = || peer_client(&Arc::new(Counters::default()));
            let (sse_url, _server, _sse) = harness::start_sse(SseConfig::default()).await;
            let (client, how) = with_fallback(&sse_url, builder).await.expect("legacy");
            assert!(matches!(how, Fallback::LegacySse { .. }), "{how:?}");
            client.ping().await.expect("ping over legacy SSE");
            client.close().await;
            let (http_url, _server, _http) = harness::start_http(harness::HttpMode::Sse).await;
            let (client, how) = with_fallback(&http_url, builder).await.expect("streamable");
            assert!(matches!(how, Fallback::StreamableHttp(_)), "{how:?}");
            client.ping().await.expect("ping over Streamable HTTP");
            client.close().await;
        };
        timeout(LIMIT, check).await.expect("in time");
    })
    .await
    .expect("the test took longer than its limit");
}

/// The fallback to legacy HTTP+SSE follows the HTTP status the transport read, never a status a
/// server writes into an error's `data`: an `initialize` answered 200 with an error claiming
/// `"httpStatus": 404` is that server's error, and no legacy stream is opened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_written_in_an_error_does_not_steer_the_fallback() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        use std::sync::atomic::AtomicUsize;

        use axum::routing::post;
        use tidewire::connect::{FallbackError, with_fallback};

        let gets = Arc::new(AtomicUsize::new(0));
        let counted = gets.clone();
        let app = axum::Router::new().route(
            "/mcp",
            post(|body: String| async move {
                let id = serde_json::from_str::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|request| request.get("id").cloned())
                    .unwrap_or(serde_json::Value::Null);
                let answer = json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {"code": -32600, "message": "not today", "data": {"httpStatus": 404}},
                });
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    answer.to_string(),
                )
            })
            .get(move || async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::http::StatusCode::METHOD_NOT_ALLOWED
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let server = tokio::spawn(async move { axum::serve(listener, app).await });

        let builder = || peer_client(&Arc::new(Counters::default())).era(Era::Legacy);
        let failed = timeout(LIMIT, with_fallback(&url, builder))
            .await
            .expect("in time")
            .map(|(_, how)| how)
            .expect_err("the server refused the handshake");
        let FallbackError::StreamableHttp(error) = failed else {
            panic!("a fallback was tried: {failed:?}");
        };
        assert_eq!(error.http_status(), None, "{error:?}");
        assert_eq!(error.remote().map(|e| e.code), Some(-32600), "{error:?}");
        assert_eq!(
            gets.load(Ordering::SeqCst),
            0,
            "no legacy stream was opened"
        );
        server.abort();
    })
    .await
    .expect("the test took longer than its limit");
}
