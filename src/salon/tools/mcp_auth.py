"""OAuth for remote MCP servers, on the MCP SDK's client auth (discovery of the protected
resource's and the authorization server's metadata, dynamic client registration or a
configured client id, authorization code with PKCE, refresh).

The operator authorizes once: ``salon tools auth SERVER`` prints the authorization link
and takes the redirect on a one-shot loopback listener. Tokens (and the client
registration) are kept in the store sealed with Fernet under a key from ``SALON_TOKEN_KEY``,
never logged, refreshed before they expire, and forgotten by ``--revoke``. A bot never
starts its own authorization: a server it has no tokens for is "not authorized". A
person's (``oauth.per_user`` with ``callback_url``) it does start, and sends them the link
in a direct message (``salon.tools.oauth_desk``).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Protocol
from urllib.parse import parse_qs, urlsplit

import httpx2
from cryptography.fernet import Fernet, InvalidToken
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from salon.config.tools import TOKEN_KEY_ENV
from salon.errors import ToolError
from salon.tools.link import NotAuthorized

__all__ = [
    "KEY_ENV",
    "Loopback",
    "NotAuthorized",
    "SealedStorage",
    "Sealer",
    "TokenKeeper",
    "authorize",
    "oauth",
    "run_authorization",
    "tokens_kind",
]

KEY_ENV = TOKEN_KEY_ENV
_EARLY = 60.0  # seconds before a token's expiry that it is refreshed
_CALLBACK_PATH = "/callback"


class TokenKeeper(Protocol):
    """Where sealed tokens are kept (the store's ``tokens`` part)."""

    async def get(self, bot: str, server: str, kind: str) -> bytes | None: ...

    async def put(self, bot: str, server: str, kind: str, sealed: bytes) -> None: ...

    async def forget(self, bot: str, server: str, kind: str | None = None) -> int: ...


def tokens_kind(person: str | None) -> str:
    """What the store calls the bot's tokens, or one person's (per_user)."""
    return "tokens" if person is None else f"tokens@{person}"


class Sealer:
    """Fernet under a key derived from the operator's secret (any long random string)."""

    def __init__(self, secret: str) -> None:
        digest = hashlib.sha256(secret.encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))

    def seal(self, data: bytes) -> bytes:
        return self._fernet.encrypt(data)

    def open(self, sealed: bytes) -> bytes:
        try:
            return self._fernet.decrypt(sealed)
        except InvalidToken:
            raise ToolError(
                f"the stored MCP tokens cannot be read with this {KEY_ENV}; "
                "authorize again (salon tools auth SERVER)"
            ) from None


class SealedStorage:
    """The SDK's token storage, in the store, sealed; a configured client id instead of a
    registration where there is one."""

    def __init__(
        self,
        part: TokenKeeper,
        bot: str,
        server: str,
        sealer: Sealer,
        client: OAuthClientInformationFull | None = None,
        *,
        person: str | None = None,
    ) -> None:
        self._part, self._bot, self._server, self._sealer = part, bot, server, sealer
        self._client = client
        # A person's tokens (per_user) beside the bot's, with their own registration: a
        # registration names the redirect of the authorization that made it.
        self._tokens = tokens_kind(person)
        self._registration = "client" if person is None else f"client@{person}"
        self.expires_at: float | None = None  # of the access token, as stored

    async def _get(self, kind: str) -> bytes | None:
        sealed = await self._part.get(self._bot, self._server, kind)
        return None if sealed is None else self._sealer.open(sealed)

    async def _put(self, kind: str, data: bytes) -> None:
        await self._part.put(self._bot, self._server, kind, self._sealer.seal(data))

    async def get_tokens(self) -> OAuthToken | None:
        data = await self._get(self._tokens)
        if data is None:
            return None
        kept = json.loads(data)
        self.expires_at = kept.get("expires_at")
        return OAuthToken.model_validate(kept["token"])

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires = time.time() + tokens.expires_in if tokens.expires_in else None
        self.expires_at = expires
        kept = {"token": tokens.model_dump(mode="json"), "expires_at": expires}
        await self._put(self._tokens, json.dumps(kept).encode())

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self._client is not None:
            return self._client
        data = await self._get(self._registration)
        return None if data is None else OAuthClientInformationFull.model_validate_json(data)

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self._client is None:
            await self._put(self._registration, client_info.model_dump_json().encode())


class _Provider(OAuthClientProvider):
    """The SDK's provider, which also knows, after a restart, when the stored token
    expires (the SDK learns it only from a new token): it is refreshed ``_EARLY`` before.
    Where it would have to authorize anew (a bot), the request goes once more without a
    token, so the server's own 401 answers it (the SDK fails the call on that at once; an
    exception here would leave the call waiting out its timeout), and ``lacking`` says why.
    """

    lacking: str | None = None

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        except NotAuthorized as exc:
            self.lacking = str(exc)
            request.headers.pop("Authorization", None)
            yield request
        finally:
            await flow.aclose()

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if isinstance(storage, SealedStorage) and storage.expires_at is not None:
            self.context.token_expiry_time = storage.expires_at - _EARLY


async def _never(server: str, person: str | None = None) -> AuthorizationCodeResult:
    if person is not None:
        raise NotAuthorized(
            f"MCP server {server} runs each person's calls with their own account, and you "
            f"have not connected yours: the operator runs salon tools auth {server} "
            f"--person {person}"
        )
    raise NotAuthorized(
        f"MCP server {server} is not authorized: the operator runs salon tools auth {server}"
    )


def oauth(
    server: str,
    url: str,
    storage: SealedStorage,
    *,
    scope: str | None = None,
    redirect_uri: str = "http://127.0.0.1/callback",
    show: Callable[[str], Awaitable[None]] | None = None,
    answer: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
    person: str | None = None,
) -> OAuthClientProvider:
    """The httpx auth for ``url``. Without ``show`` and ``answer`` (a bot) it never starts
    an authorization: a server without usable tokens is ``NotAuthorized`` (``person``:
    whose tokens these are, named in the refusal)."""

    async def refuse(_link: str) -> None:
        await _never(server, person)

    metadata = OAuthClientMetadata(
        client_name="Salon",
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )
    return _Provider(
        url,
        metadata,
        storage,
        redirect_handler=show or refuse,
        callback_handler=answer or (lambda: _never(server, person)),
    )


class Loopback:
    """A one-shot listener on 127.0.0.1 for the authorization server's redirect."""

    def __init__(self) -> None:
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}{_CALLBACK_PATH}"

    async def start(self, port: int = 0) -> None:
        self._result = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._take, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def result(self, within: float = 300.0) -> AuthorizationCodeResult:
        assert self._result is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self._result), within)
        except TimeoutError:
            raise NotAuthorized(f"no authorization within {within:g}s") from None

    async def _take(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                line = (await reader.readline()).decode("latin-1").split()
            target = urlsplit(line[1]) if len(line) >= 2 else None
            query = parse_qs(target.query) if target else {}
            code, state = query.get("code", [""])[0], query.get("state", [None])[0]
            if target is None or target.path != _CALLBACK_PATH or not code:
                why = query.get("error", ["not an authorization answer"])[0]
                writer.write(_page(400, f"Salon was not authorized: {why}"))
            else:
                writer.write(_page(200, "Salon is authorized. You can close this page."))
                iss = query.get("iss", [None])[0]
                if self._result is not None and not self._result.done():
                    self._result.set_result(
                        AuthorizationCodeResult(code=code, state=state, iss=iss)
                    )
            await writer.drain()
        except (TimeoutError, OSError, UnicodeError):
            pass  # a stray connection: the listener waits on
        finally:
            writer.close()


def _page(status: int, text: str) -> bytes:
    body = text.encode()
    head = f"HTTP/1.1 {status} {'OK' if status == 200 else 'Bad Request'}\r\n"
    head += f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
    return (head + "Connection: close\r\n\r\n").encode() + body


async def authorize(
    server: str,
    url: str,
    storage: SealedStorage,
    *,
    scope: str | None,
    port: int,
    show: Callable[[str], Awaitable[None]],
    within: float = 300.0,
) -> None:
    """The operator's one authorization: the link goes to ``show``, the redirect comes to
    a one-shot listener on 127.0.0.1:``port``; the tokens are stored on success."""
    loopback = Loopback()
    await loopback.start(port)
    try:
        await run_authorization(
            server,
            url,
            storage,
            scope=scope,
            redirect_uri=loopback.redirect_uri,
            show=show,
            answer=lambda: loopback.result(within),
        )
    finally:
        await loopback.close()


async def run_authorization(
    server: str,
    url: str,
    storage: SealedStorage,
    *,
    scope: str | None,
    redirect_uri: str,
    show: Callable[[str], Awaitable[None]],
    answer: Callable[[], Awaitable[AuthorizationCodeResult]],
) -> None:
    """One authorization whatever takes the redirect (the CLI's one-shot listener, the
    web server's callback route): the tokens are stored on success."""
    from mcp.client.session import IncomingMessage

    from salon.tools.mcp_link import open_http  # the MCP client, loaded only here

    auth = oauth(
        server, url, storage, scope=scope, redirect_uri=redirect_uri, show=show, answer=answer
    )

    async def ignore(message: IncomingMessage) -> None:
        return None

    async with open_http(url, {}, ignore, auth) as client:
        await client.list_tools()
