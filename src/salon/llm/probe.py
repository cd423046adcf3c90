"""``salon check --live``: one tiny request through each configured provider."""

from __future__ import annotations

import time
from dataclasses import dataclass

from salon.config import BotConfig, Secrets
from salon.errors import SalonError
from salon.llm.base import ChatMessage, LLMRequest, TextDelta
from salon.llm.factory import build_provider

__all__ = ["ProbeResult", "probe"]

PROMPT = "Reply with the single word: ok"


@dataclass(frozen=True, slots=True)
class ProbeResult:
    provider: str
    model: str
    ok: bool
    milliseconds: float = 0.0
    reply: str = ""
    error: str = ""

    def describe(self) -> str:
        where = f"provider {self.provider} (model {self.model})"
        if self.ok:
            return f"live: {where}: {self.milliseconds:.0f} ms: {self.reply.strip()!r}"
        return f"live: {where}: FAILED: {self.error}"


async def probe(bot: BotConfig, provider_name: str, secrets: Secrets) -> ProbeResult | None:
    """Ask ``provider_name`` (as ``bot`` configures it) for one word, without retries.
    None when there is no model to ask it with."""
    settings = bot.providers[provider_name]
    model = bot.model_name() if provider_name == bot.provider else settings.model
    if not model:
        return None
    once = settings.model_copy(update={"retries": 0})
    config = bot.model_copy(
        update={
            "provider": provider_name,
            "model": model,
            "providers": {**bot.providers, provider_name: once},
        }
    )
    provider = build_provider(config, secrets)
    request = LLMRequest(model=model, messages=(ChatMessage.text("user", PROMPT),), max_tokens=16)
    started = time.perf_counter()
    reply = ""
    try:
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                reply += event.text
    except Exception as exc:  # a diagnosis: whatever went wrong is the answer
        reason = str(exc) if isinstance(exc, SalonError) else f"{type(exc).__name__}: {exc}"
        return ProbeResult(provider_name, model, False, error=secrets.redactor()(reason))
    finally:
        await provider.aclose()
    elapsed = (time.perf_counter() - started) * 1000
    return ProbeResult(provider_name, model, True, elapsed, reply[:200])
