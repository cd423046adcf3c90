"""Tool types shared by the hub, the policy and the agent's tool loop (defined in
``salon.model``, where every layer can reach them)."""

from salon.model import ToolSpec

__all__ = ["ToolSpec"]
