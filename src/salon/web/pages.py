"""HTML of the activity page: the layout, the timeline's rows and a whole trace.

Every value from the store is escaped here; the pages load only ``/static`` files of this
server (see the Content-Security-Policy in ``salon.web.context``).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from html import escape
from typing import Any

from salon.trace import MISS_CAUSES, TraceSummary, money
from salon.web.memory import memory_events
from salon.web.silence import silence_words

__all__ = ["layout", "money", "share", "timeline_rows", "trace_detail"]

QUIET_CAUSES = ("new messages", "first call")  # a prefix kept: nothing broke
MISS_GAP = 0.25  # read this far below the expected share: the provider did not keep it
# What each cause of a cache break (salon.agent.recording.traces) means for the prompt.
CAUSE_WORDS = {
    "edited message": "a message already in the prompt was edited since the previous call",
    "deleted message": "a message already in the prompt was deleted since the previous call",
    "roll": "the history window was cut back, so the prompt starts later than before",
    "config change": "the config changed the system prompt or the settings before the messages",
    "tool-list change": "the tools offered to the model changed",
    "model change": "another model answered, and each model has a cache of its own",
    "thinking dropped": "another model answered, and the previous model's thoughts were left out",
    "linked change": "the block of linked channels changed",
    "memory change": "the notes recalled into the prompt changed",
    "inserted message": "a message was placed among those already in the prompt",
    "tool call changed": "a past tool call is sent otherwise than before, or was left out",
    "unknown": "the prompt changed before its end, for a reason Salon cannot tell",
    "expired": "the prompt was unchanged, but longer passed since the previous call than "
    "the provider keeps its cache",
    "unexplained": "the prompt was unchanged as far as Salon tells, yet the provider read "
    "less than expected (the trace says what differed)",
}
MISS_WORDS = (
    "the provider read less than expected: the prompt's start was not in its cache"
    " (expired, evicted, or too short to cache)"
)


def when(epoch: float | None) -> str:
    if not epoch:
        return "-"
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def layout(title: str, body: str, *, header: str = "", head: str = "") -> str:
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{head}'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title>"
        '<link rel="stylesheet" href="/static/salon.css">'
        '<script src="/static/salon.js" defer></script></head>'
        f'<body><header class="top"><a class="brand" href="/activity">Salon</a>{header}</header>'
        f"<main>{body}</main></body></html>"
    )


def _bar(billed: float | None, expected: float | None) -> str:
    """Billed read share as a bar, the expected one as a tick on it (SVG: the page's
    Content-Security-Policy allows no inline styles)."""
    width = 0 if billed is None else round(billed * 100, 1)
    tick = ""
    if expected is not None:
        x = min(round(expected * 100, 1), 98.5)
        tick = f'<rect class="tick" x="{x}" width="1.5" height="10"/>'

    return (
        f'<svg class="share" viewBox="0 0 100 10" preserveAspectRatio="none" role="img">'
        f"<title>cache read: {share(billed)} billed, {share(expected)} expected</title>"
        f'<rect class="track" width="100" height="10"/><rect class="fill" width="{width}" '
        f'height="10"/>{tick}</svg>'
    )


def _read(t: TraceSummary) -> str:
    """The cache read share in numbers beside its bar: billed, and what Salon expected."""
    expected = (
        "" if t.expected_read_share is None else f" · expected {share(t.expected_read_share)}"
    )
    return f'<span class="read">read {share(t.read_share)}{expected}</span>'


def _missed(t: TraceSummary) -> bool:
    """Read well below what was expected, though nothing in the prompt broke the cache."""
    if t.cache_break or t.read_share is None or t.expected_read_share is None:
        return False
    return t.expected_read_share - t.read_share >= MISS_GAP


def _cache_note(t: TraceSummary) -> str:
    """Why this activation read less from the cache than it could, in words."""
    if t.cache_break:
        words = CAUSE_WORDS.get(t.cache_break, CAUSE_WORDS["unknown"])
        what = "cache miss" if t.cache_break in MISS_CAUSES else "cache break"
        return f'<span class="break">{what}: {escape(t.cache_break)}: {words}</span>'
    if _missed(t):
        return f'<span class="break">cache miss: {MISS_WORDS}</span>'
    return ""


def timeline_row(t: TraceSummary) -> str:
    classes = ["trace", f"outcome-{escape(t.outcome)}"]
    if t.cache_break or _missed(t):
        classes.append("broken")
    outcome = escape(t.outcome)
    if t.error:
        outcome += f': <span class="reason">{escape(t.error[:80])}</span>'
    tokens = f"{t.input_tokens:,} in · {t.output_tokens:,} out · {t.cache_read_tokens:,} read"
    who = f"{t.bot} in {t.channel}" + (f" · {t.requester}" if t.requester else "")
    return (
        f'<details class="{" ".join(classes)}" data-id="{t.id}" '
        f'data-src="/activity/traces/{t.id}?fragment=1"><summary>'
        f'<span class="when">{when(t.started_at)}</span>'
        f'<span class="who" title="{escape(who)}"><b>{escape(t.bot)}</b> in {escape(t.channel)}'
        f"{' · ' + escape(t.requester) if t.requester else ''}</span>"
        f'<span class="outcome">{outcome}</span>'
        f'<span class="model">{escape(t.model or "-")}</span>'
        f'<span class="tokens">{tokens}</span>'
        f'<span class="cost">{money(t.cost)}</span>'
        f'<span class="cache">{_bar(t.read_share, t.expected_read_share)}{_read(t)}</span>'
        f"{_cache_note(t)}</summary>"
        f'<div class="detail"><a href="/activity/traces/{t.id}">open trace #{t.id}</a></div>'
        "</details>"
    )


def timeline_rows(found: list[TraceSummary]) -> str:
    return "".join(timeline_row(t) for t in found)


# -- one whole trace -----------------------------------------------------------------


def trace_detail(summary: TraceSummary, body: dict[str, Any]) -> str:
    parts = [
        f'<section class="trace-detail" id="trace-{summary.id}">',
        _heading(summary, body),
        _silent(summary, body),
        _facts(summary, body),
        *(_call(n, call) for n, call in enumerate(body.get("calls", []), 1)),
        memory_events(body.get("tools", [])),
        *(_tool(tool) for tool in body.get("tools", [])),
    ]
    if body.get("answer"):
        parts.append(f'<h4>Answer</h4><pre class="answer">{escape(body["answer"])}</pre>')
    for note in body.get("notes", []):
        parts.append(f'<p class="note">note: {escape(note)}</p>')
    parts.append("</section>")
    return "".join(parts)


def _heading(summary: TraceSummary, body: dict[str, Any]) -> str:
    error = ""
    if summary.error:
        kind = escape(str(body.get("error_kind") or "error"))
        error = f'<p class="error">{kind}: {escape(summary.error)}</p>'
    triggers = "".join(
        f"<li><b>{escape(str(t.get('author', '')))}</b>: {escape(str(t.get('text', '')))}"
        + (f' <a href="{escape(str(t["link"]))}">message</a>' if t.get("link") else "")
        + "</li>"
        for t in body.get("triggers", [])
    )
    return (
        f"<h3>#{summary.id} · {escape(summary.bot)} in "
        f"{escape(body.get('channel_name') or summary.channel)} · {when(summary.started_at)} UTC "
        f'<span class="badge outcome-{escape(summary.outcome)}">{escape(summary.outcome)}</span>'
        f"</h3>{error}"
        + (_activation(str(body["activation"])) if body.get("activation") else "")
        + (f'<ul class="triggers">{triggers}</ul>' if triggers else "")
    )


def _silent(summary: TraceSummary, body: dict[str, Any]) -> str:
    """Why the bot stayed silent, when it did."""
    words = silence_words(summary.outcome, body.get("pipeline") or {})
    return f'<p class="silent">Stayed silent: {escape(words)}.</p>' if words else ""


def _activation(activation: str) -> str:
    return (
        f'<p class="activation">activation <code>{escape(activation)}</code>'
        f" (its log lines carry [act {escape(activation)}])</p>"
    )


def _facts(summary: TraceSummary, body: dict[str, Any]) -> str:
    timings = body.get("timings", {})
    longest = max(timings.values(), default=0) or 1
    bars = "".join(
        f'<div class="timing"><span>{escape(k)}</span><svg viewBox="0 0 100 8" '
        f'preserveAspectRatio="none"><rect width="{max(v / longest * 100, 0.5):.1f}" '
        f'height="8"/></svg><em>{v:.0f} ms</em></div>'
        for k, v in timings.items()
    )
    layers = ", ".join(escape(x) for x in body.get("layers") or ["(defaults)"])
    return (
        '<div class="facts">'
        f"<p><b>{money(summary.cost)}</b> · cache read <b>{share(summary.read_share)}</b> billed, "
        f"{share(summary.expected_read_share)} expected · "
        f"{summary.input_tokens:,} in, {summary.output_tokens:,} out{_reasoning(summary)}, "
        f"{summary.cache_read_tokens:,} read, {summary.cache_write_tokens:,} written</p>"
        f"<p>config: {layers}</p>"
        f'<div class="timings">{bars}</div></div>'
    )


def _reasoning(usage: TraceSummary | dict[str, Any]) -> str:
    """The part of the output tokens spent thinking, where there was any."""
    spent = usage.get("reasoning_tokens", 0) if isinstance(usage, dict) else usage.reasoning_tokens
    return f" ({spent:,} reasoning)" if spent else ""


def _thinking(call: dict[str, Any]) -> str:
    """The call's reasoning, folded away: it is long, and not what the model answered."""
    text = call.get("thinking") or ""
    spent = call.get("reasoning_tokens") or 0
    if not text and not spent:
        return ""
    count = f"{spent:,} reasoning tokens" if spent else f"{len(text):,} characters"
    body = f"<pre>{escape(text)}</pre>" if text else "<p>(the model did not show it)</p>"
    return f'<details class="thinking"><summary>thinking · {count}</summary>{body}</details>'


def _divergence(call: dict[str, Any]) -> str:
    found = call.get("divergence")
    if not found:
        return ""
    where = f" at message {found['index']}" if found.get("index", -1) >= 0 else ""
    which = f" ({escape(str(found['message_id']))})" if found.get("message_id") else ""
    cause = escape(str(found.get("cause", "")))
    if found.get("cause") in QUIET_CAUSES:
        return f'<p class="prefix">prefix kept: {cause}{where}</p>'
    what = "cache miss" if found.get("cause") in MISS_CAUSES else "cache break"
    detail = f" · {escape(str(found['detail']))}" if found.get("detail") else ""
    return f'<p class="cache-break">{what}: {cause}{where}{which}{detail}</p>'


def _cache_ttls(call: dict[str, Any]) -> str:
    """Each cache marker's lifetime, and why it got it."""
    if not call.get("cache_ttls"):
        return ""
    why = f" ({escape(str(call['cache_reason']))})" if call.get("cache_reason") else ""
    return f'<p class="cache-ttl">cache ttl: {escape(", ".join(call["cache_ttls"]))}{why}</p>'


def _call(number: int, call: dict[str, Any]) -> str:
    prompt = call["input_tokens"] + call["cache_read_tokens"] + call["cache_write_tokens"]
    billed = call["cache_read_tokens"] / prompt if prompt else None
    timing = ""
    if call.get("first_token_ms") is not None:
        timing += f" · first token {call['first_token_ms']:.0f} ms"
    if call.get("total_ms") is not None:
        timing += f" · {call['total_ms']:.0f} ms in all"
    flags = "".join(f'<p class="flag">⚠ {escape(f)}</p>' for f in call.get("flags", []))
    error = f'<p class="error">{escape(call["error"])}</p>' if call.get("error") else ""
    request = json.dumps(call.get("request", {}), ensure_ascii=False, indent=2)
    return (
        f'<div class="call"><h4>Call {number} · {escape(call["kind"])} · '
        f"{escape(call['provider'])} {escape(call['model'])}{timing}</h4>"
        f"<p>{call['input_tokens']:,} in, {call['output_tokens']:,} out{_reasoning(call)}, "
        f"{call['cache_read_tokens']:,} read from cache, {call['cache_write_tokens']:,} written"
        f" · {money(call.get('cost'))} · cache read {share(billed)} billed, "
        f"{share(call.get('expected_read_share'))} expected</p>"
        f"{_divergence(call)}{_cache_ttls(call)}{flags}{error}{_thinking(call)}"
        f'<div class="transcript">{transcript(call.get("request", {}))}</div>'
        f'<details class="raw"><summary>the exact request (JSON)</summary>'
        f"<pre>{escape(request)}</pre></details></div>"
    )


def _tool(tool: dict[str, Any]) -> str:
    approval = tool.get("approval")
    asked = ""
    if approval:
        by = escape(str(approval.get("by") or "nobody"))
        asked = (
            f'<p class="approval">approval: {escape(str(approval.get("answer")))} by {by}'
            f" at {escape(str(approval.get('at')))}</p>"
        )
    arguments = json.dumps(tool.get("arguments", {}), ensure_ascii=False)
    return (
        f'<div class="tool{" tool-error" if tool.get("is_error") else ""}">'
        f"<h4>Tool {escape(tool['name'])} · {escape(tool['verdict'])} · "
        f"{tool['duration_ms']:.0f} ms</h4>{asked}"
        f"<p>arguments: <code>{escape(arguments)}</code></p>"
        f"<pre>{escape(str(tool.get('result', ''))[:4000])}</pre></div>"
    )


# -- a request as a readable transcript ----------------------------------------------


_CALL_KEYS = ("tool_use", "functionCall", "function_call")
_RESULT_KEYS = ("tool_result", "functionResponse", "function_response")
_IMAGE_KEYS = ("image", "image_url", "inlineData", "inline_data", "input_image")


def _block_text(block: Any) -> tuple[str, bool]:
    """A content block of any vendor as text, and whether it carries a cache marker."""
    if isinstance(block, str):
        return block, False
    if not isinstance(block, dict):
        return json.dumps(block, ensure_ascii=False, default=str), False
    marked = "cache_control" in block or bool(block.get("cache_breakpoint"))
    kind = block.get("type")
    if kind == "thinking" or block.get("thought") is True:  # Anthropic's, Gemini's
        thought = str(block.get("thinking", block.get("text", "")))
        return f"[thinking: {len(thought):,} characters]", marked
    if kind == "redacted_thinking":
        return "[redacted thinking]", marked
    if "text" in block and kind in (None, "text", "input_text", "output_text"):
        return str(block["text"]), marked
    if kind == "tool_use":
        shown = {"name": block.get("name"), "input": block.get("input")}
        return f"[tool call {json.dumps(shown, ensure_ascii=False)}]", marked
    if kind == "tool_result":
        return f"[tool result {_short(block.get('content'))}]", marked
    for key in _CALL_KEYS:
        if key in block:
            return f"[tool call {_short(block[key])}]", marked
    for key in _RESULT_KEYS:
        if key in block:
            return f"[tool result {_short(block[key])}]", marked
    if kind in _IMAGE_KEYS or any(key in block for key in _IMAGE_KEYS):
        return "[image]", marked
    return json.dumps(block, ensure_ascii=False, default=str), marked


def _short(value: Any, limit: int = 600) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[:limit] + "…"


def _content(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    shown = []
    for block in blocks:
        text, marked = _block_text(block)
        shown.append(escape(text))
        if marked:
            shown.append('<span class="marker">cache breakpoint</span>')
    return "".join(shown)


def _turn(role: str, content: Any) -> str:
    return (
        f'<div class="turn role-{escape(role)}"><span class="role">{escape(role)}</span>'
        f"<pre>{_content(content)}</pre></div>"
    )


def transcript(request: dict[str, Any]) -> str:
    """The messages of a request as sent (OpenAI, Anthropic, Gemini or Salon's own form)."""
    found = request.get("config")
    config: dict[str, Any] = found if isinstance(found, dict) else {}  # Gemini's settings
    turns = []
    system = request.get("system") or config.get("system_instruction")
    if system:
        parts = system.get("parts", system) if isinstance(system, dict) else system
        turns.append(_turn("system", parts))
    for message in request.get("messages") or request.get("contents") or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content", message.get("parts", ""))
        calls = [{"tool_use": c.get("function", c)} for c in message.get("tool_calls") or []]
        if calls:  # OpenAI: an assistant turn's calls sit beside its content
            content = [
                *(content if isinstance(content, list) else [content] if content else []),
                *calls,
            ]
        turns.append(_turn(str(message.get("role", "?")), content))
    if isinstance(request.get("prompt"), str):
        turns.append(_turn("prompt", request["prompt"]))
    tools = request.get("tools") or config.get("tools") or []
    names = [t if isinstance(t, str) else _tool_name(t) for t in tools]
    stop = request.get("stop") or request.get("stop_sequences") or config.get("stop_sequences")
    extra = ""
    if names:
        extra += f'<p class="meta">tools: {escape(", ".join(names))}</p>'
    if stop:
        extra += f'<p class="meta">stop: {escape(json.dumps(stop, ensure_ascii=False))}</p>'
    return "".join(turns) + extra


def _tool_name(tool: Any) -> str:
    if not isinstance(tool, dict):
        return str(tool)
    if "function" in tool and isinstance(tool["function"], dict):
        return str(tool["function"].get("name", "?"))
    for key in ("functionDeclarations", "function_declarations"):
        if key in tool:
            return ", ".join(str(f.get("name")) for f in tool[key])
    return str(tool.get("name", "?"))
