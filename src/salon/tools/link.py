"""What the hub and a server's link share: how to reach a server (``ServerSpec``), what a
call carries besides its arguments (``CallContext``), the ``Link`` a server is held by, and
the words for its failures. A module of its own so that the MCP link (``mcp_link``, loaded
with the first MCP server) and the hub that loads it never import each other."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from salon.errors import ToolError
from salon.model import ElicitationAnswer, FormField, ToolResult
from salon.tools.base import Progress, ToolSpec
from salon.tools.caller import Caller
from salon.tools.native import ToolSet
from salon.tools.outputs import OutputDir

if TYPE_CHECKING:
    from mcp import Client
    from mcp.client.session import MessageHandlerFnT as MessageHandler
else:  # the same shape, without loading the SDK
    MessageHandler = Callable[[Any], Awaitable[None]]

__all__ = [
    "CallContext",
    "Consent",
    "ConsentDesk",
    "Elicit",
    "Link",
    "MessageHandler",
    "NotAuthorized",
    "ServerGone",
    "ServerSpec",
    "describe",
    "not_authorized",
    "without_hidden",
]


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one tool server: a native ``tools`` set, or an MCP server.

    ``connect(on_message)`` makes a fresh, unentered MCP ``Client`` that passes server
    notifications to ``on_message`` (how pre-2026 servers announce tool-list changes).
    """

    name: str
    connect: Callable[[MessageHandler], Client] | None = None
    tools: ToolSet | None = None
    timeout: float = 360.0
    start_timeout: float = 30.0
    # Arguments the model does not see and cannot pass: an MCP server gets those of
    # ``CALLER_ARGUMENTS`` filled in (``salon.tools.caller``).
    hidden_arguments: frozenset[str] = frozenset()
    health_interval: float = 10.0  # seconds between pings of an idle server
    elicitation: bool = False  # its questions go to the person a call runs for
    # OAuth per person: a connection with the tokens of the person (``CallContext.person``)
    # a call runs for; ``connect`` (the bot's tokens) only lists the tools.
    connect_as: Callable[[str, MessageHandler], Client] | None = None
    # With ``connect_as`` and a ``callback_url``: where a person without tokens gets the
    # link that connects their account (``salon.tools.oauth_desk``).
    consent: ConsentDesk | None = None


class ConsentDesk(Protocol):
    """Starts a person's authorization at a per_user OAuth server and takes its redirect
    (handed over by the web server's callback); ``close`` drops the flows still waiting."""

    async def start_for(self, person: str) -> tuple[str | None, str]:
        """(the person's authorization link, "") or (None, why there is none)."""

    def close(self) -> None: ...


class NotAuthorized(ToolError):
    """An OAuth server Salon holds no usable tokens for: the operator must authorize."""


def not_authorized(exc: BaseException) -> NotAuthorized | None:
    """The ``NotAuthorized`` that ``exc`` is or carries (the SDK wraps it in groups)."""
    if isinstance(exc, NotAuthorized):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = not_authorized(inner)
            if found is not None:
                return found
    return not_authorized(exc.__cause__) if exc.__cause__ is not None else None


class ServerGone(ToolError):
    """The server's connection broke during a call: it is being restarted."""


Elicit = Callable[[str, str, tuple[FormField, ...]], Awaitable[ElicitationAnswer]]
"""Ask the person a call runs for a server's question: (server, message, form)."""


Consent = Callable[[str, str | None, str], Awaitable[bool]]
"""Give the person a call runs for the link that connects their account at a server:
(server, link, the channel's line when no link can reach them privately, or there is
none). True: the link went to them in a direct message."""


class CallContext(NamedTuple):
    """What a server needs besides the arguments: where progress and files go, how to
    ask ``asker`` (who the call runs for, and where) a question the server has, and the
    ``caller`` a native tool is handed."""

    progress: Progress | None
    outputs: OutputDir | None
    owner: str
    elicit: Elicit | None = None
    asker: str = ""
    person: str = ""  # platform:identity of who the call runs for (per-person tokens)
    consent: Consent | None = None  # how that person is sent the link to connect
    caller: Caller | None = None


class Link(Protocol):
    """One server as the hub holds it: a native tool set or an MCP connection."""

    spec: ServerSpec
    tools: list[ToolSpec]
    ready: asyncio.Event
    first_attempt: asyncio.Event
    last_error: str | None

    async def run(self) -> None: ...

    async def wait_connections(self, count: int) -> None: ...

    def check(self, spec: ToolSpec, arguments: dict[str, Any]) -> str | None: ...

    async def call(
        self, call_id: str, remote_name: str, arguments: dict[str, Any], context: CallContext
    ) -> ToolResult: ...


def without_hidden(schema: dict[str, Any] | None, hidden: frozenset[str]) -> dict[str, Any]:
    """The schema the model sees: what Salon fills in itself is left out."""
    schema = dict(schema or {"type": "object", "properties": {}})
    if hidden:
        properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in hidden}
        required = [r for r in schema.get("required", []) if r not in hidden]
        schema = {**schema, "properties": properties, "required": required}
    return schema


def describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
