"""A deferred provider (a bot's, in ``BotApp``) builds its vendor client at the first
request or when warmed after ready, and answers the same as one built at once."""

from __future__ import annotations

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.config import Secrets
from salon.llm import ChatMessage, LLMRequest, Provider, TextDelta
from salon.llm.factory import DeferredProvider, build_provider
from tests.conftest import bot_config


def _deferred(server: LLMServer, vendor: str) -> tuple[Provider, DeferredProvider]:
    base_url = server.base_url + ("/v1" if vendor == "openai" else "")
    config = bot_config(
        providers={
            "test": {"type": vendor, "model": "m1", "base_url": base_url, "api_key_env": "K"}
        }
    )
    provider = build_provider(config, Secrets({"K": "sk-test-key"}), deferred=True)
    inner = provider.inner.inner  # type: ignore[attr-defined]
    assert isinstance(inner, DeferredProvider)
    return provider, inner


def _request() -> LLMRequest:
    return LLMRequest(model="m1", messages=(ChatMessage.text("user", "hi"),), system="brief")


@pytest.mark.parametrize("vendor", ["openai", "anthropic"])
async def test_the_first_request_builds_the_vendor_client(vendor: str) -> None:
    async with LLMServer() as server:
        server.default = Scripted(text="hello")
        provider, deferred = _deferred(server, vendor)
        assert deferred._inner is None
        assert provider.traits.cache_markers == (vendor == "anthropic")
        events = [e async for e in provider.stream(_request())]
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello"
        assert deferred._inner is not None
        await provider.aclose()


async def test_warming_builds_it_and_closing_an_unbuilt_one_builds_nothing() -> None:
    async with LLMServer() as server:
        provider, deferred = _deferred(server, "openai")
        await deferred.aclose()
        assert deferred._inner is None
        await provider.warm()
        assert deferred._inner is not None
        assert provider.wire(_request())["model"] == "m1"
        await provider.aclose()
