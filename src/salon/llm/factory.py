"""Build the provider a bot config names, wrapped in its retry policy."""

from __future__ import annotations

from typing import Any

from salon.config import BotConfig, Secrets
from salon.llm.base import Provider
from salon.llm.deadline import DeadlineProvider
from salon.llm.retry import RetryingProvider

__all__ = ["build_provider"]


def build_provider(bot: BotConfig, secrets: Secrets, *, http_client: Any = None) -> Provider:
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

        inner = OpenAIProvider(
            bot.provider, config, api_key=api_key, base_url=base_url, http_client=http_client
        )
    timed = DeadlineProvider(
        inner, first_token_timeout=config.first_token_timeout, timeout=config.timeout
    )
    return RetryingProvider(
        timed,
        retries=config.retries,
        backoff_initial=config.backoff_initial,
        backoff_max=config.backoff_max,
    )
