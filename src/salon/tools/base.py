"""Tool types shared by the hub, the policy and the agent's tool loop (``ToolSpec`` is
defined in ``salon.model``, where every layer can reach it)."""

from typing import Protocol

from salon.model import ToolSpec

__all__ = ["OPERATOR", "Progress", "ToolSpec"]

OPERATOR = "operator"
"""Requester id of whoever runs ``salon tools call``: the bot's operator."""


class Progress(Protocol):
    """Where a running call's progress reports go, as an MCP server sends them."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None: ...
