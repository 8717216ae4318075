//! OTLP/HTTP export (JSON), through a reqwest 0.12 blocking client of ours: the exporter's own
//! client is reqwest 0.13, a second HTTP stack in every build that has ours. The exporter calls
//! it from its own threads (the batch span processor's and the periodic metric reader's), where
//! a blocking client belongs.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer a collector's response is read to.
const MAX_ANSWER: u64 = 1 << 20;

/// The exporter's HTTP client: reqwest 0.12's blocking one.
#[derive(Debug, Clone)]
pub(crate) struct BlockingClient(reqwest::blocking::Client);

impl BlockingClient {
    pub(crate) fn new() -> Result<Self, reqwest::Error> {
        reqwest::blocking::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map(Self)
    }

    fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::blocking::Request::try_from(request)?;
        let response = self.0.execute(request)?;
        let mut answer = Response::builder().status(response.status());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let mut body = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(response, MAX_ANSWER), &mut body)?;
        Ok(answer.body(Bytes::from(body))?)
    }
}

// `HttpClient` is an `async_trait`; this is its desugared form, so no proc macro is needed.
impl HttpClient for BlockingClient {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Result<Response<Bytes>, HttpError>> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move { self.send(request) })
    }
}
