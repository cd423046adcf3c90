"""A scripted loopback LLM server speaking the OpenAI, Anthropic, Bedrock and Gemini formats.

The real SDKs talk to it over HTTP on 127.0.0.1. Each request takes the next ``Scripted``
reply from the queue (or the default); every request is recorded for assertions. Streams
can be paused before a frame on an ``asyncio.Event`` so a test can observe what arrived
before the rest of the answer exists.

Flavours (``LLMServer(flavour=...)``) give ``/v1/chat/completions`` the habits of one
OpenAI-compatible server. Each request's prompt, as that server's chat template would
render it (ChatML here), is recorded in ``Recorded.prompt``, so a test can see whether a
final assistant message was continued or answered:

- ``openai`` (default): a final assistant message is closed and answered in a new turn.
- ``vllm``: honours ``continue_final_message`` (default false) and
  ``add_generation_prompt`` (default true); both true is a 400, as vLLM's request
  validation has it.
- ``llamacpp`` (llama-server): continues a final assistant message by itself (its
  ``prefill_assistant``, on by default since mid-2025) and ignores the unknown
  ``continue_final_message``; two assistant messages at the end are a 500. Two habits of
  older builds are kept because Salon must survive them: streamed tool calls repeat the
  whole name in every delta (builds between ggml-org/llama.cpp#12379 and #13800), and a
  message whose ``content`` is null or missing is a 500 "Invalid 'content' type" (builds
  before Feb 2025). Errors have llama.cpp's shape ``{"error": {"code", "message", "type"}}``.
- ``llama_cpp_python``: its request model drops unknown fields, so ``continue_final_message``
  and ``add_generation_prompt`` are ignored and the prompt always ends with a new assistant
  turn: a final assistant message is answered, never continued.

Faults, for fault suites: ``Scripted(fault=...)`` for one reply, or
``LLMServer(fault_rate=0.2, seed=1, faults=(...))`` for a seeded random share of requests
(``faults_applied`` lists what each request got, ``None`` for none). In every wire format:

- ``http_500``: a 500 with the vendor's error body.
- ``http_429``: a 429 with ``Retry-After: <LLMServer.retry_after>`` (default ``1``).
- ``hang_before_head``: accepts the request and never answers (until the server stops).
- ``hang_mid_stream``: sends the head and the first content frame, then nothing more.
- ``truncate``: the stream stops before the frame that carries the finish reason (OpenAI
  ``finish_reason``, Anthropic ``message_delta``, Gemini ``finishReason``); clean close.
- ``malformed``: a frame of broken JSON after the first content frame.
- ``reset``: the first content frame, then the connection is reset (TCP RST).

Stream faults apply to streaming requests; a non-streaming request gets a normal body.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import socket
import struct
import zlib
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tests.fakes.billing import CacheBilling

__all__ = ["FAULTS", "Flavour", "LLMServer", "Recorded", "Scripted"]

Flavour = Literal["openai", "vllm", "llamacpp", "llama_cpp_python"]
FAULTS = (
    "http_500",
    "http_429",
    "hang_before_head",
    "hang_mid_stream",
    "truncate",
    "malformed",
    "reset",
)
_VLLM_BOTH = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
_LLAMACPP_CONTENT = (
    "Invalid 'content' type (ref: https://github.com/ggml-org/llama.cpp/issues/8367)"
)


@dataclass
class Scripted:
    text: str = ""
    chunks: list[str] | None = None
    status: int = 200
    error_message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    raw_events: list[str] | None = None  # literal SSE data payloads, for malformed streams
    tool_calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    pause_before_chunk: int | None = None  # a frame index of the stream
    resume: asyncio.Event | None = None
    input_tokens: int = 12
    output_tokens: int = 7
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    finish_reason: str | None = None  # gemini: e.g. "SAFETY" (with no text: a blocked answer)
    block_reason: str | None = None  # gemini: the prompt was blocked, e.g. "SAFETY"
    fault: str | None = None  # one of FAULTS

    def deltas(self) -> list[str]:
        return self.chunks if self.chunks is not None else [self.text]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    prompt: str = ""  # chat completions: the prompt as the flavour's template renders it


@dataclass
class _Wire:
    """One streamed answer as frames: ``finish_at`` is the frame with the finish reason,
    ``cut`` the point after the first content frame where mid-stream faults strike."""

    content_type: str
    frames: list[bytes]
    finish_at: int
    cut: int
    broken: bytes


class LLMServer:
    def __init__(
        self,
        *,
        billing: CacheBilling | None = None,
        flavour: Flavour = "openai",
        fault_rate: float = 0.0,
        faults: tuple[str, ...] = FAULTS,
        seed: int = 0,
    ) -> None:
        unknown = set(faults) - set(FAULTS)
        assert not unknown, f"unknown faults: {unknown}"
        self.billing = billing  # Anthropic requests are billed for the prompt cache
        self.flavour = flavour
        self.fault_rate = fault_rate
        self.faults = faults
        self.retry_after = "1"
        self.script: deque[Scripted] = deque()
        self.default = Scripted(text="default reply")
        self.requests: list[Recorded] = []
        self.faults_applied: list[str | None] = []
        self.received = asyncio.Event()
        self._random = random.Random(seed)
        self._stopping = asyncio.Event()
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
        self._stopping.set()  # releases hung handlers
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def __aenter__(self) -> LLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _next_reply(self) -> Scripted:
        reply = self.script.popleft() if self.script else self.default
        fault = reply.fault
        # One draw per request whatever the script says, so a seed gives one sequence.
        draw = self._random.random()
        pick = self._random.choice(self.faults) if self.faults else None
        if fault is None and draw < self.fault_rate:
            fault = pick
        self.faults_applied.append(fault)
        if fault == "http_500":
            return replace(reply, status=500, error_message="injected server error")
        if fault == "http_429":
            headers = {**reply.headers, "retry-after": self.retry_after}
            return replace(reply, status=429, error_message="injected rate limit", headers=headers)
        return replace(reply, fault=fault)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await _read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            self.received.set()
            reply = self._next_reply()
            if reply.fault == "hang_before_head":
                await self._stopping.wait()
                return
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
        vendor = _vendor(request.path)
        if vendor == "openai":
            refusal = self._render(request)
            if refusal is not None:
                reply = replace(reply, status=refusal[0], error_message=refusal[1])
        if vendor in ("anthropic", "bedrock") and self.billing is not None and reply.status == 200:
            bill = self.billing.bill(request.body)
            reply = replace(
                reply,
                input_tokens=bill.input_tokens,
                cache_read_tokens=bill.cache_read_tokens,
                cache_write_tokens=bill.cache_write_tokens,
            )
        if reply.status != 200:
            body = _error_body(vendor, self.flavour, reply)
            _write_head(writer, reply.status, "application/json", reply.headers, len(body))
            writer.write(body)
            await writer.drain()
            return
        if not _streams(vendor, request):
            body = json.dumps(_complete_body(vendor, request, reply)).encode()
            _write_head(writer, 200, "application/json", reply.headers, len(body))
            writer.write(body)
            await writer.drain()
            return
        wire = _wire(vendor, self.flavour, request, reply)
        await self._write_stream(writer, wire, reply)

    def _render(self, request: Recorded) -> tuple[int, str] | None:
        """Record the prompt the flavour's server would build; a refusal if it would refuse."""
        messages = request.body.get("messages", [])
        refusal = _flavour_refusal(self.flavour, request.body, messages)
        if refusal is None:
            request.prompt = _flavour_prompt(self.flavour, request.body, messages)
        return refusal

    async def _write_stream(
        self, writer: asyncio.StreamWriter, wire: _Wire, reply: Scripted
    ) -> None:
        frames = wire.frames
        fault = reply.fault
        if fault == "truncate":
            frames = frames[: wire.finish_at]
        elif fault == "malformed":
            frames = [*frames[: wire.cut], wire.broken, *frames[wire.cut :]]
        elif fault in ("hang_mid_stream", "reset"):
            frames = frames[: wire.cut]
        _write_head(writer, 200, wire.content_type, reply.headers, None)
        for index, frame in enumerate(frames):
            if reply.pause_before_chunk is not None and index == reply.pause_before_chunk:
                assert reply.resume is not None
                await reply.resume.wait()
            writer.write(frame)
            await writer.drain()
        if fault == "hang_mid_stream":
            await self._stopping.wait()
        elif fault == "reset":
            _reset(writer)


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST rather than a FIN: linger on, with a zero timeout."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


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


def _vendor(path: str) -> str:
    bare = path.split("?", maxsplit=1)[0]
    if bare.startswith("/model/"):
        return "bedrock"
    if "models/" in bare and ":" in bare.rsplit("/", 1)[-1]:
        return "gemini"
    if bare.endswith("/messages"):
        return "anthropic"
    if bare.endswith("/completions") and not bare.endswith("/chat/completions"):
        return "completions"
    return "openai"


def _streams(vendor: str, request: Recorded) -> bool:
    if vendor == "bedrock":
        return request.path.endswith("/invoke-with-response-stream")
    if vendor == "gemini":
        return request.path.split("?", maxsplit=1)[0].endswith(":streamGenerateContent")
    return bool(request.body.get("stream"))


# --- flavours: how each OpenAI-compatible server reads a chat request -----------------------


def _text_of(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _chatml(messages: list[dict[str, Any]], *, open_last: bool = False) -> str:
    turns = [f"<|im_start|>{m.get('role')}\n{_text_of(m.get('content'))}" for m in messages]
    closed = [f"{t}<|im_end|>\n" for t in turns]
    if open_last and closed:
        closed[-1] = turns[-1]  # the final message stays open: the model continues it
    return "".join(closed)


_GENERATION_PROMPT = "<|im_start|>assistant\n"


def _flavour_refusal(
    flavour: str, body: dict[str, Any], messages: list[dict[str, Any]]
) -> tuple[int, str] | None:
    both = body.get("continue_final_message") and body.get("add_generation_prompt", True)
    if flavour == "vllm" and both:
        return 400, _VLLM_BOTH
    if flavour == "llamacpp":
        if any(m.get("content") is None for m in messages):
            return 500, _LLAMACPP_CONTENT
        roles = [m.get("role") for m in messages[-2:]]
        if roles == ["assistant", "assistant"]:
            return 500, "Cannot have 2 or more assistant messages at the end of the list."
    return None


def _flavour_prompt(flavour: str, body: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    final_assistant = bool(messages) and messages[-1].get("role") == "assistant"
    if flavour == "vllm":
        if body.get("continue_final_message"):
            return _chatml(messages, open_last=True)
        generation = _GENERATION_PROMPT if body.get("add_generation_prompt", True) else ""
        return _chatml(messages) + generation
    if flavour == "llamacpp" and final_assistant:
        return _chatml(messages[:-1]) + _GENERATION_PROMPT + _text_of(messages[-1].get("content"))
    return _chatml(messages) + _GENERATION_PROMPT


# --- error and complete bodies ----------------------------------------------------------------


def _error_body(vendor: str, flavour: str, reply: Scripted) -> bytes:
    status, message = reply.status, reply.error_message
    body: dict[str, Any]
    if vendor in ("anthropic", "bedrock"):
        kind = "rate_limit_error" if status == 429 else "api_error"
        body = {"type": "error", "error": {"type": kind, "message": message}}
    elif vendor == "gemini":
        name = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED"}.get(status, "INTERNAL")
        body = {"error": {"code": status, "message": message, "status": name}}
    elif flavour == "llamacpp":
        kind = {400: "invalid_request_error", 503: "unavailable_error"}.get(status, "server_error")
        body = {"error": {"code": status, "message": message, "type": kind}}
    elif flavour == "vllm":
        body = {
            "error": {"message": message, "type": "BadRequestError", "param": None, "code": status}
        }
    else:
        body = {"error": {"message": message, "type": "scripted", "code": None}}
    return json.dumps(body).encode()


def _complete_body(vendor: str, request: Recorded, reply: Scripted) -> dict[str, Any]:
    text = "".join(reply.deltas())
    model = request.body.get("model", "scripted")
    if vendor in ("anthropic", "bedrock"):
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
    if vendor == "gemini":
        candidate = {"index": 0, "content": {"role": "model", "parts": [{"text": text}]}}
        return {"candidates": [{**candidate, "finishReason": "STOP"}], "modelVersion": "fake"}
    if vendor == "completions":
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "stop"}
        head = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": model}
        return {**head, "choices": [choice], "usage": _openai_usage(reply)}
    message = {"role": "assistant", "content": text}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": _openai_usage(reply),
    }


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


# --- streams ----------------------------------------------------------------------------------


def _sse(data: str, event: str = "", end: str = "\n\n") -> bytes:
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}{end}".encode()


def _wire(vendor: str, flavour: str, request: Recorded, reply: Scripted) -> _Wire:
    if vendor == "gemini":
        return _gemini_wire(reply)
    if vendor == "completions":
        return _completions_wire(request, reply)
    if vendor in ("anthropic", "bedrock"):
        return _anthropic_wire(request, reply, bedrock=vendor == "bedrock")
    return _openai_wire(request, reply, repeat_names=flavour == "llamacpp")


def _openai_wire(request: Recorded, reply: Scripted, *, repeat_names: bool) -> _Wire:
    broken = _sse('{"choices": [{"index": 0, "delta": {"content": "x"')
    if reply.raw_events is not None:
        frames = [_sse(raw) for raw in reply.raw_events]
        return _Wire("text/event-stream", frames, len(frames), min(1, len(frames)), broken)
    model = request.body.get("model", "scripted")
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(json.dumps({**head, "choices": [choice]}))

    frames = [chunk({"role": "assistant", "content": t}, None) for t in reply.deltas() if t]
    for index, (call_id, name, args) in enumerate(reply.tool_calls):
        raw = json.dumps(args)
        start = {"index": index, "id": call_id, "type": "function"}
        frames.append(
            chunk({"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]}, None)
        )
        for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            fragment: dict[str, Any] = {"index": index, "function": {"arguments": part}}
            if repeat_names:  # the whole name again in every delta, as those builds did
                fragment = {**fragment, "type": "function"}
                fragment["function"] = {"name": name, "arguments": part}
            frames.append(chunk({"tool_calls": [fragment]}, None))
    finish_at = len(frames)
    frames.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    frames.append(_sse(json.dumps({**head, "choices": [], "usage": _openai_usage(reply)})))
    frames.append(_sse("[DONE]"))
    return _Wire("text/event-stream", frames, finish_at, min(1, finish_at), broken)


def _completions_wire(request: Recorded, reply: Scripted) -> _Wire:
    """``/v1/completions`` (base models): the prompt is raw text, the answer ``text``."""
    model = request.body.get("model", "scripted")
    head = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": model}

    def chunk(text: str, finish: str | None) -> bytes:
        choice = {"index": 0, "text": text, "finish_reason": finish}
        return _sse(json.dumps({**head, "choices": [choice]}))

    frames = [chunk(text, None) for text in reply.deltas() if text]
    finish_at = len(frames)
    frames.append(chunk("", "stop"))
    frames.append(_sse(json.dumps({**head, "choices": [], "usage": _openai_usage(reply)})))
    frames.append(_sse("[DONE]"))
    broken = _sse('{"choices": [{"index": 0, "text": "x"')
    return _Wire("text/event-stream", frames, finish_at, min(1, finish_at), broken)


def _anthropic_events(request: Recorded, reply: Scripted) -> list[dict[str, Any]]:
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
    return events


def _anthropic_wire(request: Recorded, reply: Scripted, *, bedrock: bool) -> _Wire:
    if reply.raw_events is not None:
        payloads = [("content_block_delta", raw) for raw in reply.raw_events]
        finish_at = len(payloads)
    else:
        events = _anthropic_events(request, reply)
        payloads = [(e["type"], json.dumps(e)) for e in events]
        finish_at = next(i for i, e in enumerate(events) if e["type"] == "message_delta")
    broken_json = '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"'
    if bedrock:
        frames = [_eventstream_chunk(payload.encode()) for _, payload in payloads]
        broken = _eventstream_chunk(broken_json.encode())
        content_type = "application/vnd.amazon.eventstream"
    else:
        frames = [_sse(payload, name) for name, payload in payloads]
        broken = _sse(broken_json, "content_block_delta")
        content_type = "text/event-stream"
    # Mid-stream faults strike after the first text delta (message_start, block start, delta).
    return _Wire(content_type, frames, finish_at, min(3, finish_at), broken)


def _gemini_wire(reply: Scripted) -> _Wire:
    """The Gemini API's ``:streamGenerateContent?alt=sse``; the last chunk has the finish."""
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
    frames = [_sse(json.dumps(chunk), end="\r\n\r\n") for chunk in chunks]
    finish_at = len(frames) - 1
    broken = _sse('{"candidates": [{"index": 0, "content"', end="\r\n\r\n")
    return _Wire("text/event-stream", frames, finish_at, min(1, finish_at), broken)


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
