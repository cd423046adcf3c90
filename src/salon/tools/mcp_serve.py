"""A native tool set as an MCP server, for ``salon tools serve`` (the only place it imports
the MCP SDK for Salon's own tools).

Each tool is registered with MCPServer through a wrapper whose signature is the tool's own
(the progress parameter swapped for MCP's ``Context``), so the SDK derives the same input
schema, output schema and error wording it did when the tools were MCPServer tools.
"""

from __future__ import annotations

import base64
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations

from salon.errors import ToolError
from salon.tools.native import Annotations, Image, InvalidArguments, NativeTool, Result, ToolSet
from salon.tools.results import META_NAME, META_URL

__all__ = ["mcp_annotations", "mcp_result", "to_mcp_server"]

_CONTEXT = "ctx"


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
        if p.name != tool.progress_parameter
    ]
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


def to_mcp_server(tools: ToolSet) -> MCPServer:
    """The set as an MCPServer whose lifespan opens the set's clients per connection."""

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        async with tools.open():
            yield {}

    server = MCPServer(tools.name, instructions=tools.instructions or None, lifespan=lifespan)
    for tool in tools.tools.values():
        server.add_tool(
            _wrapper(tool),
            name=tool.name,
            description=tool.description,
            annotations=mcp_annotations(tool.annotations),
            structured_output=tool.structured_output,
        )
    return server
