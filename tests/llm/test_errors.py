"""What a failed LLM call says, and which failures are worth another try: every vendor
type through its real SDK against the loopback fake server."""

from __future__ import annotations

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.errors import ProviderError
from salon.llm import StreamEvent
from salon.llm._errors import redact_url
from tests.llm._vendors import VENDORS, collect, provider_for, request, text_of


@pytest.mark.parametrize("vendor", VENDORS)
async def test_a_reset_mid_stream_says_the_connection_broke_during_the_answer(
    llm_server: LLMServer, vendor: str
) -> None:
    llm_server.queue(Scripted(chunks=["Hel", "lo"], fault="reset"))
    provider = provider_for(llm_server, vendor, retries=2)
    received: list[StreamEvent] = []

    async def read() -> None:
        async for event in provider.stream(request()):
            received.append(event)

    with pytest.raises(ProviderError) as caught:
        await read()
    await provider.aclose()
    message = str(caught.value)
    assert "broke during the answer" in message
    assert "cannot reach" not in message
    assert f"127.0.0.1:{llm_server.port}" in message
    assert text_of(received) == "Hel"
    assert len(llm_server.requests) == 1  # text was shown: a retry would repeat it


@pytest.mark.parametrize("vendor", ["openai", "anthropic", "google"])
async def test_an_unreachable_server_is_named_without_its_credentials(vendor: str) -> None:
    server = LLMServer()
    await server.start()
    await server.stop()  # the port is now closed
    url = f"http://bob:hunter2@127.0.0.1:{server.port}"
    provider = provider_for(server, vendor, base_url=url, retries=0)
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    await provider.aclose()
    message = str(caught.value)
    assert f"cannot reach the server at http://***@127.0.0.1:{server.port}/" in message
    assert "hunter2" not in message
    assert "bob" not in message


def test_urls_lose_userinfo_and_key_parameters() -> None:
    assert redact_url("https://u:p@host:8443/v1/x?alt=sse&key=AIza123&api_key=k2") == (
        "https://***@host:8443/v1/x?alt=sse&key=***&api_key=***"
    )
    assert redact_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"


VALIDATION_ERRORS = [
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
    "the request exceeds the available context size, try increasing it",
    "Invalid 'content' type (ref: https://github.com/ggml-org/llama.cpp/issues/8367)",
    "1 validation error for ChatCompletionRequest\nmessages.0.content\n  Field required",
    "Invalid schema for function 'get_time': None is not of type 'object'",
]


@pytest.mark.parametrize("vendor", ["openai", "anthropic", "google"])
@pytest.mark.parametrize("reason", VALIDATION_ERRORS)
async def test_a_validation_error_in_a_500_is_not_retried(
    llm_server: LLMServer, vendor: str, reason: str
) -> None:
    llm_server.queue(Scripted(status=500, error_message=reason), "never asked")
    provider = provider_for(llm_server, vendor, retries=2)
    with pytest.raises(ProviderError) as caught:
        await collect(provider)
    await provider.aclose()
    assert caught.value.status == 500
    assert not caught.value.retryable
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("vendor", ["openai", "anthropic", "google"])
@pytest.mark.parametrize("status", [408, 409, 500, 503])
async def test_transient_statuses_are_retried(
    llm_server: LLMServer, vendor: str, status: int
) -> None:
    llm_server.queue(Scripted(status=status, error_message="try again later"), "after retry")
    provider = provider_for(llm_server, vendor, retries=1)
    assert text_of(await collect(provider)) == "after retry"
    await provider.aclose()


@pytest.mark.parametrize("vendor", ["openai", "anthropic", "google"])
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_other_client_errors_are_not_retried(
    llm_server: LLMServer, vendor: str, status: int
) -> None:
    llm_server.queue(Scripted(status=status, error_message="no"), "never asked")
    provider = provider_for(llm_server, vendor, retries=2)
    with pytest.raises(ProviderError):
        await collect(provider)
    await provider.aclose()
    assert len(llm_server.requests) == 1
