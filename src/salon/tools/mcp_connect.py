"""Connections to MCP servers: streamable HTTP (with what its HTTP answers said that the
SDK's errors leave out) and stdio; the hub's link (``salon.tools.mcp_link``) drives them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import httpx2
import mcp_types
from mcp import Client, StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

from salon import __version__
from salon.tools.link import MessageHandler, describe

__all__ = [
    "AUTHORIZATION",
    "SENDING",
    "HttpClient",
    "Sending",
    "open_http",
    "open_stdio",
    "session_gone",
    "unauthorized",
    "unreachable",
]

SALON = mcp_types.Implementation(name="salon", version=__version__)
AUTHORIZATION = {
    401: "authorization failed (HTTP 401: no credentials, or the server did not accept them)",
    403: "authorization failed (HTTP 403: the credentials lack the permission)",
}


class Refusals:
    """What a server's HTTP answers said that the SDK's errors leave out: it reports a 401
    or 403 as "Server returned an error response", and a 404 to a request in a session (the
    server restarted and forgot it) only by the body's words."""

    def __init__(self) -> None:
        self.status: int | None = None  # the last answer was a 401 or 403
        self.session_gone = False

    async def saw(self, response: httpx2.Response) -> None:
        status = response.status_code
        if status == 404 and response.request.headers.get("mcp-session-id"):
            self.session_gone = response.request.method != "DELETE"  # closing: gone anyway
        elif status in AUTHORIZATION:
            self.status = status
        elif status < 300:
            self.status = None


class Sending:
    """One call on its way: set when a request it made could not connect (nothing sent)."""

    def __init__(self) -> None:
        self.unsent: str | None = None


# The call being sent: the SDK posts it from a task that runs in the caller's context.
SENDING: ContextVar[Sending | None] = ContextVar("salon_mcp_sending", default=None)


class NotingClient(httpx2.AsyncClient):
    """An HTTP client that tells the call being sent when a request could not connect."""

    async def send(self, *args: Any, **kwargs: Any) -> httpx2.Response:
        try:
            return await super().send(*args, **kwargs)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            sending = SENDING.get()
            if sending is not None:
                sending.unsent = describe(exc)
            raise


def unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says no connection to the server could be opened."""
    if isinstance(exc, BaseExceptionGroup):
        return any(unreachable(inner) for inner in exc.exceptions)
    if isinstance(exc, httpx2.ConnectError | httpx2.ConnectTimeout | ConnectionRefusedError):
        return True
    return exc.__cause__ is not None and unreachable(exc.__cause__)


@dataclass
class HttpClient(Client):
    """A streamable-HTTP connection that keeps what its server's HTTP answers said."""

    refusals: Refusals = field(default_factory=Refusals)
    auth: httpx2.Auth | None = None  # OAuth: its ``lacking`` says why a 401 came


def open_http(
    url: str, headers: dict[str, str], on_message: MessageHandler, auth: httpx2.Auth | None = None
) -> Client:
    """A streamable-HTTP connection to ``url`` (unentered), naming itself Salon; ``auth``:
    OAuth (``salon.tools.mcp_auth``)."""
    refusals = Refusals()

    @contextlib.asynccontextmanager
    async def transport() -> AsyncIterator[TransportStreams]:
        # the SDK leaves a client it was given open: this one closes with the connection
        timeout = httpx2.Timeout(MCP_DEFAULT_TIMEOUT, read=MCP_DEFAULT_SSE_READ_TIMEOUT)
        async with NotingClient(headers=headers, auth=auth, timeout=timeout) as http:
            http.event_hooks["response"].append(refusals.saw)
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    return HttpClient(
        transport(),
        message_handler=on_message,
        cache=None,
        client_info=SALON,
        refusals=refusals,
        auth=auth,
    )


def open_stdio(params: StdioServerParameters, on_message: MessageHandler) -> Client:
    """A connection to a server Salon starts (unentered), naming itself Salon."""
    return Client(params, message_handler=on_message, cache=None, client_info=SALON)


def unauthorized(client: Client | None) -> str | None:
    """Why the server refused ``client``'s credentials, if that is why its last answer failed."""
    if isinstance(client, HttpClient) and client.refusals.status is not None:
        lacking = getattr(client.auth, "lacking", None)  # no OAuth tokens that work
        if client.refusals.status == 401 and isinstance(lacking, str):
            return lacking
        return AUTHORIZATION[client.refusals.status]
    return None


def session_gone(client: Client) -> bool:
    return isinstance(client, HttpClient) and client.refusals.session_gone
