"""An MCP server behind OAuth, with its own authorization server, built from the MCP SDK's
server auth pieces (as hosted MCP servers are: protected-resource metadata, authorization
server metadata, dynamic client registration, authorization code with PKCE — the SDK checks
the verifier — refresh, revocation).

The consent screen is skipped: ``authorize`` answers at once with a redirect carrying the
code, as a person who clicks "Allow" would get: the person signed in there is
``account`` (a test sets it before the link is opened), and the ``whoami`` tool names the
account the call's token was issued to. Access tokens live ``token_lifetime`` seconds;
``issued`` counts the tokens handed out by grant type.
"""

from __future__ import annotations

import secrets
import time
from collections import Counter

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

SCOPE = "tools"


class FakeAuthorizationServer:
    """The SDK's ``OAuthAuthorizationServerProvider``, in memory."""

    def __init__(self, token_lifetime: int = 3600) -> None:
        self.token_lifetime = token_lifetime
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.issued: Counter[str] = Counter()
        self.account = "operator"  # who is signed in at the consent screen
        self.accounts: dict[str, str] = {}  # code, access or refresh token -> its account

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        code = AuthorizationCode(
            code=secrets.token_urlsafe(16),
            scopes=params.scopes or [SCOPE],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        self.accounts[code.code] = self.account
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]  # a code is good once
        code = authorization_code
        account = self.accounts.pop(code.code, "")
        return self._issue(client, code.scopes, code.resource, "authorization_code", account)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        if self.refresh.pop(refresh_token.token, None) is None:
            raise TokenError("invalid_grant", "refresh token already used")
        scopes = scopes or refresh_token.scopes
        account = self.accounts.get(refresh_token.token, "")
        return self._issue(client, scopes, refresh_token.resource, "refresh_token", account)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def _issue(
        self,
        client: OAuthClientInformationFull,
        scopes: list[str],
        resource: str | None,
        grant: str,
        account: str,
    ) -> OAuthToken:
        """Tokens for the resource the client named (RFC 8707), as the SDK checks them."""
        self.issued[grant] += 1
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        expires = int(time.time()) + self.token_lifetime
        client_id = client.client_id or ""
        self.accounts[access] = self.accounts[refresh] = account
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=expires, resource=resource
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            expires_in=self.token_lifetime,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )


def build(base_url: str, authority: FakeAuthorizationServer) -> MCPServer:
    """The protected MCP server (at ``base_url``/mcp) and its authorization server (at
    ``base_url``), one app; an ``echo`` tool."""
    auth = AuthSettings(
        issuer_url=base_url,  # type: ignore[arg-type]
        resource_server_url=f"{base_url}/mcp",  # type: ignore[arg-type]
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=[SCOPE], default_scopes=[SCOPE]
        ),
        revocation_options=RevocationOptions(enabled=True),
        required_scopes=[SCOPE],
        validate_token_resource=True,  # a token for another resource is refused
    )
    server = MCPServer("guarded", auth_server_provider=authority, auth=auth)

    @server.tool()
    def echo(text: str) -> str:
        """Repeat the text."""
        return text

    @server.tool()
    def whoami() -> str:
        """The account this call's token was issued to."""
        token = get_access_token()
        return authority.accounts.get(token.token, "") if token else ""

    return server
