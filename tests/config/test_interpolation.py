"""``${VAR}`` and ``${VAR:-default}`` in config files: any value, checked by the loader,
secret-named values kept out of everything Salon shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from salon.config import load_config_dir
from salon.config.channels import PinnedConfig
from salon.config.check import check_bots
from salon.config.interpolation import looks_secret
from salon.errors import ConfigError
from tests.conftest import WriteConfig

BOT = """\
providers:
  p: {type: openai, base_url: "${P_URL:-http://127.0.0.1:9/v1}", model: "${P_MODEL}"}
provider: p
name: ${BOT_NAME:-Assistant}
temperature: ${P_TEMPERATURE:-0.8}
max_tokens: ${P_MAX_TOKENS:-512}
system_prompt: You are ${BOT_NAME:-Assistant}; it costs $5, written $${NOT_A_VARIABLE}.
error_message: "${ERROR_MESSAGE:-I tried to help, but ran into an issue: {reason}}"
"""


def _problems(root: Path, environ: dict[str, str]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_dir(root, environ)
    return [str(p) for p in caught.value.problems]


def test_variables_fill_any_value_and_defaults_fill_the_unset(write_config: WriteConfig) -> None:
    root = write_config(bot=BOT)
    bot = load_config_dir(root, {"P_MODEL": "glm", "P_TEMPERATURE": "1.2"}).bots["bot"]
    assert bot.model_name() == "glm"
    assert bot.temperature == 1.2  # a number's text reads as the number
    assert bot.max_tokens == 512
    assert bot.name == "Assistant"
    assert bot.system_prompt == "You are Assistant; it costs $5, written ${NOT_A_VARIABLE}."
    assert bot.error_message == "I tried to help, but ran into an issue: {reason}"
    assert str(bot.providers["p"].base_url) == "http://127.0.0.1:9/v1"


def test_an_empty_variable_takes_the_default(write_config: WriteConfig) -> None:
    root = write_config(bot=BOT)
    bot = load_config_dir(root, {"P_MODEL": "glm", "BOT_NAME": ""}).bots["bot"]
    assert bot.name == "Assistant"


def test_a_missing_variable_without_default_is_a_located_problem(
    write_config: WriteConfig,
) -> None:
    root = write_config(bot=BOT)
    problem = (
        f"{root / 'bots' / 'bot.yaml'}:2: providers.p.model: environment variable P_MODEL "
        "is not set and has no default (write ${P_MODEL:-default} for one)"
    )
    assert problem in _problems(root, {})


def test_a_malformed_reference_is_a_problem(write_config: WriteConfig) -> None:
    root = write_config(bot="provider: p\nsystem_prompt: 'hello ${1X} and ${OPEN'\n")
    problems = _problems(root, {})
    assert any(
        p.endswith(
            ":2: system_prompt: ${1X} is not a variable: write ${NAME} or "
            "${NAME:-default} (or $${ for a literal ${)"
        )
        for p in problems
    ), problems


def test_a_variable_of_the_wrong_type_is_the_keys_problem(write_config: WriteConfig) -> None:
    root = write_config(bot=BOT)
    problems = _problems(root, {"P_MODEL": "m", "P_MAX_TOKENS": "lots"})
    assert any(":6: max_tokens: " in p for p in problems), problems


def test_a_pinned_config_is_not_interpolated(write_config: WriteConfig) -> None:
    """Whoever can pin a message must not read the environment through the bot."""
    root = write_config(bot=BOT)
    configs = load_config_dir(root, {"P_MODEL": "m", "SOME_TOKEN": "tok-secret-1"})
    pinned = PinnedConfig("1", ".config\n---\nsystem_prompt: ${SOME_TOKEN}\n")
    resolved = configs.channel_configs("bot").resolve(None, [pinned])
    assert resolved.config.system_prompt == "${SOME_TOKEN}"


def test_values_of_secret_named_variables_are_redacted(write_config: WriteConfig) -> None:
    """A secret pulled into a value (a header, a prompt) is a secret like an ``*_env``
    one: the bot's redactor takes it out of logs, traces and the pages."""
    root = write_config(
        bot="providers:\n  p:\n    type: openai\n    model: m\n"
        "    headers: {Authorization: 'Bearer ${P_API_KEY}', X-Count: '${MAX_TOKENS:-1}'}\n"
        "provider: p\n"
    )
    environ = {"P_API_KEY": "sk-secret-value", "MAX_TOKENS": "4096"}
    configs = load_config_dir(root, environ)
    report = check_bots(configs, environ)
    ((_, secrets),) = report.ready
    redact = secrets.redactor()
    assert redact("Bearer sk-secret-value") == "Bearer ***"
    assert redact("4096 tokens") == "4096 tokens"  # MAX_TOKENS is no secret
    assert configs.variables("bot") == frozenset({"P_API_KEY", "MAX_TOKENS"})


def test_a_problem_never_shows_a_secret_named_value(write_config: WriteConfig) -> None:
    root = write_config(
        bot="provider: p\nproviders:\n  p: {type: openai, base_url: '${X_TOKEN}'}\n"
    )
    problems = _problems(root, {"X_TOKEN": "tok-abcdef"})
    assert problems
    assert all("tok-abcdef" not in p for p in problems), problems


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GROK_API_KEY", True),
        ("DISCORD_TOKEN", True),
        ("DB_PASSWORD", True),
        ("CLIENT_SECRET", True),
        ("GITHUBTOKEN", True),
        ("AGENT_MAX_TOKENS", False),
        ("MAX_REQUESTS_PER_USER_PER_HOUR", False),
        ("AGENT_API_URL", False),
        ("BOT_NAME", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert looks_secret(name) is secret


def test_the_pages_redact_a_secret_named_value(write_config: WriteConfig) -> None:
    """The configurator shows each key's effective value: the web server's redactor, which
    every page passes through, knows the values of secret-named variables too."""
    from salon.web.context import secret_values  # the pages' redactor's values

    root = write_config(
        bot="providers:\n  p: {type: openai, model: m, headers: {X-Key: '${P_API_KEY}'}}\n"
        "provider: p\nsystem_prompt: 'max ${MAX_TOKENS:-1}'\n"
    )
    environ = {"P_API_KEY": "sk-shown-nowhere", "MAX_TOKENS": "4096"}
    assert secret_values(load_config_dir(root, environ), environ) == ["sk-shown-nowhere"]


IRC = """\
provider: p
providers: {p: {type: openai, model: m}}
platforms:
  irc:
    server: ${IRC_SERVER:-irc.libera.chat}
    port: ${IRC_PORT:-6697}
    nick: ${IRC_NICK:-Terra}
    channels: "${IRC_CHANNELS:-#terrarium,#test}"
"""


def test_irc_channels_may_be_one_comma_separated_list(write_config: WriteConfig) -> None:
    """As IRC's JOIN takes them, and as Terrarium's IRC_CHANNELS holds them."""
    root = write_config(bot=IRC)
    irc = load_config_dir(root, {"IRC_CHANNELS": "#a, #b,"}).bots["bot"].platforms.irc
    assert irc is not None
    assert irc.channels == ["#a", "#b"]


def test_irc_port_6667_is_plain_text_unless_tls_is_set(write_config: WriteConfig) -> None:
    root = write_config(bot=IRC)

    def irc(environ: dict[str, str]) -> tuple[int, bool]:
        found = load_config_dir(root, environ).bots["bot"].platforms.irc
        assert found is not None
        return found.port, found.tls

    assert irc({}) == (6697, True)
    assert irc({"IRC_PORT": "6667"}) == (6667, False)  # Terrarium's .env: IRC_PORT=6667
    (root / "bots" / "bot.yaml").write_text(IRC + "    tls: true\n")
    assert irc({"IRC_PORT": "6667"}) == (6667, True)


def test_a_relative_sqlite_path_is_under_the_config_directory(write_config: WriteConfig) -> None:
    """As ``data_dir`` is: Terrarium's DB_PATH=./data/irc_logs.db lands beside the bot."""
    from salon.bots import database_url

    root = write_config(
        bot="provider: p\nproviders: {p: {type: openai, model: m}}\n"
        "database_url: 'sqlite:///${DB_PATH:-data/salon.db}'\n"
    )
    configs = load_config_dir(root, {"DB_PATH": "./data/irc_logs.db"})
    assert database_url(root, configs.bots["bot"]) == f"sqlite:///{root}/data/irc_logs.db"
    absolute = load_config_dir(root, {"DB_PATH": "/srv/irc.db"}).bots["bot"]
    assert database_url(root, absolute) == "sqlite:////srv/irc.db"
