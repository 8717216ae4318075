//! The client's HTTP: no redirects followed (an authorization response is read from its
//! `Location`), bodies bounded, every failure an [`AuthError`].

use std::time::Duration;

use serde::de::DeserializeOwned;

use super::error::AuthError;

/// The largest metadata or token response read.
const MAX_BODY: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct Http {
    client: reqwest::Client,
}

impl Http {
    pub(crate) fn new(timeout: Duration) -> Result<Self, AuthError> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .build()
            .map_err(|e| AuthError::Http {
                url: String::new(),
                reason: e.to_string(),
            })?;
        Ok(Self { client })
    }

    pub(crate) fn raw(&self) -> &reqwest::Client {
        &self.client
    }

    /// GETs `url` as JSON; 404 (or a body that is not `T`) is [`AuthError::NotFound`].
    pub(crate) async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<T, AuthError> {
        let response = self
            .client
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| failed(url, &e))?;
        if !response.status().is_success() {
            return Err(AuthError::NotFound {
                url: url.to_owned(),
            });
        }
        let body = read(url, response).await?;
        serde_json::from_slice(&body).map_err(|_| AuthError::NotFound {
            url: url.to_owned(),
        })
    }
}

/// The body of `response`, at most [`MAX_BODY`] bytes.
pub(crate) async fn read(url: &str, response: reqwest::Response) -> Result<Vec<u8>, AuthError> {
    crate::fetch::bounded(response, MAX_BODY)
        .await
        .map_err(|reason| AuthError::Http {
            url: url.to_owned(),
            reason,
        })
}

pub(crate) fn failed(url: &str, error: &reqwest::Error) -> AuthError {
    AuthError::Http {
        url: url.to_owned(),
        reason: error.to_string(),
    }
}
