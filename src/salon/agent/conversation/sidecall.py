"""Short calls the pipeline makes beside the answer (context evaluator, speak gate): their
own prompt and model, nothing shown, usage recorded and traced like any call."""

from __future__ import annotations

import logging

from salon.agent.recording.recorder import Recorder
from salon.config import BotConfig
from salon.errors import ProviderError
from salon.llm.base import ChatMessage, LLMRequest, Provider, TextDelta, TextPart, UsageEvent
from salon.model import Usage
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
    """The call's whole text; a provider's failure is raised after it is traced."""
    pending = recorder.call(kind, provider, request)
    text = ""
    try:
        async for event in provider.stream(request):
            pending.first_event()
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, UsageEvent):
                pending.usage += event.usage
        pending.ended()
    except ProviderError as exc:
        pending.ended(str(exc))
        raise
    finally:
        if pending.total_ms is None:
            pending.ended("interrupted")
        await _record_usage(store, bot, recorder.trace.channel, provider, request, pending.usage)
    return text


async def _record_usage(  # noqa: PLR0917 - one row's columns
    store: Store,
    bot: str,
    channel: str,
    provider: Provider,
    request: LLMRequest,
    usage: Usage,
) -> None:
    if usage == Usage():
        return
    try:
        await store.record_usage(bot, channel, provider.name, request.model, usage)
    except Exception:  # losing one usage row must not stop the answer
        logger.exception("could not record the usage of a side call")
