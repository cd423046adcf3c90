"""A tool server's question (MCP elicitation) asked in text, for platforms without buttons
or forms (IRC, the terminal): the message, then each field in turn, answered by the
requester with a reply. ``skip`` keeps a field's default (or leaves out an optional one),
``decline`` says no to the whole question; an answer that does not fit is asked again."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from salon.model import Elicitation, ElicitationAnswer, FormField, with_defaults

__all__ = ["DECLINE_WORDS", "SKIP_WORDS", "ask_in_text"]

DECLINE_WORDS = frozenset({"decline", "cancel", "stop"})
SKIP_WORDS = frozenset({"skip", "-", "default"})
_TRIES = 3  # answers that do not fit, per field, before the question is declined

Reply = Callable[[str, float], Awaitable[tuple[str, str] | None]]
"""Ask one line of the requester, waiting up to the seconds given: (their reply, their
name), or None when no reply came in time."""


def _wanted(one: FormField) -> str:
    if one.options:
        what = "one of " + ", ".join(one.labels or one.options)
    else:
        what = {"boolean": "yes or no", "integer": "a whole number", "number": "a number"}.get(
            one.kind, "text"
        )
    if one.default is not None:
        what += (
            f"; skip for {one.default!r}" if one.kind != "boolean" else f"; skip for {one.default}"
        )
    elif not one.required:
        what += "; skip to leave it out"
    return what


def _question(request: Elicitation, one: FormField) -> str:
    about = f" ({one.description})" if one.description and one.description != one.label else ""
    return f"{request.requester.name}: {one.label}{about}? Answer {_wanted(one)}, or decline."


async def ask_in_text(
    say: Callable[[str], Awaitable[object]], reply: Reply, request: Elicitation
) -> ElicitationAnswer:
    """Ask ``request`` through ``say`` (a line to the channel) and ``reply``; the whole
    question has ``request.timeout`` seconds."""
    deadline = time.monotonic() + request.timeout
    await say(f"{request.requester.name}: {request.server} asks: {request.message}")
    content: dict[str, str | int | float | bool] = {}
    by = ""
    for one in request.fields:
        line = _question(request, one)
        for _ in range(_TRIES):
            got = await reply(line, deadline - time.monotonic())
            if got is None:
                await say(f"(no answer in time: {request.server}'s question is declined)")
                return ElicitationAnswer("decline")
            text, by = got
            word = text.strip().lower()
            if word in DECLINE_WORDS:
                return ElicitationAnswer("decline", by=by)
            if word in SKIP_WORDS and (one.default is not None or not one.required):
                break
            try:
                content[one.name] = one.parse(text)
                break
            except ValueError as exc:
                line = f"{request.requester.name}: {one.label} needs {exc}; or decline."
        else:
            await say(f"({request.server}'s question is declined: no answer that fits)")
            return ElicitationAnswer("decline", by=by)
    return ElicitationAnswer("accept", with_defaults(request.fields, content), by)
