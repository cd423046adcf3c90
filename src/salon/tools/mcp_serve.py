"""A native tool set as an MCP server, for ``salon tools serve`` (the only place it imports
the MCP SDK for Salon's own tools).

Each tool is registered with MCPServer through a wrapper whose signature is the tool's own
(the progress parameter swapped for MCP's ``Context``, the caller for its
``caller_arguments``), so the SDK derives the same input schema, output schema and error
wording it did when the tools were MCPServer tools.

The server offers tools only: MCPServer's prompt and resource methods are taken out, so
they are neither advertised nor answered (the client gets "Method not found"), and a call
to a tool the set does not have is refused as invalid params, as the MCP spec says.

Over HTTP (``serve_http``) the SDK's streamable-HTTP app is served with its DNS-rebinding
protection on, behind an optional bearer token.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import inspect
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from salon import __version__
from salon.errors import ToolError
from salon.sockets import bind, url_host
from salon.tools.caller import CALLER_ARGUMENTS
from salon.tools.native import Annotations, Image, InvalidArguments, NativeTool, Result, ToolSet
from salon.tools.results import META_NAME, META_URL

__all__ = [
    "HttpListen",
    "mcp_annotations",
    "mcp_result",
    "parse_listen",
    "serve_http",
    "server_name",
    "to_mcp_server",
]

_CONTEXT = "ctx"
_UNSERVED = (  # MCPServer's methods for prompts and resources: Salon has neither
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
)


def mcp_annotations(notes: Annotations | None) -> ToolAnnotations | None:
    if notes is None:
        return None
    return ToolAnnotations(
        read_only_hint=notes.read_only,
        destructive_hint=notes.destructive,
        idempotent_hint=notes.idempotent,
        open_world_hint=notes.open_world,
    )


def _block(part: str | Image) -> ContentBlock:
    if isinstance(part, str):
        return TextContent(type="text", text=part)
    meta = {k: v for k, v in ((META_NAME, part.name), (META_URL, part.url)) if v}
    return ImageContent(
        type="image",
        data=base64.b64encode(part.data).decode("ascii"),
        mime_type=part.mime_type,
        _meta=meta or None,
    )


def mcp_result(result: Result) -> CallToolResult:
    return CallToolResult(content=[_block(p) for p in result.content], is_error=result.is_error)


def _wrapper(tool: NativeTool) -> Callable[..., Any]:
    async def run(**kwargs: Any) -> Any:
        ctx: Context | None = kwargs.pop(_CONTEXT, None)
        progress = ctx.report_progress if ctx is not None else None
        try:
            value = await tool.invoke(kwargs, progress)
        except (ToolError, InvalidArguments) as exc:
            raise McpToolError(str(exc)) from None
        return mcp_result(value) if isinstance(value, Result) else value

    signature = inspect.signature(tool.fn, eval_str=True)
    params = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in signature.parameters.values()
        if p.name not in (tool.progress_parameter, tool.caller_parameter)
    ]
    params += [_caller_parameter(name) for name in tool.caller_arguments]
    if tool.progress_parameter is not None:
        params.append(
            inspect.Parameter(_CONTEXT, inspect.Parameter.KEYWORD_ONLY, annotation=Context)
        )
    returns = signature.return_annotation
    returns = CallToolResult if returns is Result else returns
    run.__signature__ = signature.replace(parameters=params, return_annotation=returns)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | {"return": returns}
    run.__name__ = run.__qualname__ = tool.name
    run.__doc__ = tool.description
    return run


def _caller_parameter(name: str) -> inspect.Parameter:
    """One of the arguments a client describes the caller with (``CALLER_ARGUMENTS``)."""
    kind, default = CALLER_ARGUMENTS[name]
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)


def server_name(tools: ToolSet) -> str:
    """What the server calls itself: ``salon``, or ``salon-weather`` for one integration."""
    return "salon" if tools.name == "salon" else f"salon-{tools.name}"


def _known_tools_only(tools: ToolSet) -> ServerMiddleware[Any]:
    """Middleware refusing a call to a tool the set does not have with "invalid params"
    (MCPServer answers it as a tool error, a result the caller may take for the tool's)."""

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/call" and isinstance(ctx.params, dict):
            name = ctx.params.get("name")
            if isinstance(name, str) and name not in tools.tools:
                raise MCPError(code=mcp_types.INVALID_PARAMS, message=f"Unknown tool: {name}")
        return await call_next(ctx)

    return check


def to_mcp_server(tools: ToolSet) -> MCPServer:
    """The set as an MCPServer whose lifespan opens the set's clients per connection."""

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        async with tools.open():
            yield {}

    server = MCPServer(
        server_name(tools),
        title=tools.name,
        version=__version__,
        instructions=tools.instructions or None,
        lifespan=lifespan,
        middleware=[_known_tools_only(tools)],
    )
    # MCPServer registers every method; what is registered is what gets advertised.
    handlers = server._lowlevel_server._request_handlers  # no public way to drop one
    for method in _UNSERVED:
        handlers.pop(method, None)
    for tool in tools.tools.values():
        server.add_tool(
            _wrapper(tool),
            name=tool.name,
            description=tool.description,
            annotations=mcp_annotations(tool.annotations),
            structured_output=tool.structured_output,
        )
    return server


@dataclass(frozen=True)
class HttpListen:
    """Where ``salon tools serve --http`` listens, and who may ask it."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port, said on stderr
    token: str | None = None  # the bearer token every request must carry
    allowed_hosts: tuple[str, ...] = ()  # further names a Host header may give


_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_REFUSAL = json.dumps(
    {"error": "invalid_token", "error_description": "a valid bearer token is required"}
)


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[::1]:PORT`` or a bare ``PORT`` (on 127.0.0.1)."""
    host, colon, port = text.rpartition(":")
    if not colon:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--http {text!r}: write HOST:PORT, e.g. 127.0.0.1:8931")
    return host, int(port)


def _security(host: str, port: int, extra: tuple[str, ...]) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection: only Host (and Origin) headers naming this
    server are served, so a web page cannot reach it through a name it controls."""
    names = list(_LOOPBACK) if host in _LOOPBACK else [host]
    names += extra
    hosts = [f"[{n}]:{port}" if ":" in n else f"{n}:{port}" for n in names]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts],
    )


def _bearer_gate(app: ASGIApp, token: str) -> ASGIApp:
    """``app`` for requests carrying ``Authorization: Bearer <token>`` only (compared in
    constant time); any other gets 401 with a ``WWW-Authenticate`` challenge (RFC 6750)."""
    expected = f"Bearer {token}".encode()

    async def gate(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization")
            if not hmac.compare_digest(given or b"", expected):
                challenge = 'Bearer realm="salon"'
                if given is not None:  # credentials were sent, and were wrong
                    challenge += ', error="invalid_token"'
                refusal = Response(
                    _REFUSAL,
                    status_code=401,
                    media_type="application/json",
                    headers={"WWW-Authenticate": challenge},
                )
                await refusal(scope, receive, send)
                return
        await app(scope, receive, send)

    return gate


async def serve_http(server: MCPServer, listen: HttpListen, said: Callable[[str], None]) -> None:
    """Serve ``server`` over streamable HTTP until the process is stopped; ``said`` gets
    the URL once the port is bound."""
    import uvicorn  # only where a server listens

    sock = bind(listen.host, listen.port)
    port = sock.getsockname()[1]
    app: ASGIApp = server.streamable_http_app(
        host=listen.host, transport_security=_security(listen.host, port, listen.allowed_hosts)
    )
    if listen.token:
        app = _bearer_gate(app, listen.token)
    said(f"http://{url_host(listen.host)}:{port}/mcp")
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
