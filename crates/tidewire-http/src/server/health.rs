//! Health checks for a load balancer or an orchestrator: `/healthz` (the process is alive and
//! serving HTTP) and `/readyz` (it takes new sessions; 503 while it drains).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tidewire_core::lifecycle::{DRAINING_RETRY_AFTER_SECS, Lifecycle};

/// A router answering `GET /healthz` and `GET /readyz` for the server whose `lifecycle` it is
/// (`Server::lifecycle`, or [`StreamableHttp::lifecycle`](super::StreamableHttp::lifecycle)).
///
/// - `/healthz`: 200 `{"status":"alive"}` for as long as the process serves HTTP.
/// - `/readyz`: 200 `{"status":"ready","inFlight":N}`; once the server drains, 503
///   `{"status":"draining","inFlight":N}` with `Retry-After`, so a load balancer takes it out
///   of its pool before its sessions end.
///
/// Both answer any `Host` (a load balancer probes by address) and say nothing a client could
/// not learn otherwise; merge the router beside the MCP endpoint, outside any authentication
/// layer.
///
/// ```
/// use tidewire_core::lifecycle::Lifecycle;
/// use tidewire_http::server::health;
///
/// let lifecycle = Lifecycle::new(); // in a real server: `server.lifecycle().clone()`
/// let app: axum::Router = axum::Router::new().merge(health(lifecycle));
/// ```
pub fn health(lifecycle: Lifecycle) -> axum::Router {
    axum::Router::new()
        .route("/healthz", axum::routing::get(alive))
        .route(
            "/readyz",
            axum::routing::get(move || {
                let lifecycle = lifecycle.clone();
                async move { ready(&lifecycle) }
            }),
        )
}

async fn alive() -> Response {
    json(StatusCode::OK, r#"{"status":"alive"}"#.to_owned())
}

fn ready(lifecycle: &Lifecycle) -> Response {
    let in_flight = lifecycle.in_flight();
    if !lifecycle.is_draining() {
        return json(
            StatusCode::OK,
            format!(r#"{{"status":"ready","inFlight":{in_flight}}}"#),
        );
    }
    let mut response = json(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(r#"{{"status":"draining","inFlight":{in_flight}}}"#),
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(DRAINING_RETRY_AFTER_SECS),
    );
    response
}

fn json(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(app: &axum::Router, path: &str) -> (StatusCode, String, Option<String>) {
        let request = Request::get(path).body(Body::empty()).expect("a request");
        let response = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            app.clone().oneshot(request),
        )
        .await
        .expect("answered in time")
        .expect("infallible");
        let status = response.status();
        let retry = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = axum::body::to_bytes(response.into_body(), 1024)
            .await
            .expect("a body");
        (status, String::from_utf8_lossy(&body).into_owned(), retry)
    }

    #[tokio::test]
    async fn readiness_turns_503_with_retry_after_when_the_drain_starts() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let lifecycle = Lifecycle::new();
            let app = health(lifecycle.clone());
            let _request = lifecycle.track();
            assert_eq!(
                get(&app, "/readyz").await,
                (
                    StatusCode::OK,
                    r#"{"status":"ready","inFlight":1}"#.to_owned(),
                    None
                )
            );
            lifecycle.start_draining();
            let (status, body, retry) = get(&app, "/readyz").await;
            assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(body, r#"{"status":"draining","inFlight":1}"#);
            assert_eq!(retry.as_deref(), Some("1"));
            // Alive all along.
            let (status, body, _) = get(&app, "/healthz").await;
            assert_eq!(
                (status, body.as_str()),
                (StatusCode::OK, r#"{"status":"alive"}"#)
            );
        })
        .await
        .expect("the test took longer than its limit");
    }
}
