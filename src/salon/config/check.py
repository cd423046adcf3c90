"""``salon check`` without the printing: every bot of a directory, its secrets, its
integrations. The CLI and the web configurator share it, so both judge a config alike."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from salon.config.integrations import check_integrations
from salon.config.loader import ConfigSet
from salon.config.models import BotConfig
from salon.config.secrets import Secrets, resolve_secrets
from salon.errors import ConfigError, ConfigProblem

__all__ = [
    "CheckReport",
    "check_bots",
    "consent_warnings",
    "prefill_refusals",
    "thinking_refusals",
]


@dataclass
class CheckReport:
    lines: list[str] = field(default_factory=list)  # "ok: …" and "warning: …", in order
    problems: list[ConfigProblem] = field(default_factory=list)
    ready: list[tuple[str, Secrets]] = field(default_factory=list)  # bots whose secrets are set


def check_bots(configs: ConfigSet, environ: Mapping[str, str]) -> CheckReport:
    """Judge every bot of an already loaded directory as ``salon check`` does."""
    report = CheckReport()
    for key in sorted(configs.bots):
        config = configs.bots[key]
        try:
            secrets = resolve_secrets(
                config, environ, configs.locator(key), variables=configs.variables(key)
            )
        except ConfigError as exc:
            report.problems.extend(exc.problems)
            continue
        report.ready.append((key, secrets))
        model = config.model_name()
        report.lines.append(f"ok: bot {key} ({config.name}) via {config.provider}, model {model}")
        found = check_integrations(config, secrets.get, configs.root, configs.locator(key))
        report.lines.extend(f"warning: {warning}" for warning in found.warnings)
        report.lines.extend(f"warning: {warning}" for warning in consent_warnings(config))
        report.problems.extend(found.errors)
        refusals = [*thinking_refusals(config), *prefill_refusals(config)]
        report.problems.extend(configs.locator(key)(path, reason) for path, reason in refusals)
    return report


def consent_warnings(config: BotConfig) -> list[str]:
    """A per_user OAuth server without ``callback_url``: the bot cannot send a person the
    link that connects their account (a person's browser reaches no loopback address)."""
    return [
        f"mcp_servers.{name}.oauth: per_user without callback_url: people are not sent a "
        f"link to connect their account; the operator runs salon tools auth {name} "
        "--person ID for each"
        for name, server in sorted(config.mcp_servers.items())
        if server.enabled
        and server.oauth
        and server.oauth.per_user
        and not server.oauth.callback_url
    ]


# Claude 4.6 and later refuse an assistant prefill (a request ending with the assistant's
# turn: Anthropic's migration guide, "Prefill removal"), on Anthropic and on Bedrock.
_CLAUDE_VERSION = re.compile(r"claude-(?:opus|sonnet|haiku)-(\d+)(?:-(\d{1,2}))?(?!\d)")


def prefill_refusals(config: BotConfig) -> list[tuple[str, str]]:
    """(key path, reason) when the bot is in prefill mode on a Claude model that refuses
    an assistant prefill: every answer would be a 400."""
    if config.mode != "prefill" or config.provider_config().type not in ("anthropic", "bedrock"):
        return []
    model = config.model_name()
    found = _CLAUDE_VERSION.search(model)
    if found is None or (int(found[1]), int(found[2] or 0)) < (4, 6):
        return []
    reason = (
        f"{model} refuses an assistant prefill (Claude 4.6 and later): use mode: chat, "
        "or an earlier model (such as claude-opus-4-5) for prefill"
    )
    return [("mode", reason)]


_MIN_BUDGET = 1024  # Anthropic's smallest thinking budget


def thinking_refusals(config: BotConfig) -> list[tuple[str, str]]:
    """(key path, reason) for each thinking setting the bot's vendor would refuse with
    every request, and Salon cannot leave out for it. Anthropic (also on Bedrock) takes
    a budget of at least 1024 tokens below ``max_tokens``; it takes an effort without a
    budget; it refuses thinking with a prefilled assistant turn (``mode: prefill``; a
    pinned ``.config`` that turns thinking on there is not refused: those requests go
    without thinking, and the log says so). Not refused, as Salon never sends it to
    Anthropic: a temperature."""
    thinking = config.thinking
    vendor = config.provider_config().type
    if not thinking.enabled or vendor not in ("anthropic", "bedrock"):
        return []
    found: list[tuple[str, str]] = []
    if config.mode == "prefill":
        reason = f"{vendor} takes no thinking with an assistant prefill (mode: prefill)"
        found.append(("thinking.enabled", f"{reason}; turn one of them off"))
    budget = thinking.budget_tokens
    if budget is not None and budget < _MIN_BUDGET:
        found.append(
            (
                "thinking.budget_tokens",
                f"{vendor} takes at least {_MIN_BUDGET} tokens, not {budget}",
            )
        )
    elif budget is not None and budget >= config.max_tokens:
        found.append(
            (
                "thinking.budget_tokens",
                f"{vendor} wants it below max_tokens ({config.max_tokens}), not {budget}",
            )
        )
    return found
