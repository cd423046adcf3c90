"""Connect, first-token and total timeouts, for every provider type, against servers on
loopback that never connect, never answer, or stop answering halfway."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Iterator

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.config import ProviderConfig
from salon.errors import ProviderError
from salon.llm import StreamEvent
from tests.llm._vendors import VENDORS, collect, provider_for, request, text_of

GUARD = 15  # seconds: far beyond what the settings below allow, far below the old 120 s


def test_defaults() -> None:
    config = ProviderConfig(type="openai")
    assert (config.connect_timeout, config.first_token_timeout, config.timeout) == (10, 60, 300)


def retry_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "salon.llm.retry"]


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_hung_server_fails_clearly_after_each_first_token_timeout(
    llm_server: LLMServer, vendor: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.default = Scripted(text="never", fault="hang_before_head")
    provider = provider_for(llm_server, vendor, first_token_timeout=0.2, retries=2)
    with caplog.at_level(logging.WARNING), pytest.raises(ProviderError) as caught:
        async with asyncio.timeout(GUARD):
            await collect(provider)
    await provider.aclose()
    assert "no answer within 0.2 s" in str(caught.value)
    assert len(llm_server.requests) == 3
    assert len(retry_lines(caplog)) == 2


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_first_token_timeout_is_retried(
    llm_server: LLMServer, vendor: str, caplog: pytest.LogCaptureFixture
) -> None:
    llm_server.queue(Scripted(fault="hang_before_head"), "at last")
    provider = provider_for(llm_server, vendor, first_token_timeout=0.2, retries=1)
    with caplog.at_level(logging.WARNING):
        async with asyncio.timeout(GUARD):
            assert text_of(await collect(provider)) == "at last"
    await provider.aclose()
    (line,) = retry_lines(caplog)
    assert "retry 1/1" in line


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_stall_after_output_ends_with_a_cut_off_answer(
    llm_server: LLMServer, vendor: str
) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="hang_mid_stream"))
    provider = provider_for(llm_server, vendor, first_token_timeout=0.3, timeout=0.6, retries=2)
    received: list[StreamEvent] = []

    async def read() -> None:
        async for event in provider.stream(request()):
            received.append(event)

    with pytest.raises(ProviderError) as caught:
        async with asyncio.timeout(GUARD):
            await read()
    await provider.aclose()
    assert "the answer was cut off" in str(caught.value)
    assert "0.6 s" in str(caught.value)
    assert text_of(received) == "Hel"
    assert len(llm_server.requests) == 1


@pytest.fixture
def full_backlog() -> Iterator[int]:
    """A port whose accept queue is full: new connections get no SYN-ACK, as from a
    server that has gone away behind a firewall that drops packets."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(4):
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for filler in fillers:
        filler.close()
    listener.close()


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_connection_that_never_opens_fails_after_connect_timeout(
    full_backlog: int, vendor: str
) -> None:
    server = LLMServer()  # only lends its URL shape; nothing listens there but the backlog
    server.port = full_backlog
    provider = provider_for(server, vendor, connect_timeout=0.3, first_token_timeout=10, retries=0)
    with pytest.raises(ProviderError) as caught:
        async with asyncio.timeout(GUARD):
            await collect(provider)
    await provider.aclose()
    assert f"cannot reach the server at http://127.0.0.1:{full_backlog}/" in str(caught.value)
