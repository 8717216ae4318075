"""An OAuth 2.1 authorization server on the official MCP Python SDK, for tidewire's tests.

The protocol is the SDK's own (mcp.server.auth.routes: RFC 8414 metadata, dynamic client
registration, the authorization endpoint with PKCE, the token endpoint with client
authentication, revocation). What an SDK user writes is here: the provider that keeps clients,
codes and tokens in memory. It approves every authorization request at once for the user
"alice", rotates refresh tokens (each one works once), and issues opaque access tokens that
the resource server checks at /introspect (RFC 7662, as the client resource-server:rs-secret).

Test controls (not OAuth): POST /control/revoke-access, POST /control/revoke-refresh,
POST /control/lifetime?seconds=N, GET /control/grants (every token request that reached the
provider, in order: "authorization_code", "refresh_token", "refresh_token:refused").

Usage: authorization_server.py  -- prints its issuer URL (http://127.0.0.1:PORT/) on stdout.
"""

import base64
import secrets
import socket
import sys
import time

import uvicorn
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.routes import create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

SCOPES = ["mcp:use", "mcp:admin", "offline_access"]
INTROSPECTION_CLIENT = "Basic " + base64.b64encode(b"resource-server:rs-secret").decode()


class Provider:
    """Clients, codes and tokens in memory."""

    def __init__(self) -> None:
        self.lifetime = 3600
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}
        self.grants: list[str] = []

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="alice",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code: str):
        code = self.codes.get(authorization_code)
        return code if code and code.client_id == client.client_id else None

    async def exchange_authorization_code(self, client, authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        self.grants.append("authorization_code")
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token: str):
        token = self.refresh.get(refresh_token)
        if token is None or token.client_id != client.client_id:
            self.grants.append("refresh_token:refused")
            return None
        return token

    async def exchange_refresh_token(self, client, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        # Rotation: the refresh token just used stops working.
        self.refresh.pop(refresh_token.token, None)
        self.grants.append("refresh_token")
        return self.issue(client.client_id, scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        access = self.access.get(token)
        if access is None or (access.expires_at and access.expires_at < time.time()):
            return None
        return access

    async def revoke_token(self, token) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = secrets.token_urlsafe(32)
        refresh = secrets.token_urlsafe(32)
        expires = int(time.time()) + self.lifetime
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires,
            resource=resource, subject="alice",
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource, subject="alice",
        )
        return OAuthToken(
            access_token=access, token_type="Bearer", expires_in=self.lifetime,
            refresh_token=refresh, scope=" ".join(scopes),
        )


def control_routes(provider: Provider, issuer: str) -> list[Route]:
    async def introspect(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != INTROSPECTION_CLIENT:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        form = await request.form()
        access = await provider.load_access_token(str(form.get("token", "")))
        if access is None:
            return JSONResponse({"active": False})
        return JSONResponse({
            "active": True, "sub": access.subject, "client_id": access.client_id,
            "scope": " ".join(access.scopes), "exp": access.expires_at, "aud": access.resource,
            "iss": issuer,
        })

    async def revoke_access(_: Request) -> JSONResponse:
        provider.access.clear()
        return JSONResponse({})

    async def revoke_refresh(_: Request) -> JSONResponse:
        provider.refresh.clear()
        return JSONResponse({})

    async def lifetime(request: Request) -> JSONResponse:
        provider.lifetime = int(request.query_params["seconds"])
        return JSONResponse({})

    async def grants(_: Request) -> JSONResponse:
        return JSONResponse(provider.grants)

    return [
        Route("/introspect", introspect, methods=["POST"]),
        Route("/control/revoke-access", revoke_access, methods=["POST"]),
        Route("/control/revoke-refresh", revoke_refresh, methods=["POST"]),
        Route("/control/lifetime", lifetime, methods=["POST"]),
        Route("/control/grants", grants, methods=["GET"]),
    ]


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    issuer = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    provider = Provider()
    routes = create_auth_routes(
        provider,
        issuer_url=AnyHttpUrl(issuer),
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=SCOPES, default_scopes=SCOPES,
        ),
        revocation_options=RevocationOptions(enabled=True),
    )
    app = Starlette(routes=routes + control_routes(provider, issuer))
    print(issuer, flush=True)
    sys.stdout = sys.stderr  # uvicorn's log stays off stdout
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
