"""Claude 4.6 and later refuse an assistant prefill (a request ending with the assistant's
turn), on Anthropic's API and on Bedrock; earlier models continue it. The fake refuses as
the API does, so a prefill bot on such a model is found out by its tests."""

from __future__ import annotations

import pytest

from fakes.llm_server import LLMServer
from salon.errors import ProviderError
from salon.llm import ChatMessage, LLMRequest
from tests.llm._vendors import collect, provider_for, text_of


def continued(model: str) -> LLMRequest:
    return LLMRequest(
        model=model,
        messages=(
            ChatMessage.text("user", "<cmd>cat log.txt</cmd>"),
            ChatMessage.text("assistant", "Ada: hi\nSalon:"),
        ),
        prefill=True,
    )


@pytest.mark.parametrize("vendor", ["anthropic", "bedrock"])
@pytest.mark.parametrize(
    "model",
    [
        "claude-opus-4-6",
        "claude-sonnet-4-6-20260101",
        "us.anthropic.claude-opus-4-7-v1",
        "claude-sonnet-5-5",
    ],
)
async def test_claude_4_6_and_later_refuse_a_prefill(
    llm_server: LLMServer, vendor: str, model: str
) -> None:
    provider = provider_for(llm_server, vendor, model=model)
    with pytest.raises(ProviderError) as refused:
        await collect(provider, continued(model))
    assert refused.value.status == 400
    assert "does not support assistant message prefill" in str(refused.value)
    await provider.aclose()


@pytest.mark.parametrize("vendor", ["anthropic", "bedrock"])
@pytest.mark.parametrize("model", ["claude-opus-4-5", "claude-haiku-4-5"])
async def test_earlier_claude_models_continue_it(
    llm_server: LLMServer, vendor: str, model: str
) -> None:
    llm_server.queue("there")
    provider = provider_for(llm_server, vendor, model=model)
    assert text_of(await collect(provider, continued(model))) == "there"
    await provider.aclose()
