"""The wrappers (retry, deadline, lazy build) pass the provider's abilities on: the body
it sends, why its cache markers live as long as they do, and its warm-up."""

from __future__ import annotations

from typing import Any

from salon.llm import FakeProvider, LLMRequest, Provider, ProviderTraits
from salon.llm.base import ChatMessage
from salon.llm.deadline import DeadlineProvider
from salon.llm.factory import DeferredProvider
from salon.llm.retry import RetryingProvider

REQUEST = LLMRequest(model="m", messages=(ChatMessage.text("user", "hi"),))


class Marking(FakeProvider):
    """A provider with a body and cache lifetimes of its own, which counts its warm-ups."""

    def __init__(self) -> None:
        super().__init__()
        self.warmed = 0

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        return {"own": request.model}

    def cache_reason(self, request: LLMRequest) -> str | None:
        return "stable 1h"

    async def warm(self) -> None:
        self.warmed += 1


def wrapped(inner: Provider) -> Provider:
    deferred = DeferredProvider("marking", ProviderTraits(), "json", lambda: inner)
    timed = DeadlineProvider(deferred, first_token_timeout=5, timeout=5)
    return RetryingProvider(timed, retries=1, backoff_initial=0, backoff_max=0)


async def test_the_wrappers_pass_the_providers_abilities_on() -> None:
    inner = Marking()
    provider = wrapped(inner)
    assert provider.wire(REQUEST) == {"own": "m"}
    assert provider.cache_reason(REQUEST) == "stable 1h"
    await provider.warm()
    assert inner.warmed == 1


async def test_a_plain_provider_has_the_neutral_abilities() -> None:
    provider = wrapped(FakeProvider())
    assert provider.wire(REQUEST)["messages"] == [{"role": "user", "content": [{"text": "hi"}]}]
    assert provider.cache_reason(REQUEST) is None
    await provider.warm()  # nothing to load
