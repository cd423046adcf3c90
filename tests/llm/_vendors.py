"""Providers of every vendor type, built by the factory against the loopback fake server."""

from __future__ import annotations

from typing import Any

from fakes.llm_server import LLMServer
from salon.config import Secrets
from salon.llm import ChatMessage, LLMRequest, Provider, StopEvent, StreamEvent, TextDelta
from salon.llm.factory import build_provider
from tests.conftest import bot_config

VENDORS = ["openai", "anthropic", "google", "bedrock"]
MODEL = "m1"
SECRETS = {"TEST_KEY": "sk-test-key", "AWS_KEY": "AKIDTESTKEY", "AWS_SECRET": "aws-secret"}


def settings_for(server: LLMServer, vendor: str, base_url: str | None = None) -> dict[str, Any]:
    url = base_url or server.base_url
    settings: dict[str, Any] = {
        "type": vendor,
        "model": MODEL,
        "api_key_env": "TEST_KEY",
        "cache_min_tokens": 0,  # short requests: their markers are what is tested
        "backoff_initial": 0,
        "base_url": url + "/v1" if vendor == "openai" and base_url is None else url,
    }
    if vendor == "bedrock":
        del settings["api_key_env"]
        settings |= {
            "aws_region": "eu-west-3",
            "aws_access_key_env": "AWS_KEY",
            "aws_secret_key_env": "AWS_SECRET",
        }
    return settings


def provider_for(
    server: LLMServer, vendor: str, *, base_url: str | None = None, **settings: object
) -> Provider:
    config = bot_config(
        provider="test",
        providers={"test": {**settings_for(server, vendor, base_url), **settings}},
    )
    return build_provider(config, Secrets(SECRETS))


def request(text: str = "hi", **fields: Any) -> LLMRequest:
    return LLMRequest(model=MODEL, messages=(ChatMessage.text("user", text),), **fields)


async def collect(provider: Provider, sent: LLMRequest | None = None) -> list[StreamEvent]:
    return [event async for event in provider.stream(sent or request())]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def stops(events: list[StreamEvent]) -> list[str]:
    return [e.reason for e in events if isinstance(e, StopEvent)]
