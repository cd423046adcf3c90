"""Tool types shared by the hub, the policy and the agent's tool loop (``ToolSpec`` is
defined in ``salon.model``, where every layer can reach it)."""

from contextvars import ContextVar
from typing import Protocol

from salon.model import ToolSpec

__all__ = ["OPERATOR", "TRACE_PARENT", "Progress", "ToolSpec"]

OPERATOR = "operator"
"""Requester id of whoever runs ``salon tools call``: the bot's operator."""

TRACE_PARENT: ContextVar[str] = ContextVar("salon_tool_traceparent", default="")
"""The W3C ``traceparent`` of the tool call being made (its ``execute_tool`` span), set by
the tool runner while traces are exported; an MCP link sends it in the request's
``params._meta``, as the MCP semantic conventions propagate trace context."""


class Progress(Protocol):
    """Where a running call's progress reports go, as an MCP server sends them."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...
