"""Secrets come from the environment by name and are redacted wherever text leaves Salon."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from salon.config.integrations import integration_secrets
from salon.config.interpolation import looks_secret
from salon.config.models import BotConfig, http_url_problem
from salon.config.tools import TOKEN_KEY_ENV
from salon.errors import ConfigError, ConfigProblem

__all__ = ["Redactor", "Secrets", "required_secrets", "resolve_secrets"]

_MIN_SECRET_LEN = 4  # shorter values would redact ordinary words


@dataclass(frozen=True)
class Redactor:
    """Replaces every known secret value in a text with ``***``."""

    values: frozenset[str] = frozenset()
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        usable = sorted(
            (v for v in self.values if len(v) >= _MIN_SECRET_LEN), key=len, reverse=True
        )
        if usable:
            pattern = re.compile("|".join(re.escape(v) for v in usable))
            object.__setattr__(self, "_pattern", pattern)

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub("***", text)

    def merged(self, other: Iterable[str]) -> Redactor:
        return Redactor(self.values | frozenset(other))


@dataclass(frozen=True)
class Secrets:
    """Values of the ``*_env`` variables one bot needs, looked up once at start.

    ``values`` are secrets (redacted everywhere); ``plain`` are other settings read from
    the environment, such as a base URL, which stay readable in logs.
    """

    values: Mapping[str, str]
    plain: Mapping[str, str] = field(default_factory=dict)

    def get(self, env_name: str | None) -> str | None:
        if env_name is None:
            return None
        return self.values.get(env_name) or self.plain.get(env_name)

    def redactor(self) -> Redactor:
        return Redactor(frozenset(self.values.values()))


Locate = Callable[[str, str], ConfigProblem]


_PROVIDER_SECRETS = (
    "api_key_env",
    "aws_access_key_env",
    "aws_secret_key_env",
    "aws_session_token_env",
)


def _platform_secrets(bot: BotConfig) -> list[tuple[str, str]]:
    needed: list[tuple[str, str]] = []
    irc = bot.platforms.irc
    if irc is not None:
        for key in ("password_env", "sasl_password_env"):
            env_name = getattr(irc, key)
            if env_name:
                needed.append((f"platforms.irc.{key}", env_name))
    matrix = bot.platforms.matrix
    if matrix is not None:  # a password login wins: its kept token needs no variable
        key = "password_env" if matrix.password_env else "access_token_env"
        env_name = getattr(matrix, key)
        if env_name:
            needed.append((f"platforms.matrix.{key}", env_name))
    slack = bot.platforms.slack
    if slack is not None:
        needed.append(("platforms.slack.bot_token_env", slack.bot_token_env))
        if slack.mode == "http":  # Slack's requests are checked with the signing secret
            needed.append(("platforms.slack.signing_secret_env", slack.signing_secret_env))
        else:
            needed.append(("platforms.slack.app_token_env", slack.app_token_env))
    return needed


def required_secrets(bot: BotConfig) -> list[tuple[str, str]]:
    """(key path, environment variable) of every secret the bot cannot start without."""
    needed: list[tuple[str, str]] = []
    if bot.database_password_env:
        needed.append(("database_password_env", bot.database_password_env))
    provider = bot.provider_config()
    for key in _PROVIDER_SECRETS:
        env_name = getattr(provider, key)
        if env_name:
            needed.append((f"providers.{bot.provider}.{key}", env_name))
    discord = bot.platforms.discord
    if discord is not None:
        needed.append(("platforms.discord.token_env", discord.token_env))
    return needed + _platform_secrets(bot) + _mcp_secrets(bot)


def _mcp_secrets(bot: BotConfig) -> list[tuple[str, str]]:
    needed: list[tuple[str, str]] = []
    for name, server in bot.mcp_servers.items():
        if not server.enabled:
            continue
        for key, env_name in server.env_from.items():
            needed.append((f"mcp_servers.{name}.env_from.{key}", env_name))
        for key, env_name in server.headers_env.items():
            needed.append((f"mcp_servers.{name}.headers_env.{key}", env_name))
        if server.oauth is not None:  # its tokens are kept sealed under this key
            needed.append((f"mcp_servers.{name}.oauth", TOKEN_KEY_ENV))
            if server.oauth.client_secret_env:
                secret = server.oauth.client_secret_env
                needed.append((f"mcp_servers.{name}.oauth.client_secret_env", secret))
    return needed


def _other_providers(
    bot: BotConfig, environ: Mapping[str, str], locate: Locate
) -> tuple[dict[str, str], dict[str, str], list[ConfigProblem]]:
    """Other providers may be chosen per guild or channel: take their settings when set.

    Returns their secrets, their base URLs, and the problems of those URLs."""
    values: dict[str, str] = {}
    plain: dict[str, str] = {}
    problems: list[ConfigProblem] = []
    for provider_name, provider in bot.providers.items():
        for name in (getattr(provider, key) for key in _PROVIDER_SECRETS):
            if name and (environ.get(name) or "").strip():
                values[name] = environ[name]
        url_env = provider.base_url_env
        url = (environ.get(url_env) or "").strip() if url_env else ""
        if not url_env or not url:
            continue
        problem = http_url_problem(url)
        if problem:
            key_path = f"providers.{provider_name}.base_url_env"
            problems.append(locate(key_path, f"environment variable {url_env} is {problem}"))
        else:
            plain[url_env] = url
    return values, plain, problems


def _optional_secrets(
    bot: BotConfig, environ: Mapping[str, str], variables: Iterable[str]
) -> dict[str, str]:
    """The secrets taken when set, to be redacted, and never required."""
    names: list[str] = []
    # Integration keys: a missing one turns its integration off (salon.config.integrations).
    names.extend(env_name for _, env_name in integration_secrets(bot))
    # The web server's keys (without one its page or triggers are off), and a Matrix
    # token beside a password login.
    matrix_token = bot.platforms.matrix.access_token_env if bot.platforms.matrix else None
    names.extend(
        n for n in (bot.web.activity_key_env, bot.web.trigger_token_env, matrix_token) if n
    )
    # A collector's headers (API keys); one not set is sent empty (the collector says so):
    # the bot answers whether or not it exports.
    names.extend(bot.otel.headers_env.values() if bot.otel is not None else ())
    # Variables a value names as ${NAME}, when named like secrets.
    names.extend(n for n in variables if looks_secret(n))
    return {name: environ[name] for name in names if environ.get(name)}


def resolve_secrets(
    bot: BotConfig,
    environ: Mapping[str, str],
    locate: Locate,
    *,
    tools_only: bool = False,
    variables: Iterable[str] = (),
) -> Secrets:
    """Look up every secret the bot needs; raise one ConfigError naming all missing ones.

    ``locate(key_path, reason)`` builds the problem, blaming the file that set the key.
    ``variables``: those the bot's files name as ``${NAME}``; the values of the ones named
    like secrets are secrets too (redacted), though nothing requires them here.
    """
    values: dict[str, str] = {}
    problems: list[ConfigProblem] = []
    for key_path, env_name in required_secrets(bot):
        if tools_only and not key_path.startswith(("mcp_servers.", "database_")):
            continue
        value = environ.get(env_name)
        if value is not None and value.strip():
            values[env_name] = value
            continue
        # A blank value fails later, at the vendor, with a vaguer error: refuse it here.
        state = "is not set" if value is None else "is empty"
        problems.append(
            locate(key_path, f"environment variable {env_name} {state} (required secret)")
        )
    values |= _optional_secrets(bot, environ, variables)
    plain: dict[str, str] = {}
    if not tools_only:
        others, plain, url_problems = _other_providers(bot, environ, locate)
        values = {**others, **values}
        problems.extend(url_problems)
    if problems:
        raise ConfigError(problems)
    return Secrets(values, plain)
