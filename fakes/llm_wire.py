"""The wire formats of the loopback LLM server: scripted replies, and how each vendor
writes them (bodies, error bodies, and streams as frames, with the points faults need)."""

from __future__ import annotations

import asyncio
import base64
import json
import struct
import zlib
from dataclasses import dataclass, field
from typing import Any

from fakes.anthropic_reasoning import anthropic_signature
from fakes.reasoning import gemini_signature

__all__ = ["Recorded", "Scripted", "Wire", "complete_body", "error_body", "wire"]


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
    cache_write_1h_tokens: int = 0  # anthropic: of cache_write_tokens, those kept 1 hour
    finish_reason: str | None = None  # gemini: e.g. "SAFETY" (with no text: a blocked answer)
    block_reason: str | None = None  # gemini: the prompt was blocked, e.g. "SAFETY"
    fault: str | None = None  # one of llm_server.FAULTS
    # Reasoning, streamed the way each vendor streams it, before the answer's text (only
    # when the request asked for reasoning, as the real servers do; see fakes/reasoning.py).
    thinking: str = ""
    thinking_chunks: list[str] | None = None
    reasoning_tokens: int = 0  # billed as output; reported in the vendor's own field
    redacted_thinking: str = ""  # anthropic: a redacted_thinking block's opaque data
    # openai: the delta field reasoning streams in: "reasoning_content" (DeepSeek,
    # llama.cpp), "reasoning" (newer vLLM), "openrouter" (reasoning and reasoning_details);
    # None: the flavour's own (see _openai_reasoning).
    reasoning_field: str | None = None

    def thinking_deltas(self) -> list[str]:
        if self.thinking_chunks is not None:
            return self.thinking_chunks
        return [self.thinking] if self.thinking else []

    def deltas(self) -> list[str]:
        return self.chunks if self.chunks is not None else [self.text]


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    prompt: str = ""  # chat completions: the prompt as the flavour's template renders it

    @property
    def keeps_alive(self) -> bool:
        """Whether the client leaves the connection open for a next request."""
        return self.headers.get("connection", "").lower() != "close"


@dataclass
class Wire:
    """One streamed answer as frames: ``finish_at`` is the frame with the finish reason,
    ``cut`` the point after the first content frame where mid-stream faults strike."""

    content_type: str
    frames: list[bytes]
    finish_at: int
    cut: int
    broken: bytes


# --- error and complete bodies ----------------------------------------------------------------


def error_body(vendor: str, flavour: str, reply: Scripted) -> bytes:
    status, message = reply.status, reply.error_message
    body: dict[str, Any]
    if vendor in ("anthropic", "bedrock"):
        kinds = {400: "invalid_request_error", 429: "rate_limit_error"}
        kind = kinds.get(status, "api_error")
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


def complete_body(vendor: str, request: Recorded, reply: Scripted) -> dict[str, Any]:
    text = "".join(reply.deltas())
    model = request.body.get("model", "scripted")
    if vendor in ("anthropic", "bedrock"):
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [*_anthropic_thinking(request, reply), {"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": _anthropic_usage(reply),
        }
    if vendor == "gemini":
        return _gemini_complete(request, reply)
    if vendor == "completions":
        choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": "stop"}
        head = {"id": "cmpl-1", "object": "text_completion", "created": 0, "model": model}
        return {**head, "choices": [choice], "usage": _openai_usage(reply)}
    message = {"role": "assistant", "content": text}
    if _openai_thinks(request, reply):
        message.update(_openai_reasoning(reply, "".join(reply.thinking_deltas()), "", -1))
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": _openai_usage(reply),
    }


def _anthropic_usage(reply: Scripted) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "input_tokens": reply.input_tokens,
        "output_tokens": reply.output_tokens,
        "cache_read_input_tokens": reply.cache_read_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
        # The split by lifetime, as the API reports it beside the total.
        "cache_creation": {
            "ephemeral_5m_input_tokens": reply.cache_write_tokens - reply.cache_write_1h_tokens,
            "ephemeral_1h_input_tokens": reply.cache_write_1h_tokens,
        },
    }
    if reply.reasoning_tokens:  # part of output_tokens, broken out for observability
        usage["output_tokens_details"] = {"thinking_tokens": reply.reasoning_tokens}
    return usage


def _anthropic_thinks(request: Recorded) -> bool:
    thinking = request.body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _anthropic_thinking(request: Recorded, reply: Scripted) -> list[dict[str, Any]]:
    """The reasoning blocks that open an answer, when the request asked for reasoning:
    a signed ``thinking`` block, then a ``redacted_thinking`` block, as scripted."""
    if not _anthropic_thinks(request):
        return []
    blocks: list[dict[str, Any]] = []
    if reply.thinking_deltas():
        text = "".join(reply.thinking_deltas())
        blocks.append(
            {"type": "thinking", "thinking": text, "signature": anthropic_signature(text)}
        )
    if reply.redacted_thinking:
        blocks.append({"type": "redacted_thinking", "data": reply.redacted_thinking})
    return blocks


def _anthropic_thinking_events(request: Recorded, reply: Scripted) -> list[dict[str, Any]]:
    """The reasoning blocks streamed as the API streams them: a thinking block opens empty,
    its text comes in ``thinking_delta``s and its signature in one ``signature_delta`` just
    before the block stops; a redacted block arrives whole in its start event."""
    events: list[dict[str, Any]] = []
    for index, block in enumerate(_anthropic_thinking(request, reply)):
        if block["type"] == "redacted_thinking":
            start = {"type": "content_block_start", "index": index, "content_block": block}
            events += [start, {"type": "content_block_stop", "index": index}]
            continue
        opened = {"type": "thinking", "thinking": "", "signature": ""}
        events.append({"type": "content_block_start", "index": index, "content_block": opened})
        for text in reply.thinking_deltas():
            delta = {"type": "thinking_delta", "thinking": text}
            events.append({"type": "content_block_delta", "index": index, "delta": delta})
        signed = {"type": "signature_delta", "signature": block["signature"]}
        events.append({"type": "content_block_delta", "index": index, "delta": signed})
        events.append({"type": "content_block_stop", "index": index})
    return events


def _openai_usage(reply: Scripted) -> dict[str, Any]:
    prompt = reply.input_tokens + reply.cache_read_tokens
    written = reply.output_tokens + reply.reasoning_tokens  # reasoning counts as completion
    usage: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": written,
        "total_tokens": prompt + written,
        "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
    }
    if reply.reasoning_tokens:
        usage["completion_tokens_details"] = {"reasoning_tokens": reply.reasoning_tokens}
    return usage


def _openai_thinks(request: Recorded, reply: Scripted) -> bool:
    """Whether an OpenAI-compatible server streams the scripted reasoning: a reasoning
    model thinks unless the request switches it off (a chat template's ``enable_thinking``,
    DeepSeek's ``thinking``, OpenRouter's ``reasoning``)."""
    body = request.body
    if not reply.thinking_deltas():
        return False
    template = body.get("chat_template_kwargs") or {}
    thinking = body.get("thinking") or {}
    reasoning = body.get("reasoning") or {}
    return not (
        template.get("enable_thinking") is False
        or thinking.get("type") == "disabled"
        or reasoning.get("exclude") is True
        or reasoning.get("enabled") is False
        or reasoning.get("effort") == "none"
    )


def _openai_reasoning(reply: Scripted, text: str, flavour: str, index: int) -> dict[str, Any]:
    """One piece of reasoning in the delta (or message) field its server uses: vLLM's
    ``reasoning``, DeepSeek's and llama.cpp's ``reasoning_content``; OpenRouter's
    ``reasoning`` with ``reasoning_details`` blocks (text, then the block's signature)."""
    field = reply.reasoning_field or ("reasoning" if flavour == "vllm" else "reasoning_content")
    if field != "openrouter":
        return {field: text}
    detail: dict[str, Any] = {"type": "reasoning.text", "index": 0, "format": "anthropic-claude-v1"}
    pieces = reply.thinking_deltas()
    if index < 0 or index == len(pieces) - 1:  # the last piece carries the signature
        detail["signature"] = f"sig-{len(''.join(pieces))}"
    return {"reasoning": text, "reasoning_details": [{**detail, "text": text}]}


# --- streams ----------------------------------------------------------------------------------


def _sse(data: str, event: str = "", end: str = "\n\n") -> bytes:
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}{end}".encode()


def wire(vendor: str, flavour: str, request: Recorded, reply: Scripted) -> Wire:
    if vendor == "gemini":
        return _gemini_wire(request, reply)
    if vendor == "completions":
        return _completions_wire(request, reply)
    if vendor in ("anthropic", "bedrock"):
        return _anthropic_wire(request, reply, bedrock=vendor == "bedrock")
    return _openai_wire(request, reply, flavour)


def _openai_wire(request: Recorded, reply: Scripted, flavour: str) -> Wire:
    broken = _sse('{"choices": [{"index": 0, "delta": {"content": "x"')
    if reply.raw_events is not None:
        frames = [_sse(raw) for raw in reply.raw_events]
        return Wire("text/event-stream", frames, len(frames), min(1, len(frames)), broken)
    model = request.body.get("model", "scripted")
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model}

    def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse(json.dumps({**head, "choices": [choice]}))

    frames = []
    if _openai_thinks(request, reply):
        thinking = reply.thinking_deltas()
        frames = [
            chunk(
                {"role": "assistant", "content": None, **_openai_reasoning(reply, t, flavour, i)},
                None,
            )
            for i, t in enumerate(thinking)
        ]
    frames += [chunk({"role": "assistant", "content": t}, None) for t in reply.deltas() if t]
    for index, (call_id, name, args) in enumerate(reply.tool_calls):
        raw = json.dumps(args)
        start = {"index": index, "id": call_id, "type": "function"}
        frames.append(
            chunk({"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]}, None)
        )
        for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
            fragment: dict[str, Any] = {"index": index, "function": {"arguments": part}}
            if flavour == "llamacpp":  # the whole name again in every delta, as those builds did
                fragment = {**fragment, "type": "function"}
                fragment["function"] = {"name": name, "arguments": part}
            frames.append(chunk({"tool_calls": [fragment]}, None))
    finish_at = len(frames)
    frames.append(chunk({}, "tool_calls" if reply.tool_calls else "stop"))
    frames.append(_sse(json.dumps({**head, "choices": [], "usage": _openai_usage(reply)})))
    frames.append(_sse("[DONE]"))
    return Wire("text/event-stream", frames, finish_at, min(1, finish_at), broken)


def _completions_wire(request: Recorded, reply: Scripted) -> Wire:
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
    return Wire("text/event-stream", frames, finish_at, min(1, finish_at), broken)


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
    thinking = _anthropic_thinking_events(request, reply)
    first = len(_anthropic_thinking(request, reply))  # the text block's index
    events: list[dict[str, Any]] = [{"type": "message_start", "message": message}, *thinking]
    opened = {"type": "text", "text": ""}
    events.append({"type": "content_block_start", "index": first, "content_block": opened})
    for text in reply.deltas():
        delta = {"type": "text_delta", "text": text}
        events.append({"type": "content_block_delta", "index": first, "delta": delta})
    events.append({"type": "content_block_stop", "index": first})
    for index, (call_id, name, args) in enumerate(reply.tool_calls, start=first + 1):
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        events.append({"type": "content_block_start", "index": index, "content_block": block})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        events.append({"type": "content_block_delta", "index": index, "delta": delta})
        events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if reply.tool_calls else "end_turn"
    usage: dict[str, Any] = {"output_tokens": reply.output_tokens}
    if reply.reasoning_tokens:
        usage["output_tokens_details"] = {"thinking_tokens": reply.reasoning_tokens}
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": usage,
        }
    )
    events.append({"type": "message_stop"})
    return events


def _anthropic_wire(request: Recorded, reply: Scripted, *, bedrock: bool) -> Wire:
    cut = 3
    if reply.raw_events is not None:
        payloads = [("content_block_delta", raw) for raw in reply.raw_events]
        finish_at = len(payloads)
    else:
        events = _anthropic_events(request, reply)
        payloads = [(e["type"], json.dumps(e)) for e in events]
        finish_at = next(i for i, e in enumerate(events) if e["type"] == "message_delta")
        cut = 1 + next(
            i for i, e in enumerate(events) if e.get("delta", {}).get("type") == "text_delta"
        )
    broken_json = '{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta"'
    if bedrock:
        frames = [_eventstream_chunk(payload.encode()) for _, payload in payloads]
        broken = _eventstream_chunk(broken_json.encode())
        content_type = "application/vnd.amazon.eventstream"
    else:
        frames = [_sse(payload, name) for name, payload in payloads]
        broken = _sse(broken_json, "content_block_delta")
        content_type = "text/event-stream"
    # Mid-stream faults strike after the first text delta (after any thinking block).
    return Wire(content_type, frames, finish_at, min(cut, finish_at), broken)


def _gemini_usage(reply: Scripted) -> dict[str, int]:
    """``usageMetadata``: thoughts are counted beside the candidates, not inside them."""
    prompt = reply.input_tokens + reply.cache_read_tokens
    usage = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": reply.output_tokens,
        "cachedContentTokenCount": reply.cache_read_tokens,
        "totalTokenCount": prompt + reply.output_tokens + reply.reasoning_tokens,
    }
    if reply.reasoning_tokens:
        usage["thoughtsTokenCount"] = reply.reasoning_tokens
    return usage


def _gemini_parts(
    request: Recorded, reply: Scripted
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The thought parts (only when the request asked for them with ``includeThoughts``)
    and the answer's parts. As Gemini 3 does, the first function call carries a thought
    signature whether or not thinking was configured; without calls, the last text part
    carries one when the request configured thinking (see fakes/reasoning.py)."""
    thinking = (request.body.get("generationConfig") or {}).get("thinkingConfig")
    # The API reads proto field names in either spelling (the SDK sends this one snake_case).
    shown = thinking is not None and bool(
        thinking.get("includeThoughts", thinking.get("include_thoughts"))
    )
    thoughts = [{"text": t, "thought": True} for t in reply.thinking_deltas() if t and shown]
    answer: list[dict[str, Any]] = [{"text": t} for t in reply.deltas() if t]
    calls: list[dict[str, Any]] = [
        {"functionCall": {"name": n, "args": a}} for _, n, a in reply.tool_calls
    ]
    if calls:
        calls[0]["thoughtSignature"] = gemini_signature()
    elif answer and thinking is not None:
        answer[-1]["thoughtSignature"] = gemini_signature()
    return thoughts, answer + calls


def _gemini_complete(request: Recorded, reply: Scripted) -> dict[str, Any]:
    thoughts, answer = _gemini_parts(request, reply)
    parts = thoughts + answer if thoughts or answer else [{"text": ""}]
    candidate = {"index": 0, "content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
    return {
        "candidates": [candidate],
        "usageMetadata": _gemini_usage(reply),
        "modelVersion": "fake",
    }


def _gemini_wire(request: Recorded, reply: Scripted) -> Wire:
    """The Gemini API's ``:streamGenerateContent?alt=sse``: thought parts first, each part
    in a chunk of its own; the last chunk has the finish and the usage."""
    usage = _gemini_usage(reply)
    chunks: list[dict[str, Any]] = []
    thoughts: list[dict[str, Any]] = []
    if reply.block_reason:
        chunks.append(
            {"promptFeedback": {"blockReason": reply.block_reason}, "usageMetadata": usage}
        )
    else:
        thoughts, parts = _gemini_parts(request, reply)
        for thought in thoughts:
            candidate = {"index": 0, "content": {"role": "model", "parts": [thought]}}
            chunks.append({"candidates": [candidate], "modelVersion": "fake"})
        for index, part in enumerate(parts or [None]):
            last = index == max(len(parts), 1) - 1
            candidate = {"index": 0}
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
    # Mid-stream faults strike after the first frame of the answer, past the thoughts.
    return Wire("text/event-stream", frames, finish_at, min(len(thoughts) + 1, finish_at), broken)


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
