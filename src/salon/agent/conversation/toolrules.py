"""Rules of the native tool path: at most ``max_tool_calls_per_turn`` calls of one
completion run (the rest get an error result the model reads), and with
``final_pass_combined`` one turn's results all go to one final call."""

from __future__ import annotations

from collections.abc import Sequence

from salon.model import ToolCall, ToolResult

__all__ = ["merge_results", "split_calls"]


def split_calls(
    calls: Sequence[ToolCall], limit: int | None
) -> tuple[list[ToolCall], dict[str, ToolResult]]:
    """The calls to run, and error results for those beyond the limit."""
    if limit is None or len(calls) <= limit:
        return list(calls), {}
    reason = f"not run: at most {limit} tool calls per turn; ask again in the next turn"
    refused = {c.id: ToolResult(c.id, reason, is_error=True) for c in calls[limit:]}
    return list(calls[:limit]), refused


def merge_results(
    calls: Sequence[ToolCall], ran: Sequence[ToolResult], refused: dict[str, ToolResult]
) -> list[ToolResult]:
    """One result per call, in the calls' order."""
    by_id = {r.call_id: r for r in ran} | refused
    return [by_id[c.id] for c in calls]
