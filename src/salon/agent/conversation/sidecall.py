"""Short calls beside the answer (the context evaluator, the speak gate, the planner's
plan): their own request, nothing shown, usage recorded and traced like any call."""

from __future__ import annotations

import logging

from salon.agent.conversation.stream import Streamed, read_stream, record_usage
from salon.agent.recording.recorder import Recorder
from salon.config import BotConfig
from salon.llm.base import ChatMessage, LLMRequest, Provider, TextPart
from salon.store.base import Store
from salon.trace import CallKind

__all__ = ["side_call", "side_config", "side_request"]

logger = logging.getLogger(__name__)


def side_config(config: BotConfig, provider: str | None, model: str | None) -> BotConfig:
    """The bot's config asking ``provider``/``model`` instead (the provider's model when only
    the provider is given)."""
    if provider is None and model is None:
        return config
    if provider is None or provider == config.provider:
        return config.model_copy(update={"model": model or config.model})
    return config.model_copy(update={"provider": provider, "model": model})


def side_request(config: BotConfig, system: str, text: str, max_tokens: int) -> LLMRequest:
    return LLMRequest(
        model=config.model_name(),
        messages=(ChatMessage("user", (TextPart(text),)),),
        system=system,
        max_tokens=max_tokens,
    )


async def side_call(
    provider: Provider,
    request: LLMRequest,
    recorder: Recorder,
    kind: CallKind,
    *,
    store: Store,
    bot: str,
) -> str:
    """The call's whole text, unshown; a provider's failure is raised after it is traced.
    Its usage is stored as its own row."""
    pending = recorder.call(kind, provider, request)
    streamed = Streamed()
    try:
        await read_stream(provider, pending, streamed)
    finally:
        await record_usage(store, bot, recorder.trace.channel, provider, request, streamed.usage)
    return streamed.text
