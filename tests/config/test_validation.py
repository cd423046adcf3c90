"""Values that parse but cannot work are config errors, located by file, line and key."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel, ValidationError

from salon.config import (
    BotConfig,
    DiscordConfig,
    IrcConfig,
    McpServerConfig,
    ProviderConfig,
    load_config_dir,
    resolve_secrets,
)
from salon.config._common import _Strict
from salon.errors import ConfigError
from tests.conftest import WriteConfig

SHARED = """\
providers:
  local:
    type: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: SALON_TEST_KEY
    model: small
provider: local
"""


def problems_of(root: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_dir(root)
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize(
    ("bot_yaml", "expected"),
    [
        (
            "providers:\n  local:\n    base_url: localhost:11434/v1\n",
            "helper.yaml:3: providers.local.base_url: not an http(s) URL with a host: "
            "write http://localhost:11434/v1",
        ),
        (
            "providers:\n  local:\n    base_url: 'http://'\n",
            "helper.yaml:3: providers.local.base_url: not an http(s) URL with a host",
        ),
        (
            "mcp_servers:\n  web: {url: 'ftp://127.0.0.1/mcp'}\n",
            "helper.yaml:2: mcp_servers.web.url: not an http(s) URL with a host",
        ),
        (
            "timezone: Mars/Olympus\n",
            "helper.yaml:1: timezone: unknown timezone 'Mars/Olympus': use an IANA name",
        ),
        ("providers:\n  local:\n    timeout: .inf\n", "helper.yaml:3: providers.local.timeout:"),
        (
            "providers:\n  local:\n    backoff_max: .nan\n",
            "helper.yaml:3: providers.local.backoff_max: Input should be a finite number",
        ),
        ("approval_timeout: -.inf\n", "helper.yaml:1: approval_timeout:"),
        (
            "mcp_servers:\n  t: {command: x, start_timeout: 0}\n",
            "helper.yaml:2: mcp_servers.t.start_timeout: Input should be greater than 0",
        ),
        (
            "providers:\n  local:\n    api_key_env: ''\n",
            "helper.yaml:3: providers.local.api_key_env: must be the name of an environment "
            "variable",
        ),
        (
            "providers:\n  local:\n    api_key_env: sk-proj-abcdef\n",
            "helper.yaml:3: providers.local.api_key_env: must be the name of an environment "
            "variable",
        ),
        (
            "mcp_servers:\n  t: {command: x, headers_env: {Authorization: ' '}}\n",
            "helper.yaml:2: mcp_servers.t.headers_env: Authorization: must be the name",
        ),
        (
            "max_tokens: 10000000\n",
            "helper.yaml:1: max_tokens: Input should be less than or equal to 1000000",
        ),
    ],
)
def test_values_that_cannot_work_are_reported(
    write_config: WriteConfig, bot_yaml: str, expected: str
) -> None:
    (problem,) = problems_of(write_config(SHARED, helper=bot_yaml))
    assert expected in problem


def test_a_secret_written_as_an_env_name_is_not_repeated(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="providers:\n  local:\n    api_key_env: sk-proj-abcdef\n")
    (problem,) = problems_of(root)
    assert "sk-proj" not in problem


def test_every_value_problem_of_a_directory_at_once(write_config: WriteConfig) -> None:
    root = write_config(
        SHARED,
        a="timezone: Mars/Olympus\nmax_tokens: 2000000\n",
        b="providers:\n  local:\n    base_url: 'http://'\n    timeout: .nan\n",
    )
    found = problems_of(root)
    assert len(found) == 4


MINIMAL: dict[type[BaseModel], dict[str, Any]] = {
    ProviderConfig: {"type": "openai"},
    McpServerConfig: {"command": "x"},
    IrcConfig: {"server": "127.0.0.1", "nick": "salon"},
    DiscordConfig: {},
    BotConfig: {"provider": "p", "name": "n", "providers": {"p": {"type": "openai", "model": "m"}}},
}


def waiting_fields() -> list[tuple[type[BaseModel], str]]:
    """Every timeout and backoff field, including ones added after this test was written."""
    return [
        (model, name)
        for model in MINIMAL
        for name in model.model_fields
        if "timeout" in name or "backoff" in name
    ]


@pytest.mark.parametrize(("model", "field"), waiting_fields())
@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, -1.0, 10**9])
def test_every_timeout_and_backoff_is_finite_and_sane(
    model: type[BaseModel], field: str, value: float
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate({**MINIMAL[model], field: value})
    assert [e["loc"] for e in caught.value.errors()] == [(field,)]


@pytest.mark.parametrize(("model", "field"), waiting_fields())
def test_timeouts_are_positive_and_backoffs_may_be_zero(model: type[BaseModel], field: str) -> None:
    data = {**MINIMAL[model], field: 0}
    if "timeout" in field:
        with pytest.raises(ValidationError):
            model.model_validate(data)
    else:
        model.model_validate(data)


def test_an_empty_or_blank_secret_is_reported_like_a_missing_one(
    write_config: WriteConfig,
) -> None:
    configs = load_config_dir(write_config(SHARED, helper=""))
    for value in ("", "  ", "\n"):
        with pytest.raises(ConfigError) as caught:
            resolve_secrets(
                configs.bots["helper"], {"SALON_TEST_KEY": value}, configs.locator("helper")
            )
        (problem,) = caught.value.problems
        assert problem.key_path == "providers.local.api_key_env"
        assert "environment variable SALON_TEST_KEY is empty (required secret)" in problem.reason


def test_a_base_url_from_the_environment_must_be_a_url(write_config: WriteConfig) -> None:
    shared = SHARED.replace("    model: small", "    model: small\n    base_url_env: LOCAL_URL")
    configs = load_config_dir(write_config(shared, helper=""))
    env = {"SALON_TEST_KEY": "k", "LOCAL_URL": "localhost:11434/v1"}
    with pytest.raises(ConfigError) as caught:
        resolve_secrets(configs.bots["helper"], env, configs.locator("helper"))
    (problem,) = caught.value.problems
    assert str(problem).endswith(
        "shared.yaml:7: providers.local.base_url_env: environment variable LOCAL_URL is "
        "not an http(s) URL with a host: write http://localhost:11434/v1"
    )
    env["LOCAL_URL"] = "http://127.0.0.1:11434/v1"
    secrets = resolve_secrets(configs.bots["helper"], env, configs.locator("helper"))
    assert secrets.get("LOCAL_URL") == "http://127.0.0.1:11434/v1"


def _models_within(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for argument in get_args(annotation):
        yield from _models_within(argument)


def config_models() -> set[type[BaseModel]]:
    """Every model a bot's YAML reaches, from BotConfig down."""
    found: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [BotConfig]
    while todo:
        model = todo.pop()
        if model not in found:
            found.add(model)
            for field in model.model_fields.values():
                todo.extend(_models_within(field.annotation))
    return found


def test_every_config_model_follows_the_shared_rules() -> None:
    """One strict base: a `*_env` or `*timeout*` key added to any section is checked."""
    assert len(config_models()) > 30
    assert [m.__name__ for m in config_models() if not issubclass(m, _Strict)] == []
