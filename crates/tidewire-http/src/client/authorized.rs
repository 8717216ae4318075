//! Sending a request with the transport's [`Authorizer`](tidewire_core::http::Authorizer):
//! its `Authorization` header on every try, and one more try after a 401 or 403 when it got
//! new credentials.

use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, StatusCode};
use tidewire_core::http::AuthorizerSlot;

/// `request` with the authorizer's header (replacing any `Authorization` set before).
pub(crate) fn with_authorization(
    request: reqwest::RequestBuilder,
    auth: &AuthorizerSlot,
) -> reqwest::RequestBuilder {
    with_header(request, auth.authorization())
}

/// `request` with `header` as its `Authorization` (replacing any set before).
fn with_header(
    request: reqwest::RequestBuilder,
    header: Option<HeaderValue>,
) -> reqwest::RequestBuilder {
    match header {
        Some(value) => {
            let mut headers = HeaderMap::new();
            headers.insert(AUTHORIZATION, value);
            request.headers(headers)
        }
        None => request,
    }
}

/// Sends the request `build` makes of `body`, with credentials the authorizer renewed if they
/// were about to expire; after a 401 or 403, when the authorizer got new credentials, sends it
/// once more with them. Without an authorizer the body is not copied (and with one, a
/// `bytes::Bytes` body is shared, not copied).
#[doc(hidden)]
pub async fn send<B: Clone>(
    auth: &AuthorizerSlot,
    body: B,
    build: impl Fn(B) -> reqwest::RequestBuilder,
) -> reqwest::Result<reqwest::Response> {
    let Some(authorizer) = &auth.0 else {
        return build(body).send().await;
    };
    authorizer.renew().await;
    let sent = authorizer.authorization();
    let response = with_header(build(body.clone()), sent.clone())
        .send()
        .await?;
    let status = response.status();
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        return Ok(response);
    }
    let challenges: Vec<String> = response
        .headers()
        .get_all(WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_owned)
        .collect();
    if !authorizer.refused(status, &challenges, sent.as_ref()).await {
        return Ok(response);
    }
    let renewed = authorizer.authorization();
    let response = with_header(build(body), renewed.clone()).send().await?;
    let status = response.status();
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        authorizer.accepted(renewed.as_ref());
    }
    Ok(response)
}
