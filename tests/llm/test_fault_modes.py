"""Each fault mode of the loopback LLM server, once, through the real openai SDK; and the
seeded random rate that spreads them over many requests."""

from __future__ import annotations

import asyncio

import pytest

from fakes.llm_server import FAULTS, LLMServer, Scripted
from salon.errors import ProviderError, RateLimited
from salon.llm import StreamEvent
from tests.llm._vendors import collect, provider_for, request, stops, text_of

GUARD = 15


async def read_until_error(server: LLMServer, **settings: object) -> tuple[list[StreamEvent], str]:
    """The events that arrived, and the error the stream then ended with."""
    provider = provider_for(server, "openai", retries=0, **settings)
    received: list[StreamEvent] = []
    try:
        async with asyncio.timeout(GUARD):
            async for event in provider.stream(request()):
                received.append(event)
    except ProviderError as exc:
        return received, str(exc)
    finally:
        await provider.aclose()
    raise AssertionError("the stream ended without an error")


async def test_http_500(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(fault="http_500"))
    provider = provider_for(llm_server, "openai", retries=0)
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    await provider.aclose()
    assert (caught.value.status, caught.value.retryable) == (500, True)
    assert llm_server.faults_applied == ["http_500"]


async def test_http_429_with_retry_after(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(fault="http_429"))
    provider = provider_for(llm_server, "openai", retries=0)
    with pytest.raises(RateLimited) as caught:
        await collect(provider)
    await provider.aclose()
    assert caught.value.retry_after == 1.0


async def test_hang_before_head(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(fault="hang_before_head"))
    received, error = await read_until_error(llm_server, first_token_timeout=0.2)
    assert (received, "no answer within 0.2 s" in error) == ([], True)


async def test_hang_mid_stream(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="hang_mid_stream"))
    received, error = await read_until_error(llm_server, first_token_timeout=0.2, timeout=0.4)
    assert text_of(received) == "Hel"
    assert "the answer was cut off" in error


async def test_truncate(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="truncate"))
    provider = provider_for(llm_server, "openai")
    events = await collect(provider)
    await provider.aclose()
    assert (text_of(events), stops(events)) == ("Hello", [])


async def test_malformed(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="malformed"))
    received, error = await read_until_error(llm_server)
    assert text_of(received) == "Hel"
    assert "malformed response stream" in error


async def test_reset(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="reset"))
    received, error = await read_until_error(llm_server)
    assert text_of(received) == "Hel"
    assert "broke during the answer" in error


async def outcomes(seed: int) -> tuple[list[str | None], list[str]]:
    """Twenty requests to a server failing half of them at random."""
    async with LLMServer(fault_rate=0.5, faults=("http_500", "truncate"), seed=seed) as server:
        provider = provider_for(server, "openai", retries=0)
        seen = []
        for _ in range(20):
            try:
                events = await collect(provider)
            except ProviderError:
                seen.append("error")
            else:
                seen.append("whole" if stops(events) else "cut")
        await provider.aclose()
    return server.faults_applied, seen


async def test_a_seeded_rate_spreads_the_same_faults_every_run() -> None:
    applied, seen = await outcomes(seed=7)
    assert (applied, seen) == await outcomes(seed=7)
    assert applied != (await outcomes(seed=8))[0]
    expected = {None: "whole", "http_500": "error", "truncate": "cut"}
    assert seen == [expected[fault] for fault in applied]
    assert {None, "http_500", "truncate"} <= set(applied)


def test_every_fault_is_documented() -> None:
    from fakes import llm_server

    assert llm_server.__doc__ is not None
    for fault in FAULTS:
        assert f"``{fault}``" in llm_server.__doc__
