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

``LLMServer(only_under="/v1")`` serves only paths under that prefix, as vLLM serves its
API under ``/v1`` alone; any other path is a 404 ``{"detail": "Not Found"}`` (FastAPI's).

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

Connections stay open between requests as the real servers keep them (HTTP/1.1
keep-alive; streams sent chunked, other bodies with a ``Content-Length``) until the client
asks ``Connection: close``, a fault ends one, or one sits idle ``keep_alive`` seconds (5 by
default: uvicorn, under vLLM, and cpp-httplib, under llama-server, close an idle
connection after 5 s). ``keep_alive=None`` ends each answer with its connection
(``Connection: close``). ``connections`` counts the connections accepted; ``idle_closed``
is set when the server closed one for idleness; ``wait_no_connections`` waits until the
clients have closed theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import struct
from collections import deque
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Literal

from fakes.billing import AutoPrefixBilling, BillingRefused, CacheBilling, ImplicitPrefixBilling
from fakes.llm_wire import Recorded, Scripted, Wire, complete_body, error_body
from fakes.llm_wire import wire as wire_for
from fakes.reasoning import refusal as reasoning_refusal

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


class LLMServer:
    def __init__(
        self,
        *,
        billing: CacheBilling | AutoPrefixBilling | None = None,
        flavour: Flavour = "openai",
        fault_rate: float = 0.0,
        faults: tuple[str, ...] = FAULTS,
        seed: int = 0,
        only_under: str | None = None,
        keep_alive: float | None = 5.0,
    ) -> None:
        unknown = set(faults) - set(FAULTS)
        assert not unknown, f"unknown faults: {unknown}"
        self.billing = billing  # requests billed for the prompt cache (its vendor's)
        self.flavour = flavour
        self.only_under = only_under
        self.fault_rate = fault_rate
        self.faults = faults
        self.keep_alive = keep_alive
        self.connections = 0
        self.idle_closed = asyncio.Event()  # set when the server closed an idle connection
        self._open: set[asyncio.StreamWriter] = set()
        self._closing = asyncio.Condition()  # notified as each connection ends
        self.retry_after = "1"
        self.script: deque[Scripted] = deque()
        self.default = Scripted(text="default reply")
        # With nothing scripted, ``respond`` (when set) makes the reply from the request.
        self.respond: Callable[[Recorded], Scripted] | None = None
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
        for writer in list(self._open):  # and the idle ones, waiting for a next request
            writer.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    async def __aenter__(self) -> LLMServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _bills(self, vendor: str) -> bool:
        """Whether the billing fake prices this vendor's requests (markers: Anthropic's)."""
        if isinstance(self.billing, ImplicitPrefixBilling):
            return vendor == "gemini"
        if isinstance(self.billing, AutoPrefixBilling):
            return vendor == "openai"
        return vendor in ("anthropic", "bedrock")

    def _next_reply(self, request: Recorded) -> Scripted:
        if self.script:
            reply = self.script.popleft()
        else:
            reply = self.respond(request) if self.respond is not None else self.default
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
        """One connection: its requests one after the other, while it is kept alive."""
        self.connections += 1
        self._open.add(writer)
        try:
            while not self._stopping.is_set():
                try:
                    async with asyncio.timeout(self.keep_alive):
                        request = await _read_request(reader)
                except TimeoutError:  # idle too long: the server closes it
                    writer.close()
                    self.idle_closed.set()
                    return
                if request is None or not await self._answer(request, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._open.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            async with self._closing:
                self._closing.notify_all()

    async def wait_no_connections(self, within: float = 10) -> None:
        """Until no client holds a connection open (each closed its own)."""
        async with asyncio.timeout(within), self._closing:
            await self._closing.wait_for(lambda: not self._open)

    def _keeps(self, request: Recorded) -> bool:
        return self.keep_alive is not None and request.keeps_alive

    async def _answer(self, request: Recorded, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection may carry the next one."""
        self.requests.append(request)
        self.received.set()
        if self.only_under and not request.path.startswith(self.only_under + "/"):
            body = b'{"detail":"Not Found"}'
            _write_head(writer, 404, "application/json", {}, len(body), keep=self._keeps(request))
            writer.write(body)
            await writer.drain()
            return self._keeps(request)
        reply = self._next_reply(request)
        if reply.fault == "hang_before_head":
            await self._stopping.wait()
            return False
        # A fault that ends the connection says so in the head, as a server that closes
        # after its answer does: the client does not send its next request on it.
        keep = self._keeps(request) and reply.fault in (None, "malformed")
        await self._respond(request, reply, writer, keep)
        return keep

    async def _respond(
        self, request: Recorded, reply: Scripted, writer: asyncio.StreamWriter, keep: bool
    ) -> None:
        vendor = _vendor(request.path)
        if vendor == "openai":
            refusal = self._render(request)
            if refusal is not None:
                reply = replace(reply, status=refusal[0], error_message=refusal[1])
        body = request.body
        if vendor == "bedrock":  # Bedrock names the model in the path, not the body
            body = {**body, "model": request.path.split("/")[2]}
        refused = reasoning_refusal(vendor, body)
        if refused is not None:
            reply = replace(reply, status=refused[0], error_message=refused[1])
        if self._bills(vendor) and self.billing is not None and reply.status == 200:
            reply = self._bill(request, reply)
        if reply.status != 200:
            body = error_body(vendor, self.flavour, reply)
            _write_head(
                writer, reply.status, "application/json", reply.headers, len(body), keep=keep
            )
            writer.write(body)
            await writer.drain()
            return
        if not _streams(vendor, request):
            body = json.dumps(complete_body(vendor, request, reply)).encode()
            _write_head(writer, 200, "application/json", reply.headers, len(body), keep=keep)
            writer.write(body)
            await writer.drain()
            return
        wire = wire_for(vendor, self.flavour, request, reply)
        await self._write_stream(writer, wire, reply, keep)

    def _bill(self, request: Recorded, reply: Scripted) -> Scripted:
        """``reply`` with the prompt's tokens as the billing fake bills them, or the
        vendor's 400 when the fake's rules refuse the request (before anything is billed)."""
        assert self.billing is not None
        try:
            bill = self.billing.bill(request.body, _model(request))
        except BillingRefused as refused:
            return replace(reply, status=400, error_message=str(refused))
        return replace(
            reply,
            input_tokens=bill.input_tokens,
            cache_read_tokens=bill.cache_read_tokens,
            cache_write_tokens=bill.cache_write_tokens,
            cache_write_1h_tokens=bill.cache_write_1h_tokens,
        )

    def _render(self, request: Recorded) -> tuple[int, str] | None:
        """Record the prompt the flavour's server would build; a refusal if it would refuse."""
        messages = request.body.get("messages", [])
        refusal = _flavour_refusal(self.flavour, request.body, messages)
        if refusal is None:
            request.prompt = _flavour_prompt(self.flavour, request.body, messages)
        return refusal

    async def _write_stream(
        self, writer: asyncio.StreamWriter, wire: Wire, reply: Scripted, keep: bool
    ) -> None:
        frames = wire.frames
        fault = reply.fault
        if fault == "truncate":
            frames = frames[: wire.finish_at]
        elif fault == "malformed":
            frames = [*frames[: wire.cut], wire.broken, *frames[wire.cut :]]
        elif fault in ("hang_mid_stream", "reset"):
            frames = frames[: wire.cut]
        _write_head(writer, 200, wire.content_type, reply.headers, None, keep=keep)
        for index, frame in enumerate(frames):
            if reply.pause_before_chunk is not None and index == reply.pause_before_chunk:
                assert reply.resume is not None
                await reply.resume.wait()
            if not keep:  # the body ends with the connection
                writer.write(frame)
            elif frame:  # a chunk (an empty one would end the body)
                writer.write(b"%x\r\n%s\r\n" % (len(frame), frame))
            await writer.drain()
        if fault == "hang_mid_stream":
            await self._stopping.wait()
        elif fault == "reset":
            _reset(writer)
        elif keep:  # the last chunk: the body's end
            writer.write(b"0\r\n\r\n")
            await writer.drain()


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


def _model(request: Recorded) -> str | None:
    """The model a request names: in its body, or (Bedrock, Gemini) in its path."""
    named = request.body.get("model")
    if isinstance(named, str):
        return named
    bare = request.path.split("?", maxsplit=1)[0]
    for prefix in ("/model/", "models/"):
        if prefix in bare:
            return bare.split(prefix, 1)[1].split("/")[0].split(":")[0]
    return None


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


def _write_head(
    writer: asyncio.StreamWriter,
    status: int,
    content_type: str,
    extra: dict[str, str],
    length: int | None,
    *,
    keep: bool,
) -> None:
    lines = [f"HTTP/1.1 {status} Scripted", f"Content-Type: {content_type}"]
    if not keep:  # the body, when it has no length, ends with the connection
        lines.append("Connection: close")
    if length is not None:
        lines.append(f"Content-Length: {length}")
    elif keep:
        lines.append("Transfer-Encoding: chunked")
    lines.extend(f"{k}: {v}" for k, v in extra.items())
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
