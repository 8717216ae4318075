//! Serving an axum app on a TCP listener, the way MCP traffic wants it.

use std::future::Future;

use axum::serve::ListenerExt;

/// Serves `app` on `listener` until the process ends, with `TCP_NODELAY` on every connection:
/// without it, the small events of an SSE stream (progress, logs) wait behind Nagle's
/// algorithm, up to 40 ms each.
///
/// ```no_run
/// # async fn run(app: axum::Router) -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// tidewire_http::server::serve(listener, app).await
/// # }
/// ```
///
/// # Errors
/// When accepting connections fails for good.
pub async fn serve(listener: tokio::net::TcpListener, app: axum::Router) -> std::io::Result<()> {
    serve_until(listener, app, std::future::pending()).await
}

/// As [`serve`], until `shutdown` resolves; then connections are closed gracefully (open SSE
/// streams hold a graceful shutdown: end them first, for example with
/// [`StreamableHttp::close_all`](super::StreamableHttp::close_all)).
///
/// # Errors
/// When accepting connections fails for good.
pub async fn serve_until(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}
