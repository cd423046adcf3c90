"""The model calls of one arm: its answers, and the speak gate's and the evaluator's short
calls. A dry run answers them from a canned model and bills each request body by its
vendor's cache rules on the virtual clock (``salon.replay.billing``); a real run asks the
arm's real providers (``salon.llm.factory.build_provider``, keys from the environment) and
takes the usage they report, with the time to the first token. No tool is ever offered.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from salon.config import BotConfig, Secrets
from salon.config.prices import call_cost, price_for
from salon.errors import ConfigError, ConfigProblem, ProviderError
from salon.llm.base import LLMRequest, Provider, TextDelta, ThinkingDelta, UsageEvent
from salon.llm.factory import build_provider
from salon.model import Usage
from salon.replay.billing import Billing, billing_for

__all__ = ["CANNED_ANSWER", "ArmCalls", "Spoken", "provider_secrets"]

CANNED_ANSWER = "(canned answer: a dry run asks no model)"
Kind = Literal["answer", "gate", "evaluate", "judge"]
_KEYS = ("api_key_env", "aws_access_key_env", "aws_secret_key_env", "aws_session_token_env")
_REQUIRED = ("api_key_env", "aws_access_key_env", "aws_secret_key_env")


@dataclass(frozen=True, slots=True)
class Spoken:
    """What one call gave: its text, what it was billed, and (real) how soon it began."""

    text: str
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    ceiling_usd: float | None = 0.0  # the cost had the answer run to max_tokens
    first_token_s: float | None = None
    error: str = ""


def provider_secrets(config: BotConfig, names: set[str], environ: Mapping[str, str]) -> Secrets:
    """The keys of the providers ``names`` from the environment, as the bot reads them;
    a missing one is refused here, naming the variable, before anything is sent."""
    values: dict[str, str] = {}
    plain: dict[str, str] = {}
    problems: list[ConfigProblem] = []
    for name in sorted(names):
        settings = config.providers[name]
        for key in _KEYS:
            variable = getattr(settings, key)
            if not variable:
                continue
            if (environ.get(variable) or "").strip():
                values[variable] = environ[variable]
            elif key in _REQUIRED and not (key != "api_key_env" and settings.aws_profile):
                reason = f"environment variable {variable} is not set (required secret)"
                problems.append(ConfigProblem("(environment)", f"providers.{name}.{key}", reason))
        url = settings.base_url_env
        if url and (environ.get(url) or "").strip():
            plain[url] = environ[url]
    if problems:
        raise ConfigError(problems)
    return Secrets(values, plain)


class ArmCalls:
    """One arm's providers, built once each; ``secrets`` None: a dry run."""

    def __init__(self, secrets: Secrets | None) -> None:
        self.secrets = secrets
        self._providers: dict[str, Provider] = {}
        self._billing: dict[tuple[Kind, str], Billing] = {}

    @property
    def dry(self) -> bool:
        return self.secrets is None

    def provider(self, config: BotConfig) -> Provider:
        """The provider ``config`` names (a dry run's renders bodies only, with a stand-in
        key: it is never asked to stream)."""
        found = self._providers.get(config.provider)
        if found is None:
            secrets = self.secrets if self.secrets is not None else _stand_in(config)
            found = build_provider(config, secrets, deferred=True)
            self._providers[config.provider] = found
        return found

    async def call(
        self, kind: Kind, config: BotConfig, request: LLMRequest, when: datetime, canned: str
    ) -> Spoken:
        """Ask (or, dry, bill) one request at the virtual time ``when``."""
        if self.dry:
            return self._billed(kind, config, request, when, canned)
        return await _streamed(self.provider(config), request, config)

    def _billed(
        self, kind: Kind, config: BotConfig, request: LLMRequest, when: datetime, canned: str
    ) -> Spoken:
        settings = config.provider_config()
        key = (kind, config.provider)
        billing = self._billing.get(key)
        if billing is None:
            billing = self._billing[key] = billing_for(settings.type, request.model)
        # A local model has no wire (and a dry run must not load it): its prompt's text.
        local = settings.type == "local"
        body = _plain(request) if local else self.provider(config).wire(request)
        usage = billing.bill(body, request.model, when)
        price = price_for(request.model, config.prices)
        said = replace(usage, output_tokens=math.ceil(len(canned) / 4))
        ceiling = replace(usage, output_tokens=request.max_tokens)
        return Spoken(canned, said, call_cost(price, said), call_cost(price, ceiling))

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()


async def _streamed(provider: Provider, request: LLMRequest, config: BotConfig) -> Spoken:
    """The whole text of a real call, its usage and cost, and when its first token came; a
    provider's failure is the row's error, not the replay's end."""
    started = time.perf_counter()
    first: float | None = None
    pieces: list[str] = []
    usage = Usage()
    try:
        async for event in provider.stream(request):
            if isinstance(event, TextDelta | ThinkingDelta) and first is None:
                first = time.perf_counter() - started
            if isinstance(event, TextDelta):
                pieces.append(event.text)
            elif isinstance(event, UsageEvent):
                usage += event.usage
    except ProviderError as exc:
        error = str(exc) or type(exc).__name__
    else:
        error = ""
    price = price_for(request.model, config.prices)
    cost = call_cost(price, usage, write_factor=provider.traits.cache_write_factor)
    return Spoken("".join(pieces).strip(), usage, cost, cost, first, error)


def _stand_in(config: BotConfig) -> Secrets:
    settings = config.provider_config()
    return Secrets({getattr(settings, k): "dry-run" for k in _KEYS if getattr(settings, k)})


def _plain(request: LLMRequest) -> dict[str, Any]:
    """A local model's prompt as one text, for its token count."""
    text = request.system + "".join(m.plain_text for m in request.messages)
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]}
