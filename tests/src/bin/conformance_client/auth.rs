//! The `auth/*` scenarios: the Streamable HTTP transport (either era) has an `OAuthSession` as
//! its authorizer, so a 401 or 403 challenge starts `tidewire_auth`'s OAuth client (discovery,
//! registration, PKCE, with a front channel that follows the mock authorization server's
//! immediate redirect) and the refused request is sent again with the token.

use serde_json::Value;
use tidewire_auth::client::{
    AuthMethod, ClientKey, Credentials, GrantFlow, HeadlessRedirect, IdentityProvider, OAuthClient,
    OAuthConfig, OAuthSession, TrustedIssuer, WorkloadAssertion,
};
use tidewire_client::{Client, Era};
use tidewire_core::schema::Implementation;
use tidewire_http::client::{StatelessHttpConnector, StreamableHttpConnector};

/// The redirect URI registered; the mock never visits it.
const REDIRECT_URI: &str = "http://localhost:3000/callback";
/// This client's metadata document URL, where a server accepts one as a client id.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// A client of the MCP endpoint `url` whose transport gets its tokens from the OAuth client:
/// the first 401 starts the flow, a 403 `insufficient_scope` steps up, a later 401 starts over.
pub(crate) async fn connect(url: &str, modern: bool) -> Result<Client, String> {
    let oauth = OAuthClient::new(config()?).map_err(|e| e.to_string())?;
    let session = OAuthSession::new(oauth, url);
    let info = Implementation::new("tidewire-conformance-client", env!("CARGO_PKG_VERSION"));
    let connected = if modern {
        let transport = StatelessHttpConnector::new(url)
            .authorizer(session)
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        Client::builder(info)
            .era(Era::Modern)
            .connect(transport)
            .await
    } else {
        let transport = StreamableHttpConnector::new(url)
            .authorizer(session)
            .connect()
            .await
            .map_err(|e| e.to_string())?;
        Client::builder(info)
            .era(Era::Legacy)
            .connect(transport)
            .await
    };
    connected.map_err(|e| format!("connecting: {e}"))
}

/// The OAuth client, with what the scenario's context gives: pre-registered credentials (a
/// secret, or a signing key), and for the extensions the grant they exercise.
fn config() -> Result<OAuthConfig, String> {
    let mut config = OAuthConfig::new(
        "tidewire-conformance-client",
        REDIRECT_URI,
        HeadlessRedirect::new(),
    );
    config.client_metadata_url = Some(CLIENT_METADATA_URL.to_owned());
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let field = |name: &str| context.get(name).and_then(Value::as_str).map(str::to_owned);
    if let Some(id) = field("client_id") {
        let mut credentials = Credentials::pre_registered(id, field("client_secret"));
        if let Some(pem) = field("private_key_pem") {
            let algorithm = field("signing_algorithm").unwrap_or_else(|| "ES256".to_owned());
            config.client_key =
                Some(ClientKey::from_pem(pem.as_bytes(), &algorithm).map_err(|e| e.to_string())?);
            credentials = credentials.with_method(AuthMethod::PrivateKeyJwt);
        }
        // The suite's context names no issuer: its mock authorization server is the one the
        // mock MCP server names, which this harness trusts as much as the credentials.
        let trusted =
            field("issuer").map_or(TrustedIssuer::NamedByTheServer, TrustedIssuer::Exactly);
        config.pre_registered = Some((credentials, trusted));
    }
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    if scenario.starts_with("auth/client-credentials") {
        config.flow = GrantFlow::ClientCredentials;
    } else if let Some(jwt) = field("valid_jwt") {
        config.flow = GrantFlow::JwtBearer(WorkloadAssertion(jwt));
    } else if let (Some(token_endpoint), Some(id_token)) =
        (field("idp_token_endpoint"), field("idp_id_token"))
    {
        config.flow = GrantFlow::IdentityAssertion(IdentityProvider {
            token_endpoint,
            id_token,
            client: field("idp_client_id").map(|id| Credentials::pre_registered(id, None)),
        });
    }
    Ok(config)
}
