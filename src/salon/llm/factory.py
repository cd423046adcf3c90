"""Build the provider a bot config names, wrapped in its retry policy."""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Any

from salon.config import BotConfig, ProviderConfig, Secrets
from salon.llm.base import (
    LLMRequest,
    Provider,
    ProviderTraits,
    StreamEvent,
    anthropic_traits,
)
from salon.llm.deadline import DeadlineProvider
from salon.llm.retry import RetryingProvider

__all__ = ["DeferredProvider", "build_provider", "guarded", "vendor_provider"]

# The vendor providers' modules: each imports its SDK, a good fraction of a second.
_MODULES = {
    "anthropic": "salon.llm.anthropic",
    "bedrock": "salon.llm.anthropic",
    "google": "salon.llm.google",
    "openai": "salon.llm.openai_compat",
}


class DeferredProvider:
    """A vendor provider built at its first use, or by ``warm()``: a bot reaches its
    platforms' ready without importing the SDK, and warms it right after."""

    def __init__(
        self, name: str, traits: ProviderTraits, module: str, build: Callable[[], Provider]
    ) -> None:
        self.name = name
        self.traits = traits
        self._module = module
        self._build = build
        self._inner: Provider | None = None

    @property
    def inner(self) -> Provider:
        if self._inner is None:
            self._inner = self._build()
        return self._inner

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        return self.inner.stream(request)

    def wire(self, request: LLMRequest) -> dict[str, Any]:
        return self.inner.wire(request)

    def cache_reason(self, request: LLMRequest) -> str | None:
        return self.inner.cache_reason(request)

    async def warm(self) -> None:
        """Import the SDK in a thread (the event loop keeps serving), then build."""
        await asyncio.to_thread(importlib.import_module, self._module)
        await self.inner.warm()

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


def _traits(config: ProviderConfig) -> ProviderTraits:
    if config.type in {"anthropic", "bedrock"}:
        return anthropic_traits(config.cache_ttl)
    return ProviderTraits()


def build_provider(
    bot: BotConfig, secrets: Secrets, *, http_client: Any = None, deferred: bool = False
) -> Provider:
    """``bot``'s provider with its deadlines and retries; ``deferred``: the vendor SDK
    loads at the first request or ``warm()``, not now."""
    config = bot.provider_config()
    inner: Provider
    if deferred and config.type in _MODULES:
        build = partial(vendor_provider, bot, secrets, http_client)
        inner = DeferredProvider(bot.provider, _traits(config), _MODULES[config.type], build)
    else:
        inner = vendor_provider(bot, secrets, http_client)
    return guarded(inner, config)


def guarded(inner: Provider, config: ProviderConfig) -> Provider:
    """``inner`` with ``config``'s deadlines and retries around it."""
    timed = DeadlineProvider(
        inner, first_token_timeout=config.first_token_timeout, timeout=config.timeout
    )
    return RetryingProvider(
        timed,
        retries=config.retries,
        backoff_initial=config.backoff_initial,
        backoff_max=config.backoff_max,
    )


def vendor_provider(bot: BotConfig, secrets: Secrets, http_client: Any = None) -> Provider:
    """``bot``'s vendor provider itself, with no deadlines or retries around it."""
    config = bot.provider_config()
    api_key = secrets.get(config.api_key_env)
    base_url = secrets.get(config.base_url_env) or config.base_url
    inner: Provider
    # Each vendor SDK takes a good fraction of a second to import: load only the one in use.
    if config.type in {"anthropic", "bedrock"}:
        from salon.llm.anthropic import AnthropicProvider

        aws = None
        if config.type == "bedrock":
            aws = {
                "region": config.aws_region,
                "access_key": secrets.get(config.aws_access_key_env),
                "secret_key": secrets.get(config.aws_secret_key_env),
                "session_token": secrets.get(config.aws_session_token_env),
                "profile": config.aws_profile,
            }
        inner = AnthropicProvider(
            bot.provider,
            config,
            api_key=api_key,
            base_url=base_url,
            http_client=http_client,
            aws=aws,
        )
    elif config.type == "local":
        from salon.llm.local import LocalProvider

        inner = LocalProvider(bot.provider, config)
    elif config.type == "google":
        from salon.llm.google import GoogleProvider

        inner = GoogleProvider(bot.provider, config, api_key=api_key, base_url=base_url)
    else:
        from salon.llm.openai_compat import OpenAIProvider

        inner = OpenAIProvider(bot.provider, config, api_key=api_key, base_url=base_url)
    return inner
