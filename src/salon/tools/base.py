"""Tool types shared by the hub, the policy and the agent's tool loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["ToolSpec"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as the registry knows it.

    ``name`` is what the model sees (prefixed with the server's name only where two servers
    offer the same name); ``remote_name`` is what the server calls it.
    """

    name: str
    server: str
    remote_name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool | None = None
    destructive: bool | None = None
