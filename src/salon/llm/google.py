"""Google's Gemini API through the official ``google-genai`` SDK.

Salon's assistant turns are Gemini's ``model`` turns; a request that ends with one (prefill
mode) asks the model to continue it. Tool calls are native function calls; a tool's result
goes back as a ``function_response`` part named after the call it answers.
"""

from __future__ import annotations

import base64
import itertools
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from google import genai
from google.genai import errors, types

from salon.config import ProviderConfig
from salon.errors import ProviderError
from salon.llm._errors import MALFORMED_STREAM_ERRORS, connection_failure, status_error
from salon.llm._sdk import BACKSTOP, close_stream, request_extras
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
)
from salon.model import Thought, ToolCall, Usage, clean_text

__all__ = ["GoogleProvider", "to_google_contents"]

_OPENING_TURN = "(the conversation so far)"
_BLOCKING_FINISH = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"}
VENDOR = "google"  # ``Thought.vendor`` of what Gemini returns
# Gemini 1.x and 2.x take a thinking budget in tokens only; Gemini 3 brought the thinking
# level (and keeps the budget for compatibility). Names we do not know are taken as newer.
_BUDGET_ONLY = re.compile(r"(?:^|/)gemini-[12](?:[.-]|$)")
# An effort on a budget-only model becomes the budget Google's own OpenAI-compatible layer
# maps ``reasoning_effort`` to (ai.google.dev/gemini-api/docs/openai): 1K, 8K, 24K tokens.
_EFFORT_BUDGET = {"low": 1024, "medium": 8192, "high": 24576}


class GoogleProvider(BaseProvider):
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
        self._config = config
        options = types.HttpOptions(
            base_url=base_url,
            timeout=int((config.timeout + BACKSTOP) * 1000),  # milliseconds, for every phase
            headers=dict(config.headers) or None,
            # A transport of its own makes the SDK use httpx2, as the other SDKs do, rather
            # than aiohttp (whose session it subclasses, which aiohttp deprecates).
            async_client_args={"transport": _ConnectTimeout(config.connect_timeout)},
        )
        self._client = genai.Client(api_key=api_key or "unset", http_options=options)
        self._ids = itertools.count(1)

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        # Any: the SDK's own union of content types changes with whether Pillow is
        # installed (matrix-synapse, a dev dependency, brings it), and a list of dicts
        # matches only one of them.
        contents: Any = to_google_contents(request.messages, request.model)
        try:
            stream = await self._client.aio.models.generate_content_stream(
                model=request.model,
                contents=contents,
                config=self._generation_config(request),
            )
        except errors.APIError as exc:
            raise self._translate(exc) from exc
        except httpx2.TransportError as exc:
            raise connection_failure(exc, self.name, answering=False) from exc
        decoder = _Decoder(self.name, self._ids, request.model)
        answering = False  # the SDK sends the request only when the stream is first read
        try:
            async for chunk in stream:
                answering = True
                for event in decoder.decode(chunk):
                    yield event
        except errors.APIError as exc:
            raise self._translate(exc) from exc
        except httpx2.TransportError as exc:
            raise connection_failure(exc, self.name, answering=answering) from exc
        except MALFORMED_STREAM_ERRORS as exc:
            message = f"{self.name}: malformed response stream: {exc}"
            raise ProviderError(message, provider=self.name, retryable=False) from exc
        finally:
            await close_stream(stream)  # also when the caller stops early or a deadline cancels
        for event in decoder.finish():
            yield event

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        """What this request goes out as: the contents and the generation config."""
        config = self._generation_config(request).model_dump(mode="json", exclude_none=True)
        config.pop("http_options", None)
        return {
            "model": request.model,
            "contents": to_google_contents(request.messages, request.model),
            "config": config,
        }

    def _generation_config(self, request: LLMRequest) -> types.GenerateContentConfig:
        settings: dict[str, Any] = {
            "max_output_tokens": request.max_tokens,
            "automatic_function_calling": types.AutomaticFunctionCallingConfig(disable=True),
        }
        if request.system:
            settings["system_instruction"] = request.system
        if request.temperature is not None:
            settings["temperature"] = request.temperature
        if request.stop:
            settings["stop_sequences"] = list(request.stop)[:5]  # the API takes at most 5
        if request.thinking is not None:
            settings["thinking_config"] = _thinking_config(request.model, request.thinking)
        if request.tools:
            declarations = [
                types.FunctionDeclaration(
                    name=t.name, description=t.description, parameters_json_schema=t.input_schema
                )
                for t in request.tools
            ]
            settings["tools"] = [types.Tool(function_declarations=declarations)]
        extra, headers = request_extras(self._config, request)
        if extra or headers:
            settings["http_options"] = types.HttpOptions(
                extra_body=extra or None, headers=headers or None
            )
        return types.GenerateContentConfig(**settings)

    def _translate(self, exc: errors.APIError) -> ProviderError:
        message = str(exc.message or exc.status or exc)
        if not exc.code:
            return ProviderError(clean_text(f"{self.name}: {message}"), provider=self.name)
        return status_error(self.name, int(exc.code), message)

    async def aclose(self) -> None:
        await self._client.aio.aclose()


class _ConnectTimeout(httpx2.AsyncHTTPTransport):
    """google-genai gives httpx one timeout for every phase: this puts ``connect_timeout``
    on the connect."""

    def __init__(self, connect_timeout: float) -> None:
        super().__init__()
        self._connect = connect_timeout

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        timeouts = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {**timeouts, "connect": self._connect}
        return await super().handle_async_request(request)


class _Decoder:
    def __init__(self, provider: str, ids: itertools.count[int], model: str) -> None:
        self.provider = provider
        self.ids = ids
        self.model = model
        self.usage = Usage()
        self.produced = False
        self.finish_reason: str | None = None

    def decode(self, chunk: types.GenerateContentResponse) -> list[StreamEvent]:
        feedback = chunk.prompt_feedback
        if feedback is not None and feedback.block_reason:
            reason = _name(feedback.block_reason)
            detail = f" ({feedback.block_reason_message})" if feedback.block_reason_message else ""
            raise ProviderError(
                f"{self.provider}: the prompt was blocked: {reason}{detail}",
                provider=self.provider,
                retryable=False,
            )
        if chunk.usage_metadata is not None:  # cumulative: the last one counts
            self.usage = _usage(chunk.usage_metadata)
        events: list[StreamEvent] = []
        for candidate in (chunk.candidates or [])[:1]:
            if candidate.finish_reason:
                self.finish_reason = _name(candidate.finish_reason)
            parts = candidate.content.parts if candidate.content else None
            for part in parts or []:
                events.extend(self._part(part))
        return events

    def _part(self, part: types.Part) -> list[StreamEvent]:
        """A part's events. A thought summary is reasoning, never answer text; a thought
        signature, on whatever part it came, is kept for the part it must go back on."""
        events: list[StreamEvent] = []
        call_id = ""
        if part.thought:
            if part.text:
                events.append(ThinkingDelta(part.text))
        elif part.function_call is not None:
            self.produced = True
            call = part.function_call
            call_id = call.id or f"g{next(self.ids)}"
            events.append(ToolCallEvent(ToolCall(call_id, call.name or "", dict(call.args or {}))))
        elif part.text:
            self.produced = True
            events.append(TextDelta(part.text))
        if part.thought_signature:
            signature = base64.b64encode(part.thought_signature).decode("ascii")
            thought = Thought(VENDOR, self.model, signature=signature, call_id=call_id)
            events.insert(0, ThoughtEvent(thought))  # before its call: the turn's order
        return events

    def finish(self) -> list[StreamEvent]:
        reason = self.finish_reason or ""
        if not self.produced:
            if reason in _BLOCKING_FINISH:
                message = f"{self.provider}: the answer was blocked: {reason}"
            elif reason:
                message = f"{self.provider}: the model returned nothing (finish reason {reason})"
            else:
                message = f"{self.provider}: the model returned no candidates"
            raise ProviderError(message, provider=self.provider, retryable=False)
        # A StopEvent only when Gemini sent a finish reason: without one the stream was cut.
        events: list[StreamEvent] = [UsageEvent(self.usage)]
        if reason:
            events.append(StopEvent(reason.lower()))
        return events


def _name(value: Any) -> str:
    return str(getattr(value, "name", None) or value)


def _usage(meta: types.GenerateContentResponseUsageMetadata) -> Usage:
    prompt = meta.prompt_token_count or 0
    cached = meta.cached_content_token_count or 0
    # Gemini counts thoughts beside the candidates (``thoughtsTokenCount``), and its pricing
    # page prices output "including thinking tokens": Salon's output includes them.
    thoughts = meta.thoughts_token_count or 0
    output = (meta.candidates_token_count or 0) + thoughts
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=output,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
    )


def _thinking_config(model: str, thinking: Thinking) -> types.ThinkingConfig:
    """``thinkingConfig`` as the API documents it: thought summaries on (kept for the trace,
    never shown as the answer), and one of a level or a budget, never both (a 400)."""
    config = types.ThinkingConfig(include_thoughts=True)
    if _BUDGET_ONLY.search(model):
        budget = thinking.budget_tokens
        if budget is None and thinking.effort is not None:
            budget = _EFFORT_BUDGET[thinking.effort]
        config.thinking_budget = budget
    elif thinking.effort is not None:  # the level is what Gemini 3 recommends over a budget
        config.thinking_level = types.ThinkingLevel(thinking.effort.upper())
    else:
        config.thinking_budget = thinking.budget_tokens
    return config


def to_google_contents(messages: tuple[ChatMessage, ...], model: str) -> list[dict[str, Any]]:
    """Salon's turns as Gemini ``contents`` (plain dicts, which the SDK accepts).

    Thought signatures Gemini returned for ``model`` go back on the part they came on (the
    API validates the function calls of the current turn); anything else's reasoning stays
    out, and reasoning text never goes back at all."""
    names: dict[str, str] = {}  # call id -> tool name, for the function responses
    contents: list[dict[str, Any]] = []
    for message in messages:
        parts = _parts(message, names)
        if message.role == "assistant":
            thoughts = [p.thought for p in message.parts if isinstance(p, ThinkingPart)]
            _sign(parts, [t for t in thoughts if _ours(t, model)])
        if parts:
            role = "model" if message.role == "assistant" else "user"
            contents.append({"role": role, "parts": parts})
    if contents and contents[0]["role"] == "model":  # a room may open with the bot talking
        contents.insert(0, {"role": "user", "parts": [{"text": _OPENING_TURN}]})
    return contents


def _parts(message: ChatMessage, names: dict[str, str]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                parts.append({"text": part.text})
        elif isinstance(part, ImagePart):
            parts.append({"inline_data": {"mime_type": part.media_type, "data": part.data}})
        elif isinstance(part, ToolUsePart):
            call = part.call
            names[call.id] = call.name
            function_call = {"id": call.id, "name": call.name, "args": call.arguments}
            parts.append({"function_call": function_call})
        elif isinstance(part, ToolResultPart):
            result = part.result
            key = "error" if result.is_error else "output"
            response = {
                "id": result.call_id,
                "name": names.get(result.call_id, "tool"),
                "response": {key: result.content},
            }
            parts.append({"function_response": response})
    return parts


def _ours(thought: Thought, model: str) -> bool:
    """A Gemini signature this model can read: another vendor's or model's is dropped."""
    return thought.vendor == VENDOR and thought.model == model and bool(thought.signature)


def _sign(parts: list[dict[str, Any]], thoughts: list[Thought]) -> None:
    """Put each signature back where Gemini returned it: on its function call, or (call id
    "") on the turn's text; one with no text left to ride on keeps a part of its own, as it
    streamed. The SDK takes the base64 text for its bytes field."""
    calls = {p["function_call"]["id"]: p for p in parts if "function_call" in p}
    texts = [p for p in parts if "text" in p]
    for thought in thoughts:
        if thought.call_id:
            target = calls.get(thought.call_id)
            if target is not None and "thought_signature" not in target:
                target["thought_signature"] = thought.signature
        elif texts and "thought_signature" not in texts[0]:
            texts[0]["thought_signature"] = thought.signature
        else:
            parts.append({"text": "", "thought_signature": thought.signature})
