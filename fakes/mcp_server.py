"""A small MCP server for tests, run over stdio or streamable HTTP.

python -m fakes.mcp_server            # stdio

Over HTTP it can also stand for the servers the ecosystem runs besides the SDK 2.3 ones:
one that speaks only the 2025 handshake protocol (sessions, ``handshake_only``) and one
behind bearer tokens (``build(tokens=...)``, the SDK's own resource-server auth).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Message, Receive, Scope, Send

READ_ONLY = ToolAnnotations(read_only_hint=True)


class Booking(BaseModel):
    """The form ``book`` asks for (MCP elicitation): every primitive type, one enum."""

    day: str = Field(description="Which day")
    guests: int = Field(default=2, description="How many people")
    room: str = Field(default="small", json_schema_extra={"enum": ["small", "large"]})
    confirm: bool = Field(default=True, description="Book it now")


class Sure(BaseModel):
    """The yes/no ``confirm`` asks for."""

    sure: bool


TOOLS_SCOPE = "tools"


class _Tokens:
    """The SDK's token verifier protocol: a known token and its scopes, else refused."""

    def __init__(self, tokens: dict[str, list[str]]) -> None:
        self._tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        scopes = self._tokens.get(token)
        if scopes is None:
            return None
        return AccessToken(token=token, client_id="salon-tests", scopes=scopes)


def build(tokens: dict[str, list[str]] | None = None) -> MCPServer:
    """With ``tokens`` (token -> scopes), HTTP requests need a bearer token with the
    ``tools`` scope: the SDK answers 401 without a known one, 403 without the scope."""
    if tokens is None:
        server = MCPServer("testkit")
    else:
        auth = AuthSettings(
            issuer_url="https://auth.example",  # type: ignore[arg-type]
            resource_server_url="http://127.0.0.1/mcp",  # type: ignore[arg-type]
            required_scopes=[TOOLS_SCOPE],
            validate_token_resource=False,
        )
        server = MCPServer("testkit", token_verifier=_Tokens(tokens), auth=auth)

    @server.tool(annotations=READ_ONLY)
    def echo(text: str, times: int = 1) -> str:
        """Repeat the text."""
        return text * times

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then answer."""
        await asyncio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    async def work(seconds: float, ctx: Context) -> str:
        """Say it has started (a progress report), then take its time (side effects)."""
        await ctx.report_progress(0, 1, "started")
        await asyncio.sleep(seconds)
        return f"worked {seconds}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def crash() -> str:
        """End the server process at once."""
        os._exit(3)

    @server.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool(annotations=READ_ONLY)
    async def lookup_slowly(seconds: float) -> str:
        """A lookup that takes its time (no side effects)."""
        await asyncio.sleep(seconds)
        return f"looked up in {seconds}"

    @server.tool(annotations=READ_ONLY)
    def env(name: str) -> str:
        """A variable of the server's environment."""
        return os.environ.get(name, "")

    @server.tool(annotations=READ_ONLY)
    def whoami(requester_id: str = "") -> str:
        """Who Salon says is asking."""
        return f"asked by {requester_id or 'nobody'}"

    @server.tool(annotations=READ_ONLY)
    def client_info(ctx: Context) -> str:
        """The name and version the client gave."""
        params = ctx.session.client_params
        info = params.client_info if params is not None else None
        return f"{info.name} {info.version}" if info is not None else "unnamed"

    @server.tool()
    async def book(ctx: Context) -> str:
        """Ask the user for the booking's details (elicitation), then say what was given."""
        answer = await ctx.elicit("Which booking?", Booking)
        if answer.action != "accept":
            return f"booking {answer.action}d"
        return f"booked {answer.data.model_dump_json()}"

    @server.tool()
    async def confirm(what: str, ctx: Context) -> str:
        """Ask the user yes or no before doing ``what`` (elicitation)."""
        answer = await ctx.elicit(f"Really {what}?", Sure)
        if answer.action != "accept":
            return f"{what}: {answer.action}d"
        return f"{what}: {'yes' if answer.data.sure else 'no'}"

    @server.tool(annotations=READ_ONLY)
    def offers(ctx: Context) -> str:
        """Whether the client offers to ask its user questions (elicitation)."""
        params = ctx.session.client_params
        asks = params.capabilities.elicitation if params is not None else None
        return "asks its user" if asks is not None else "does not ask"

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool called `name` and announce the change."""

        def extra() -> str:
            return f"I am {name}"

        server.add_tool(extra, name=name, description=f"added at run time: {name}")
        await ctx.notify_tools_changed()
        return f"added {name}"

    return server


def handshake_only(app: ASGIApp) -> ASGIApp:
    """``app`` as a server that speaks only the 2025 handshake protocol: ``server/discover``
    (the 2026 probe) is refused the way the SDK's session transport refuses any request
    without a session, so clients fall back to ``initialize`` and a session."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        body = b"".join(m.get("body", b"") for m in messages)
        if _method(body) == "server/discover":
            error = {"code": -32600, "message": "Bad Request: Missing session ID"}
            payload = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await app(scope, replay, send)

    return serve


def _method(body: bytes) -> str | None:
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed.get("method") if isinstance(parsed, dict) else None


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "http":
        build().run("streamable-http", port=int(sys.argv[2]))
    else:
        build().run("stdio")
