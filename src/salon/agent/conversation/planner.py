"""Planner tool mode, for models with neither native tools nor a reliable text protocol.

The model is first asked for a plan, as JSON only::

    {"use_tool": true, "tool": "get_time", "args": {"zone": "Europe/Paris"}, "reason": "..."}

Salon reads it (bare, or in a ``json`` code fence, or the first JSON object in the text),
checks that the tool exists and the arguments are an object, runs the tool through the
usual approval and logging, and asks the model for its answer with the result in view. A
plan that cannot be read, or that names no tool, leads to a plain answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from salon.llm.base import ChatMessage, LLMRequest, TextPart
from salon.model import ToolCall, ToolResult, ToolSpec

__all__ = ["Plan", "answer_request", "parse_plan", "planning_request"]

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_PLAN_MAX_TOKENS = 512
_RESULT_LIMIT = 20_000  # characters of a tool result shown to the model


@dataclass(frozen=True, slots=True)
class Plan:
    use_tool: bool
    tool: str = ""
    args: dict[str, Any] | None = None
    reason: str = ""


def planning_request(
    request: LLMRequest, specs: Sequence[ToolSpec], temperature: float | None = None
) -> LLMRequest:
    """The conversation as it is, then a turn asking for the plan (at ``temperature``
    when given, else the answer's)."""
    listing = "\n".join(
        f"- {s.name}: {s.description.strip() or 'no description'}\n"
        f"  arguments (JSON Schema): {json.dumps(s.input_schema, ensure_ascii=False)}"
        for s in specs
    )
    ask = (
        "[planning step: this message is from the system, not from the people above]\n"
        "Before answering the conversation, decide whether one of these tools would help:\n"
        f"{listing}\n\n"
        "Reply with one JSON object and nothing else:\n"
        '{"use_tool": true or false, "tool": "<tool name>", "args": {<arguments>}, '
        '"reason": "<why, briefly>"}'
    )
    messages = (*request.messages, ChatMessage.text("user", ask))
    return replace(
        request,
        messages=messages,
        tools=(),
        stop=(),
        prefill=False,
        max_tokens=min(request.max_tokens, _PLAN_MAX_TOKENS),
        temperature=request.temperature if temperature is None else temperature,
    )


def parse_plan(text: str, tools: Collection[str]) -> Plan | None:
    """The plan in ``text``; None when there is none that can be followed."""
    for candidate in _candidates(text):
        plan = _plan_of(candidate, tools)
        if plan is not None:
            return plan
    return None


def _candidates(text: str) -> list[Any]:
    found: list[Any] = []
    decoder = json.JSONDecoder()
    for block in [*_FENCE.findall(text), text]:
        for start in [i for i, c in enumerate(block) if c == "{"][:20]:
            try:
                value, _ = decoder.raw_decode(block, start)
            except ValueError:
                continue
            found.append(value)
            break
    return found


def _plan_of(value: Any, tools: Collection[str]) -> Plan | None:
    if not isinstance(value, dict) or not isinstance(value.get("use_tool"), bool):
        return None
    reason = value.get("reason")
    reason = reason if isinstance(reason, str) else ""
    if not value["use_tool"]:
        return Plan(False, reason=reason)
    tool, args = value.get("tool"), value.get("args", {})
    if not isinstance(tool, str) or tool not in tools:
        return None
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return None
    return Plan(True, tool, args, reason)


def answer_request(request: LLMRequest, call: ToolCall, result: ToolResult) -> LLMRequest:
    """The original request with what the tool returned in view."""
    outcome = "failed" if result.is_error else "returned"
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    content = result.content[:_RESULT_LIMIT]
    note = f"[tool {call.name}({arguments}) {outcome}:\n{content}\n]"
    messages = list(request.messages)
    if request.prefill and messages and messages[-1].role == "assistant":
        # The transcript ends with the bot's name: put the note just before that line.
        last = messages[-1]
        *parts, tail = last.parts
        if isinstance(tail, TextPart):
            head, sep, name_line = tail.text.rpartition("\n\n")
            text = f"{head}{sep}{note}\n\n{name_line}" if sep else f"{note}\n\n{tail.text}"
            messages[-1] = ChatMessage("assistant", (*parts, TextPart(text)))
            return replace(request, messages=tuple(messages), tools=())
    tell = f"{note}\nNow answer the conversation, using this result where it helps."
    messages.append(ChatMessage.text("user", tell))
    return replace(request, messages=tuple(messages), tools=())
