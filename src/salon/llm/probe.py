"""``salon check --live``: one tiny request through each configured provider."""

from __future__ import annotations

import time
from dataclasses import dataclass

from salon.config import BotConfig, Secrets
from salon.errors import SalonError
from salon.llm.base import ChatMessage, LLMRequest, TextDelta
from salon.llm.factory import guarded, vendor_provider

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
    note: str | None = None  # what the call found of the base URL (a missing /v1)

    def describe(self) -> str:
        where = f"provider {self.provider} (model {self.model})"
        note = f" ({self.note})" if self.note else ""
        if self.ok:
            return f"live: {where}: {self.milliseconds:.0f} ms: {self.reply.strip()!r}{note}"
        return f"live: {where}: FAILED: {self.error}{note}"


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
    vendor = vendor_provider(config, secrets)
    provider = guarded(vendor, config.provider_config())
    request = LLMRequest(model=model, messages=(ChatMessage.text("user", PROMPT),), max_tokens=16)
    started = time.perf_counter()
    reply = ""
    try:
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                reply += event.text
    except Exception as exc:  # a diagnosis: whatever went wrong is the answer
        reason = str(exc) if isinstance(exc, SalonError) else f"{type(exc).__name__}: {exc}"
        error = secrets.redactor()(reason)
        return ProbeResult(provider_name, model, False, error=error, note=_note(vendor))
    finally:
        await provider.aclose()
    elapsed = (time.perf_counter() - started) * 1000
    return ProbeResult(provider_name, model, True, elapsed, reply[:200], note=_note(vendor))


def _note(vendor: object) -> str | None:
    """The vendor provider's word on its base URL (only the OpenAI-compatible one has one;
    importing its class to ask would load the openai SDK for every vendor)."""
    note: str | None = getattr(vendor, "base_url_note", None)
    return note
