"""An OpenAI-type provider's own HTTP path (aiohttp): proxies from the environment, as the
SDK's HTTP client honoured them, read once rather than on every request."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from fakes.llm_server import LLMServer
from fakes.tcp_proxy import TcpProxy
from tests.llm.test_providers import collect, provider_for, request, text_of

PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY")
NO_PROXY_VARIABLES = ("NO_PROXY", "no_proxy")


class CountingExecutor(ThreadPoolExecutor):
    """The loop's default executor, counting what is handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        self.submitted += 1
        return super().submit(fn, *args, **kwargs)


@pytest.fixture
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*PROXY_VARIABLES, *NO_PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


async def test_requests_go_through_the_proxy_the_environment_names(
    llm_server: LLMServer, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    host, port = llm_server.base_url.removeprefix("http://").split(":")
    async with TcpProxy(host, int(port)) as proxy:
        no_proxy_settings.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        provider = provider_for(llm_server, "openai")
        assert text_of(await collect(provider))
        assert text_of(await collect(provider))
    # A proxy is sent the absolute URL; a server reached directly, the path alone.
    assert [r.path for r in llm_server.requests] == [
        llm_server.base_url + "/v1/chat/completions"
    ] * 2


async def test_no_proxy_naming_the_host_bypasses_the_proxy(
    llm_server: LLMServer, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    no_proxy_settings.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    no_proxy_settings.setenv("NO_PROXY", "127.0.0.1")
    assert text_of(await collect(provider_for(llm_server, "openai")))
    assert llm_server.requests[0].path == "/v1/chat/completions"


async def test_a_request_hands_no_work_to_threads_after_the_first(
    llm_server: LLMServer, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    # aiohttp reading the environment (and ~/.netrc) on every request took two trips to
    # the default executor per answer: the settings are read once, with the first.
    executor = CountingExecutor()
    asyncio.get_running_loop().set_default_executor(executor)
    provider = provider_for(llm_server, "openai")
    await collect(provider)
    first = executor.submitted
    for _ in range(3):
        assert text_of(await collect(provider))
    assert executor.submitted == first


async def test_a_body_with_any_text_reaches_the_server_even_a_lone_surrogate(
    llm_server: LLMServer, no_proxy_settings: pytest.MonkeyPatch
) -> None:
    provider = provider_for(llm_server, "openai")
    said = [event async for event in provider.stream(request("café, naïve"))]
    assert text_of(said)
    assert llm_server.requests[0].body["messages"][-1]["content"] == "café, naïve"
    # A text with a lone surrogate (a broken paste) is no reason to lose the answer.
    said = [event async for event in provider.stream(request("half \ud83d of it"))]
    assert text_of(said)
    assert llm_server.requests[1].body["messages"][-1]["content"] == "half \ud83d of it"
