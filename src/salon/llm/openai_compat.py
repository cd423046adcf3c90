"""Any OpenAI-compatible server, its streams read over aiohttp (``_http_stream``).

Chat completions for chat mode. In prefill mode, ``prefill_style`` decides:
``assistant_continue`` sends the transcript as a final assistant message with the fields a
server needs to continue it rather than answer it (vLLM's ``continue_final_message`` and
``add_generation_prompt: false`` by default), ``completions`` sends the transcript as raw
text to ``/v1/completions``, for base models.

Reasoning: a bot's ``thinking`` goes out as the field ``reasoning_style`` names (OpenAI's
``reasoning_effort``, OpenRouter's ``reasoning``, DeepSeek's ``thinking``, or the chat
template's ``enable_thinking``). It comes back as ``reasoning_content`` (DeepSeek, vLLM,
llama.cpp ``--reasoning-format deepseek``) or ``reasoning`` (OpenRouter, newer vLLM) deltas,
or inline as ``<think>…</think>`` in the text (see ``think_tags``); it is never answer text.

A base URL without ``/v1`` (``http://localhost:8080``, as Terrarium's ``AGENT_API_URL`` is
written) 404s on a server that serves its API under ``/v1`` alone (vLLM). Until a call gets
an HTTP answer, a 404 from such a base is tried once more at ``<base>/v1``; when that path
answers, the provider keeps it, logs one line, and ``base_url_note`` says so for
``salon check --live``.
What a server wants back within a tool loop goes back on the assistant turn: the reasoning
as ``reasoning_content`` (DeepSeek's thinking mode refuses a tool-call turn without it),
or OpenRouter's ``reasoning_details`` exactly as they came.
"""

from __future__ import annotations

import base64
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from salon.config import ProviderConfig
from salon.errors import ProviderError
from salon.llm._convert import REQUESTS, Converted
from salon.llm._errors import redact_url
from salon.llm._http_stream import Decoder, EventStreams
from salon.llm._sdk import BACKSTOP, add_extras, sent_body
from salon.llm.base import (
    BaseProvider,
    ChatMessage,
    ImagePart,
    LLMRequest,
    ProviderTraits,
    StopEvent,
    StreamEvent,
    TextDelta,
    TextPart,
    Thinking,
    ThinkingDelta,
    ThinkingPart,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
    parse_arguments,
    transcript_text,
    turn_bytes,
)
from salon.llm.think_tags import ThinkSplitter
from salon.model import Thought, ToolCall, Usage, clean_text

__all__ = ["VENDOR", "OpenAIProvider", "reasoning_fields", "to_openai_messages", "transcript_text"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
VENDOR = "openai"  # what this provider's thoughts say wrote them (with the model)


class OpenAIProvider(BaseProvider):
    def __init__(
        self,
        name: str,
        config: ProviderConfig,
        *,
        api_key: str | None,
        base_url: str | None,
    ) -> None:
        self.name = name
        self.traits = ProviderTraits()
        self.base_url_note: str | None = None  # what the first answer told of base_url
        self._base_settled = False  # a call got an HTTP answer: the base URL is known
        self._config = config
        self._kwargs = Converted(self._build_kwargs, REQUESTS)  # stream and trace: built once
        self._converted = Converted(_messages, weigh=turn_bytes, weak=True)
        # As the openai SDK did: OPENAI_BASE_URL, else OpenAI's. Local servers (Ollama,
        # vLLM) need no key; "unused" is what goes then. RetryingProvider owns retries.
        self._http = EventStreams(
            base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
            api_key or "unused",
            headers=config.headers,
            connect_timeout=config.connect_timeout,
            read_timeout=config.timeout + BACKSTOP,  # DeadlineProvider ends a slow answer
        )

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        if request.prefill and self._config.prefill_style == "completions":
            path, kwargs = "/completions", self._completion_kwargs(request)
            decoder: _ChunkDecoder | _CompletionDecoder = _CompletionDecoder()
        else:
            path, kwargs = "/chat/completions", self._kwargs(request)
            decoder = _ChunkDecoder(request.model, expect_thinking=self._tagless(request))
        async for event in self._post(path, kwargs, decoder):
            yield event

    def _tagless(self, request: LLMRequest) -> bool:
        """Whether the answer may start inside a ``<think>`` block its template opened: a
        thinking bot on a server that leaves the template's text as it is (the styles of
        vLLM, llama.cpp, Ollama without a parser), and not a continued transcript. The
        others (OpenAI, OpenRouter, DeepSeek) give reasoning apart, or hide it."""
        style = self._config.reasoning_style
        thinks = request.thinking is not None and not request.prefill
        return thinks and style in ("chat_template", "none")

    def _post(
        self, path: str, kwargs: dict[str, Any], decoder: Decoder
    ) -> AsyncIterator[StreamEvent]:
        """Stream the answer to a body Salon built itself (an SDK's ``create`` would walk
        the whole body against its typed parameters first: tens of milliseconds for a long
        chat)."""
        body, headers = sent_body(kwargs)
        if self._base_settled:
            return self._http.stream(self.name, path, body, headers, decoder)
        return self._first_post(path, body, headers, decoder)

    async def _first_post(
        self, path: str, body: dict[str, Any], headers: dict[str, str], decoder: Decoder
    ) -> AsyncIterator[StreamEvent]:
        """A post before any HTTP answer: a 404 from a base without ``/v1`` tries ``/v1``."""
        try:
            async for event in self._http.stream(self.name, path, body, headers, decoder):
                self._base_settled = True
                yield event
        except ProviderError as exc:
            if exc.status is None or self._base_settled:
                raise  # no answer yet (the server is down?): the next call looks again
            self._base_settled = True
            base = self._http.base_url
            if exc.status != 404 or base.rstrip("/").endswith("/v1"):
                raise
            async for event in self._try_v1(base, path, body, headers, decoder, first=exc):
                yield event
        self._base_settled = True

    async def _try_v1(
        self,
        base: str,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        decoder: Decoder,
        *,
        first: ProviderError,
    ) -> AsyncIterator[StreamEvent]:
        """``path`` under ``<base>/v1``, kept when it answers (any status but 404); else
        ``first``, the base's own 404, is the error."""
        self._http.base_url = base.rstrip("/") + "/v1"
        try:
            async for event in self._http.stream(self.name, path, body, headers, decoder):
                self._found_v1(base, path)
                yield event
        except ProviderError as exc:
            if exc.status is None or exc.status == 404:
                self._http.base_url = base
                raise first from None
            self._found_v1(base, path)
            raise

    def _found_v1(self, base: str, path: str) -> None:
        if self.base_url_note is not None:
            return
        shown, v1 = redact_url(base), redact_url(self._http.base_url)
        self.base_url_note = f"{shown} answered 404; {v1} answers: set base_url to it"
        logger.warning(
            "%s: %s answered 404 to %s; %s answers: using it (set base_url to it)",
            self.name,
            shown,
            path,
            v1,
        )

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        """The JSON body this request goes out as (extra fields merged in, as the SDK does)."""
        completions = request.prefill and self._config.prefill_style == "completions"
        kwargs = self._completion_kwargs(request) if completions else self._kwargs(request)
        return sent_body(kwargs)[0]

    def _completion_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        stop = list(request.stop)
        if self._config.end_of_turn:
            stop.append(self._config.end_of_turn)
        kwargs: dict[str, Any] = {
            "model": request.model,
            "prompt": transcript_text(request),
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if stop:
            kwargs["stop"] = stop
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        add_extras(kwargs, self._config, request)
        return kwargs

    def _build_kwargs(self, request: LLMRequest) -> dict[str, Any]:
        messages = to_openai_messages(request, self._converted)
        if self._config.reasoning_style == "deepseek":
            messages = _with_reasoning_field(messages)
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.tools:
            kwargs["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                }
                for t in request.tools
            ]
        kwargs.update(reasoning_fields(self._config.reasoning_style, request.thinking))
        continuing = request.prefill and _continues(request)
        defaults = self._config.continue_fields if continuing else None
        add_extras(kwargs, self._config, request, defaults=defaults)  # extra_body wins
        return kwargs

    async def aclose(self) -> None:
        await self._http.aclose()


def reasoning_fields(style: str, thinking: Thinking | None) -> dict[str, Any]:
    """The body fields that ask a server of ``style`` for ``thinking`` (None: off). Only
    the styles whose servers document a switch say "off" too; the rest send nothing then."""
    if style == "deepseek":  # thinking mode is on by default on DeepSeek's newer models
        fields: dict[str, Any] = {"thinking": {"type": "enabled" if thinking else "disabled"}}
        if thinking is not None and thinking.effort:
            fields["reasoning_effort"] = thinking.effort  # low and medium count as high
        return fields
    if style == "chat_template":  # Qwen3-style templates on vLLM, llama.cpp, SGLang
        return {"chat_template_kwargs": {"enable_thinking": thinking is not None}}
    if thinking is None:
        return {}
    if style == "openrouter":
        if thinking.effort:
            return {"reasoning": {"effort": thinking.effort}}
        if thinking.budget_tokens:
            return {"reasoning": {"max_tokens": thinking.budget_tokens}}
        return {"reasoning": {"enabled": True}}
    if style == "openai" and thinking.effort:
        return {"reasoning_effort": thinking.effort}
    return {}


def _continues(request: LLMRequest) -> bool:
    return bool(request.messages) and request.messages[-1].role == "assistant"


def to_openai_messages(
    request: LLMRequest,
    convert: Callable[[ChatMessage], list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """The request's messages in OpenAI's form; ``convert`` may remember turns' forms."""
    one = convert or _messages
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        # Reasoning comes first on its turn. Whether it goes back depends on the model,
        # so such a turn's form is not remembered.
        if message.parts and isinstance(message.parts[0], ThinkingPart):
            messages.extend(_messages(message, request.model))
        else:
            messages.extend(one(message))
    return messages


def _messages(message: ChatMessage, model: str = "") -> list[dict[str, Any]]:
    """One Salon turn as OpenAI messages: tool results become ``tool`` messages; the
    reasoning ``model`` wrote on this turn goes back with it (see the module)."""
    results = [p.result for p in message.parts if isinstance(p, ToolResultPart)]
    out: list[dict[str, Any]] = [
        {"role": "tool", "tool_call_id": r.call_id, "content": r.content} for r in results
    ]
    calls = [p.call for p in message.parts if isinstance(p, ToolUsePart)]
    content = _content([p for p in message.parts if isinstance(p, TextPart | ImagePart)])
    reasoning = _reasoning_back(message, model)
    if calls:
        out.append(
            {
                "role": "assistant",
                "content": content or "",  # strict servers (llama.cpp) reject null
                **reasoning,
                "tool_calls": [_tool_call(c) for c in calls],
            }
        )
    elif content or not results:
        out.append({"role": message.role, "content": content, **reasoning})
    return out


def _with_reasoning_field(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """DeepSeek's thinking mode refuses a tool-call turn without ``reasoning_content`` in
    every later request, and ignores it elsewhere. A tool call from an earlier activation
    comes back from the chat log without its reasoning: it gets an empty one. The
    remembered forms are shared, so a changed turn is a new dict."""
    return [
        {**m, "reasoning_content": ""}
        if m.get("tool_calls") and "reasoning_content" not in m
        else m
        for m in messages
    ]


def _reasoning_back(message: ChatMessage, model: str) -> dict[str, Any]:
    """The fields that give ``model`` back its own reasoning on this turn: OpenRouter's
    ``reasoning_details`` unchanged where they came, else the text as ``reasoning_content``.
    Another vendor's or model's thoughts never go."""
    thoughts = [
        p.thought
        for p in message.parts
        if isinstance(p, ThinkingPart) and p.thought.vendor == VENDOR and p.thought.model == model
    ]
    if not thoughts:
        return {}
    details = [d for t in thoughts if t.details for d in json.loads(t.details)]
    if details:
        return {"reasoning_details": details}
    return {"reasoning_content": "".join(t.text for t in thoughts)}


def _content(parts: list[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        else:
            data = base64.b64encode(part.data).decode("ascii")
            url = f"data:{part.media_type};base64,{data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return content


def _tool_call(call: ToolCall) -> dict[str, Any]:
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


@dataclass
class _ToolCallAssembler:
    """Streamed tool calls, accumulated by ``index`` as the OpenAI format defines: the id and
    name arrive once, the arguments in fragments to concatenate. Some servers resend the
    name: llama.cpp whole as it grows, some builds in every delta; a resent name replaces
    what it extends rather than being appended."""

    parts: dict[int, dict[str, str]] = field(default_factory=dict)

    def add(self, fragment: Any) -> None:
        slot = self.parts.setdefault(fragment.index, {"id": "", "name": "", "arguments": ""})
        if fragment.id:
            slot["id"] = fragment.id
        function = fragment.function
        if function is None:
            return
        name = function.name or ""
        if name.startswith(slot["name"]):
            slot["name"] = name or slot["name"]
        else:
            slot["name"] += name
        slot["arguments"] += function.arguments or ""

    def finish(self) -> list[ToolCall]:
        calls = [
            ToolCall(
                slot["id"] or f"call_{index}", slot["name"], parse_arguments(slot["arguments"])
            )
            for index, slot in sorted(self.parts.items())
        ]
        self.parts.clear()
        return calls


class _ChunkDecoder:
    """Chat completion chunks. Tool calls are complete only when the finish reason comes;
    a stream cut before it reports neither them nor a StopEvent. Reasoning streams as
    ThinkingDelta, whichever way the server sends it; when the finish reason comes it is
    also one ThoughtEvent, the form the tool loop gives back (see ``_reasoning_back``)."""

    def __init__(self, model: str = "", *, expect_thinking: bool = False) -> None:
        self.calls = _ToolCallAssembler()
        self.model = model
        self.inline = ThinkSplitter(expect_thinking=expect_thinking)
        self.reasoning = ""  # from reasoning_content / reasoning deltas
        self.details = _ReasoningDetails()

    def decode(self, chunk: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta is not None:
                events.extend(self._delta(delta))
            if choice.finish_reason:
                events.extend(self.inline.finish())
                thought = self._thought()
                if thought is not None:
                    events.append(ThoughtEvent(thought))
                events.extend(ToolCallEvent(call) for call in self.calls.finish())
                events.append(StopEvent(str(choice.finish_reason)))
        if chunk.usage is not None:
            events.append(UsageEvent(_usage(chunk.usage)))
        return events

    def _delta(self, delta: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        # DeepSeek, llama.cpp and older vLLM say reasoning_content; OpenRouter and newer
        # vLLM say reasoning. A server sends one of them, never the same text twice.
        thinking = getattr(delta, "reasoning_content", None) or getattr(delta, "reasoning", None)
        if isinstance(thinking, str) and thinking:
            self.reasoning += thinking
            self.inline.apart()  # the server parses reasoning out: the content is answer
            events.append(ThinkingDelta(thinking))
        self.details.add(getattr(delta, "reasoning_details", None))
        if delta.content:
            events.extend(self.inline.feed(delta.content))
        for fragment in delta.tool_calls or ():
            self.calls.add(fragment)
        return events

    def _thought(self) -> Thought | None:
        # Cleaned of lone surrogates as every event is: it goes back in a later request.
        text = clean_text(self.reasoning + self.inline.reasoning)
        details = clean_text(self.details.json())
        if not text and not details:
            return None
        return Thought(VENDOR, self.model, text=text, details=details)

    def finish(self) -> list[StreamEvent]:
        if self.calls.parts:
            logger.warning("stream ended before its finish reason; unfinished tool calls dropped")
        return []


class _ReasoningDetails:
    """OpenRouter's ``reasoning_details`` as they stream: each delta carries fragments of
    the blocks, by ``index``; text pieces (``text``, ``summary``, ``data``) join, the other
    fields (type, signature, format, id) are taken as they come."""

    _JOINED = ("text", "summary", "data")

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}

    def add(self, fragments: Any) -> None:
        if not isinstance(fragments, list):
            return
        for fragment in fragments:
            if not isinstance(fragment, dict):
                continue
            index = fragment.get("index")
            key = index if isinstance(index, int) else len(self.blocks)
            block = self.blocks.setdefault(key, {})
            for name, value in fragment.items():
                if name in self._JOINED and isinstance(value, str) and name in block:
                    block[name] = str(block[name] or "") + value
                elif value is not None or name not in block:
                    block[name] = value

    def json(self) -> str:
        if not self.blocks:
            return ""
        return json.dumps([self.blocks[k] for k in sorted(self.blocks)], ensure_ascii=False)


class _CompletionDecoder:
    """``/v1/completions`` chunks: text in ``choices[].text``."""

    def decode(self, chunk: Any) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for choice in chunk.choices or ():
            if choice.text:
                events.append(TextDelta(choice.text))
            if choice.finish_reason:
                events.append(StopEvent(str(choice.finish_reason)))
        if chunk.usage is not None:
            events.append(UsageEvent(_usage(chunk.usage)))
        return events

    def finish(self) -> list[StreamEvent]:
        return []


def _usage(usage: Any) -> Usage:
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    prompt = usage.prompt_tokens or 0
    # Reasoning is counted inside completion_tokens, as Salon's output_tokens count it.
    written = getattr(usage, "completion_tokens_details", None)
    reasoning = (getattr(written, "reasoning_tokens", None) or 0) if written is not None else 0
    # OpenAI counts cached tokens inside prompt_tokens; Salon's input_tokens are uncached.
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=usage.completion_tokens or 0,
        cache_read_tokens=cached,
        reasoning_tokens=reasoning,
    )
