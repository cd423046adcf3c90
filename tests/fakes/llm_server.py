"""A scripted loopback LLM server speaking the OpenAI and Anthropic wire formats.

The real SDKs talk to it over HTTP on 127.0.0.1. Each request takes the next ``Scripted``
reply from the queue (or the default); every request is recorded for assertions. Streams
can be paused between chunks on an ``asyncio.Event`` so a test can observe what arrived
before the rest of the answer exists.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import struct
import zlib
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

from tests.fakes.billing import CacheBilling

__all__ = ["LLMServer", "Recorded", "Scripted"]


@dataclass
class Scripted:
    text: str = ""
    chunks: list[str] | None = None
    status: int = 200
    error_message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    raw_events: list[str] | None = None  # literal SSE data payloads, for malformed streams
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    pause_before_chunk: int | None = None
    resume: asyncio.Event | None = None
    input_tokens: int = 12
    output_tokens: int = 7
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    finish_reason: str | None = None  # gemini: e.g. "SAFETY" (with no text: a blocked answer)
    block_reason: str | None = None  # gemini: the prompt was blocked, e.g. "SAFETY"

    def deltas(self) -> list[str]:
        return self.chunks if self.chunks is not None else [self.text]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class LLMServer:
    def __init__(self, *, billing: CacheBilling | None = None) -> None:
        self.billing = billing  # Anthropic requests are billed for the prompt cache
        self.script: deque[Scripted] = deque()
        self.default = Scripted(text="default reply")
        self.requests: list[Recorded] = []
        self.received = asyncio.Event()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def queue(self, *replies: Scripted | str) -> None:
        for reply in replies:
            self.script.append(Scripted(text=reply) if isinstance(reply, str) else reply)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def __aenter__(self) -> LLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            self.received.set()
            reply = self.script.popleft() if self.script else self.default
            await self._respond(request, reply, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _respond(
        self, request: Recorded, reply: Scripted, writer: asyncio.StreamWriter
    ) -> None:
        bedrock = request.path.startswith("/model/")
        anthropic = bedrock or request.path.endswith("/messages")
        if "models/" in request.path and ":" in request.path.rsplit("/", 1)[-1]:
            await _respond_gemini(request, reply, writer)
            return
        if request.path.endswith("/completions") and not request.path.endswith("/chat/completions"):
            await _respond_completions(request, reply, writer)
            return
        if anthropic and self.billing is not None and reply.status == 200:
            bill = self.billing.bill(request.body)
            reply = replace(
                reply,
                input_tokens=bill.input_tokens,
                cache_read_tokens=bill.cache_read_tokens,
                cache_write_tokens=bill.cache_write_tokens,
            )
        if reply.status != 200:
            body = _error_body(anthropic, reply)
            _write_head(writer, reply.status, "application/json", reply.headers, len(body))
            writer.write(body)
            await writer.drain()
            return
        if bedrock and request.path.endswith("/invoke-with-response-stream"):
            _write_head(writer, 200, "application/vnd.amazon.eventstream", reply.headers, None)
            for _, payload in _anthropic_events(request, reply):
                writer.write(_eventstream_chunk(payload.encode()))
                await writer.drain()
            return
        if not request.body.get("stream") and not bedrock:
            body = json.dumps(_complete_body(anthropic, request, reply)).encode()
            _write_head(writer, 200, "application/json", reply.headers, len(body))
            writer.write(body)
            await writer.drain()
            return
        _write_head(writer, 200, "text/event-stream", reply.headers, None)
        events = _anthropic_events(request, reply) if anthropic else _openai_events(request, reply)
        for index, (name, payload) in enumerate(events):
            if reply.pause_before_chunk is not None and index == reply.pause_before_chunk:
                assert reply.resume is not None
                await reply.resume.wait()
            prefix = f"event: {name}\n" if name else ""
            writer.write(f"{prefix}data: {payload}\n\n".encode())
            await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> Recorded | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    if not lines or not lines[0]:
        return None
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    raw = await reader.readexactly(length) if length else b"{}"
    return Recorded(method, path, headers, json.loads(raw or b"{}"))


async def _respond_completions(
    request: Recorded, reply: Scripted, writer: asyncio.StreamWriter
) -> None:
    """``/v1/completions`` (base models): the prompt is raw text, the answer ``text``."""
    if reply.status != 200:
        body = _error_body(False, reply)
        _write_head(writer, reply.status, "application/json", reply.headers, len(body))
        writer.write(body)
        return
    model = request.body.get("model", "scripted")
    head = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": model}
    if not request.body.get("stream"):
        choice = {"index": 0, "text": "".join(reply.deltas()), "finish_reason": "stop"}
        body = json.dumps({**head, "choices": [choice], "usage": _openai_usage(reply)}).encode()
        _write_head(writer, 200, "application/json", reply.headers, len(body))
        writer.write(body)
        return
    _write_head(writer, 200, "text/event-stream", reply.headers, None)
    chunks = reply.deltas()
    for index, text in enumerate(chunks):
        finish = "stop" if index == len(chunks) - 1 else None
        choice = {"index": 0, "text": text, "finish_reason": finish}
        writer.write(f"data: {json.dumps({**head, 'choices': [choice]})}\n\n".encode())
    usage = {**head, "choices": [], "usage": _openai_usage(reply)}
    writer.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
    await writer.drain()


async def _respond_gemini(request: Recorded, reply: Scripted, writer: asyncio.StreamWriter) -> None:
    """The Gemini API's ``models/{model}:generateContent`` and ``:streamGenerateContent``."""
    if reply.status != 200:
        status = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED"}.get(reply.status, "INTERNAL")
        error = {"code": reply.status, "message": reply.error_message, "status": status}
        body = json.dumps({"error": error}).encode()
        _write_head(writer, reply.status, "application/json", reply.headers, len(body))
        writer.write(body)
        return
    usage = {
        "promptTokenCount": reply.input_tokens + reply.cache_read_tokens,
        "candidatesTokenCount": reply.output_tokens,
        "cachedContentTokenCount": reply.cache_read_tokens,
        "totalTokenCount": reply.input_tokens + reply.cache_read_tokens + reply.output_tokens,
    }
    chunks: list[dict[str, Any]] = []
    if reply.block_reason:
        chunks.append(
            {"promptFeedback": {"blockReason": reply.block_reason}, "usageMetadata": usage}
        )
    else:
        parts: list[dict[str, Any]] = [{"text": t} for t in reply.deltas() if t]
        parts += [{"functionCall": {"name": n, "args": a}} for _, n, a in reply.tool_calls]
        for index, part in enumerate(parts or [None]):
            last = index == max(len(parts), 1) - 1
            candidate: dict[str, Any] = {"index": 0}
            if part is not None:
                candidate["content"] = {"role": "model", "parts": [part]}
            if last:
                candidate["finishReason"] = reply.finish_reason or "STOP"
            chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": "fake"}
            if last:
                chunk["usageMetadata"] = usage
            chunks.append(chunk)
    if request.path.split("?")[0].endswith(":streamGenerateContent"):
        _write_head(writer, 200, "text/event-stream", reply.headers, None)
        for chunk in chunks:
            writer.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            await writer.drain()
        return
    body = json.dumps(chunks[-1]).encode()
    _write_head(writer, 200, "application/json", reply.headers, len(body))
    writer.write(body)


def _eventstream_chunk(event: bytes) -> bytes:
    """One AWS event-stream message carrying an Anthropic event, as Bedrock streams them:
    prelude (lengths and their CRC), string headers, a JSON payload, then a CRC of it all."""
    payload = json.dumps({"bytes": base64.b64encode(event).decode()}).encode()
    headers = b""
    for name, value in (
        (":event-type", "chunk"),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ):
        raw = value.encode()
        headers += bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw
    total = 12 + len(headers) + len(payload) + 4
    prelude = struct.pack(">II", total, len(headers))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + headers + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _write_head(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str,
    extra: dict[str, str],
    length: int | None,
) -> None:
    lines = [f"HTTP/1.1 {status} Scripted", f"Content-Type: {content_type}", "Connection: close"]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    lines.extend(f"{k}: {v}" for k, v in extra.items())
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())


def _error_body(anthropic: bool, reply: Scripted) -> bytes:
    if anthropic:
        kind = "rate_limit_error" if reply.status == 429 else "api_error"
        body: dict[str, Any] = {
            "type": "error",
            "error": {"type": kind, "message": reply.error_message},
        }
    else:
        body = {"error": {"message": reply.error_message, "type": "scripted", "code": None}}
    return json.dumps(body).encode()


def _complete_body(anthropic: bool, request: Recorded, reply: Scripted) -> dict[str, Any]:
    text = "".join(reply.deltas())
    model = request.body.get("model", "scripted")
    if anthropic:
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": _anthropic_usage(reply),
        }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": _openai_usage(reply),
    }


def _anthropic_usage(reply: Scripted) -> dict[str, int]:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
    }


def _openai_usage(reply: Scripted) -> dict[str, Any]:
    prompt = reply.input_tokens + reply.cache_read_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": reply.output_tokens,
        "total_tokens": prompt + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
    }


def _openai_events(request: Recorded, reply: Scripted) -> list[tuple[str, str]]:
    if reply.raw_events is not None:
        return [("", raw) for raw in reply.raw_events]
    model = request.body.get("model", "scripted")
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return json.dumps({**head, "choices": [choice]})

    events = [
        ("", chunk({"role": "assistant", "content": text}, None)) for text in reply.deltas() if text
    ]
    for index, (call_id, name, args) in enumerate(reply.tool_calls):
        start = {"index": index, "id": call_id, "type": "function"}
        start["function"] = {"name": name, "arguments": ""}
        events.append(("", chunk({"tool_calls": [start]}, None)))
        raw = json.dumps(args)
        for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            fragment = {"index": index, "function": {"arguments": part}}
            events.append(("", chunk({"tool_calls": [fragment]}, None)))
    events.append(("", chunk({}, "tool_calls" if reply.tool_calls else "stop")))
    events.append(("", json.dumps({**head, "choices": [], "usage": _openai_usage(reply)})))
    events.append(("", "[DONE]"))
    return events


def _anthropic_events(request: Recorded, reply: Scripted) -> list[tuple[str, str]]:
    if reply.raw_events is not None:
        return [("content_block_delta", raw) for raw in reply.raw_events]
    model = request.body.get("model", "scripted")
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**_anthropic_usage(reply), "output_tokens": 1},
    }
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    ]
    for text in reply.deltas():
        delta = {"type": "text_delta", "text": text}
        events.append({"type": "content_block_delta", "index": 0, "delta": delta})
    events.append({"type": "content_block_stop", "index": 0})
    for index, (call_id, name, args) in enumerate(reply.tool_calls, start=1):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if reply.tool_calls else "end_turn"
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": reply.output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return [(event["type"], json.dumps(event)) for event in events]
