"""A base URL without ``/v1`` on an OpenAI-compatible server (Terrarium's
``AGENT_API_URL=http://localhost:8080``): when the base 404s on the first answer, the
provider tries ``<base>/v1``, keeps it when it answers, and says so once."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest

from fakes.llm_server import LLMServer
from salon.config import BotConfig, Secrets
from salon.errors import ProviderError
from salon.llm import ChatMessage, LLMRequest, Provider, TextDelta
from salon.llm.factory import build_provider
from salon.llm.probe import probe
from tests.conftest import bot_config


def _bot(base_url: str) -> BotConfig:
    return bot_config(
        providers={"agent": {"type": "openai", "model": "m1", "base_url": base_url, "retries": 0}},
        provider="agent",
    )


def _provider(base_url: str) -> Provider:
    return build_provider(_bot(base_url), Secrets({}))


async def _answer(provider: Provider) -> str:
    request = LLMRequest(model="m1", messages=(ChatMessage.text("user", "hi"),))
    return "".join([e.text async for e in provider.stream(request) if isinstance(e, TextDelta)])


@pytest.fixture
async def v1_only() -> AsyncIterator[LLMServer]:
    async with LLMServer(only_under="/v1") as server:  # as vLLM: the API under /v1 alone
        yield server


async def test_a_base_without_v1_moves_to_v1_once_and_says_so(
    v1_only: LLMServer, caplog: pytest.LogCaptureFixture
) -> None:
    v1_only.queue("one", "two")
    provider = _provider(v1_only.base_url)
    with caplog.at_level(logging.INFO, logger="salon.llm"):
        assert await _answer(provider) == "one"
        assert await _answer(provider) == "two"
    await provider.aclose()
    paths = [r.path for r in v1_only.requests]
    assert paths == ["/chat/completions", "/v1/chat/completions", "/v1/chat/completions"]
    said = [r.getMessage() for r in caplog.records if "/v1" in r.getMessage()]
    assert said == [
        f"agent: {v1_only.base_url} answered 404 to /chat/completions; "
        f"{v1_only.base_url}/v1 answers: using it (set base_url to it)"
    ]


async def test_a_base_that_answers_is_kept(llm_server: LLMServer) -> None:
    llm_server.queue("one")
    provider = _provider(llm_server.base_url + "/v1")
    assert await _answer(provider) == "one"
    await provider.aclose()
    assert [r.path for r in llm_server.requests] == ["/v1/chat/completions"]


async def test_a_404_under_v1_too_is_the_first_error(v1_only: LLMServer) -> None:
    provider = _provider(v1_only.base_url + "/api")  # neither /api nor /api/v1 is served
    with pytest.raises(ProviderError) as caught:
        await _answer(provider)
    await provider.aclose()
    assert "HTTP 404" in str(caught.value)
    assert [r.path for r in v1_only.requests] == [
        "/api/chat/completions",
        "/api/v1/chat/completions",
    ]


async def test_the_live_check_says_what_it_found_and_which_url_answers(
    v1_only: LLMServer,
) -> None:
    v1_only.queue("ok")
    result = await probe(_bot(v1_only.base_url), "agent", Secrets({}))
    assert result is not None
    assert result.ok
    line = result.describe()
    assert line.startswith("live: provider agent (model m1): ")
    assert line.endswith(
        f"'ok' ({v1_only.base_url} answered 404; {v1_only.base_url}/v1 answers: set base_url to it)"
    )
