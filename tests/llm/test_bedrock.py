"""Bedrock through the anthropic SDK's Bedrock client, against the loopback fake server
speaking AWS's event-stream framing; requests are SigV4-signed with test credentials."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.config import Secrets, load_config_dir, resolve_secrets
from salon.errors import ConfigError
from salon.llm import ChatMessage, LLMRequest, TextDelta, TextPart, UsageEvent
from salon.llm.factory import build_provider
from salon.model import Usage
from tests.conftest import WriteConfig, bot_config

CREDENTIALS = {"AWS_KEY": "AKIDTESTKEY", "AWS_SECRET": "test-secret-value"}


def bedrock(server: LLMServer) -> object:
    config = bot_config(
        provider="aws",
        providers={
            "aws": {
                "type": "bedrock",
                "cache_min_tokens": 0,  # a short request: its markers are tested
                "model": "anthropic.claude-test-v1:0",
                "base_url": server.base_url,
                "aws_region": "eu-west-3",
                "aws_access_key_env": "AWS_KEY",
                "aws_secret_key_env": "AWS_SECRET",
                "backoff_initial": 0,
            }
        },
    )
    return build_provider(config, Secrets(CREDENTIALS))


async def test_bedrock_streams_with_cache_markers_and_signed_requests(
    llm_server: LLMServer,
) -> None:
    llm_server.queue(Scripted(chunks=["Bon", "jour"], cache_read_tokens=40, cache_write_tokens=5))
    provider = bedrock(llm_server)
    request = LLMRequest(
        model="anthropic.claude-test-v1:0",
        messages=(ChatMessage("user", (TextPart("hello", cache_breakpoint=True),)),),
        system="be brief",
        cache_system=True,
    )
    events = [e async for e in provider.stream(request)]  # type: ignore[attr-defined]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Bonjour"
    usage = sum((e.usage for e in events if isinstance(e, UsageEvent)), Usage())
    assert (usage.cache_read_tokens, usage.cache_write_tokens) == (40, 5)
    (sent,) = llm_server.requests
    assert sent.path == "/model/anthropic.claude-test-v1:0/invoke-with-response-stream"
    assert sent.body["anthropic_version"]  # Bedrock takes the API version in the body
    assert "model" not in sent.body
    assert sent.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent.body["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    authorization = sent.headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDTESTKEY/")
    assert "/eu-west-3/bedrock/aws4_request" in authorization
    assert "test-secret-value" not in str(sent.headers)
    await provider.aclose()  # type: ignore[attr-defined]


async def test_bedrock_error_is_a_provider_error(llm_server: LLMServer) -> None:
    from salon.errors import ProviderError

    llm_server.queue(Scripted(status=400, error_message="model not enabled in this region"))
    provider = bedrock(llm_server)
    request = LLMRequest(model="m", messages=(ChatMessage.text("user", "hi"),))
    with pytest.raises(ProviderError) as caught:
        _ = [e async for e in provider.stream(request)]  # type: ignore[attr-defined]
    assert "model not enabled" in str(caught.value)
    await provider.aclose()  # type: ignore[attr-defined]


def test_bedrock_config_needs_region_and_credentials(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    root = write_config("providers:\n  aws: {type: bedrock, model: m}\nprovider: aws\n", muse="")
    with pytest.raises(ConfigError) as caught:
        load_config_dir(root)
    found = [str(p) for p in caught.value.problems]
    assert any("aws_region" in p for p in found)
    assert any("bedrock needs credentials" in p for p in found)
    root = write_config(
        "providers:\n  aws:\n    type: bedrock\n    model: m\n    aws_region: us-east-1\n"
        "    aws_access_key_env: AWS_KEY\n    aws_secret_key_env: AWS_SECRET\nprovider: aws\n",
        muse="",
    )
    configs = load_config_dir(root)
    with pytest.raises(ConfigError) as missing:
        resolve_secrets(configs.bots["muse"], {}, configs.locator("muse"))
    assert {p.key_path for p in missing.value.problems} == {
        "providers.aws.aws_access_key_env",
        "providers.aws.aws_secret_key_env",
    }
    secrets = resolve_secrets(configs.bots["muse"], CREDENTIALS, configs.locator("muse"))
    assert secrets.redactor()("key AKIDTESTKEY leaked") == "key *** leaked"
