"""``POST /bots/<name>/events``: events pushed in from outside systems.

The caller shows the bearer token of ``web.trigger_token_env``; the JSON body names a
channel key, the text and optionally who it comes from. The event waits in the store's
inbox until the bot takes it (within a second) and answers it like a ``/ask`` question.
An event for a platform the bot does not run is refused (422): nothing would take it.
Every refusal is a 4xx with ``{"error": "..."}`` and enqueues nothing.
"""

from __future__ import annotations

import hmac
import json
import re
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from salon.config import BotConfig
from salon.config.targets import channel_key
from salon.model import clean_text
from salon.web.context import Web

__all__ = ["post_event"]

MAX_AUTHOR_CHARS = 100


def bearer_ok(expected: str, header: str | None) -> bool:
    """``Authorization: Bearer <expected>``, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode("utf-8"), expected.encode("utf-8"))


async def _body(request: Request, limit: int) -> bytes | None:
    """The body, or None when it is larger than ``limit`` (read no further than that)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _fields(data: Any) -> tuple[str, str, str] | str:
    """(channel, text, author) from the body, or what is wrong with it."""
    if not isinstance(data, dict):
        return "the body must be a JSON object with channel and text"
    unknown = sorted(set(data) - {"channel", "text", "author"})
    if unknown:
        return f"unknown field(s): {', '.join(unknown)} (allowed: channel, text, author)"
    channel = data.get("channel")
    # JSON may escape a lone surrogate, which no encoder accepts: U+FFFD, as platforms do.
    text, author = (
        clean_text(v) if isinstance(v, str) else v
        for v in (data.get("text"), data.get("author", "outside"))
    )
    if not isinstance(channel, str) or not channel or clean_text(channel) != channel:
        return "channel must be a channel key such as discord:123456 or irc:#salon"
    if not isinstance(text, str) or not text.strip():
        return "text must be a non-empty string"
    if not isinstance(author, str) or not author.strip() or len(author) > MAX_AUTHOR_CHARS:
        return f"author must be a non-empty string of at most {MAX_AUTHOR_CHARS} characters"
    return channel, text, author.strip()


async def post_event(request: Request) -> Response:
    web: Web = request.app.state.web
    token = web.trigger_token()
    if token is None:
        reason = f"triggers are off: {web.settings.trigger_token_env} is not set on the server"
        return web.json({"error": reason}, 503)
    if not bearer_ok(token, request.headers.get("authorization")):
        return web.json(
            {"error": "missing or wrong bearer token"}, 401, {"WWW-Authenticate": "Bearer"}
        )
    name = request.path_params["name"]
    configs = await web.fleet.current()
    if name not in configs.bots:
        return web.json({"error": f"no bot named {name!r}"}, 404)
    limit = web.settings.max_event_bytes
    try:
        raw = await _body(request, limit)
    except ClientDisconnect:
        return web.json({"error": "the body did not arrive"}, 400)
    if raw is None:
        return web.json({"error": f"the body is larger than {limit} bytes"}, 413)
    traceparent = _traceparent(request.headers.get("traceparent", ""))
    return await _enqueue(web, name, raw, configs.bots[name], traceparent)


def _traceparent(header: str) -> str:
    """A W3C ``traceparent`` header (version 00) as sent, or "" when it is not a valid one:
    an event with a broken one is still taken, it just starts a trace of its own."""
    value = header.strip().lower()
    if not _TRACEPARENT.fullmatch(value):
        return ""
    _, trace_id, span_id, _ = value.split("-")
    return "" if int(trace_id, 16) == 0 or int(span_id, 16) == 0 else value


_TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


async def _not_run(web: Web, name: str, config: BotConfig, channel: str) -> str | None:
    """Why no process of bot ``name`` would take an event for ``channel``, or None: its
    platform is neither in the bot's config (``salon run`` starts no terminal) nor in what
    the bot's heartbeat says is connected (``salon chat``'s terminal)."""
    platform, colon, _ = channel.partition(":")
    if not colon or not (platform.isascii() and platform.isalpha()):
        return None  # no platform's key at all: channel_key says what to write
    running = set(config.platforms.networks())
    for report in await web.store.health.health_reports():
        if report.bot == name:
            running.update(p for p, connected in report.platforms.items() if connected)
    if platform in running:
        return None
    runs = ", ".join(sorted(running)) or "no platform"
    said = platform[:40]
    return (
        f"{name} has no {said} platform running, so nothing would take the event (it runs: {runs})"
    )


async def _enqueue(
    web: Web, name: str, raw: bytes, config: BotConfig, traceparent: str = ""
) -> Response:
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return web.json({"error": "the body is not JSON"}, 422)
    except RecursionError:  # the parser's own bound on nesting, not a crash
        reason = "the body is nested too deeply: send a JSON object with channel and text"
        return web.json({"error": reason}, 422)
    fields = _fields(data)
    if isinstance(fields, str):
        return web.json({"error": fields}, 422)
    channel, text, author = fields
    not_run = await _not_run(web, name, config, channel)
    if not_run:
        return web.json({"error": not_run}, 422)
    try:
        key = channel_key(config, channel, label="channel")
    except ValueError as exc:
        return web.json({"error": str(exc)}, 422)
    event_id = await web.store.inbox.enqueue_event(name, key, text, author, traceparent=traceparent)
    return web.json({"queued": event_id, "bot": name, "channel": key}, 202)
