"""Loading, layering and validating a config directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from salon.config import load_config_dir, merge_layers, resolve_secrets
from salon.errors import ConfigError
from tests.conftest import WriteConfig

SHARED = """\
providers:
  local:
    type: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: SALON_TEST_KEY
    model: small
max_tokens: 100
"""


def problems_of(root: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_dir(root)
    return [str(p) for p in caught.value.problems]


def test_bot_file_overrides_shared(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="provider: local\nmax_tokens: 300\n")
    bot = load_config_dir(root).bots["helper"]
    assert bot.max_tokens == 300
    assert bot.name == "helper"  # defaults to the file name
    assert bot.model_name() == "small"


def test_merge_is_deep_for_mappings_and_replaces_lists() -> None:
    merged = merge_layers([{"a": {"x": 1, "y": [1]}}, {"a": {"y": [2], "z": 3}}])
    assert merged == {"a": {"x": 1, "y": [2], "z": 3}}


def test_broken_yaml_names_file_and_line(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="provider: local\nname: [unclosed\n")
    (problem,) = problems_of(root)
    assert "helper.yaml:" in problem
    assert "invalid YAML" in problem


def test_unknown_key_names_file_line_and_path(write_config: WriteConfig) -> None:
    root = write_config(
        SHARED, helper="provider: local\nplatforms:\n  terminal:\n    colour: red\n"
    )
    (problem,) = problems_of(root)
    assert problem.endswith("helper.yaml:4: platforms.terminal.colour: unknown key")


def test_wrong_type_in_shared_blames_shared(write_config: WriteConfig) -> None:
    root = write_config(
        SHARED.replace("max_tokens: 100", "max_tokens: lots"), helper="provider: local\n"
    )
    (problem,) = problems_of(root)
    assert "shared.yaml:7: max_tokens:" in problem
    assert "integer" in problem


def test_unknown_provider_and_several_problems_at_once(write_config: WriteConfig) -> None:
    root = write_config(SHARED, a="provider: nowhere\n", b="provider: local\ntemperature: 9\n")
    found = problems_of(root)
    assert len(found) == 2
    assert any("a.yaml:1: provider: unknown provider 'nowhere' (known: local)" in p for p in found)
    assert any("b.yaml:2: temperature:" in p for p in found)


def test_missing_secret_is_named(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="provider: local\n")
    configs = load_config_dir(root)
    with pytest.raises(ConfigError) as caught:
        resolve_secrets(configs.bots["helper"], {}, configs.locator("helper"))
    (problem,) = caught.value.problems
    assert problem.file.endswith("shared.yaml")
    assert problem.key_path == "providers.local.api_key_env"
    assert "SALON_TEST_KEY is not set" in problem.reason
    secrets = resolve_secrets(
        configs.bots["helper"], {"SALON_TEST_KEY": "v"}, configs.locator("helper")
    )
    assert secrets.get("SALON_TEST_KEY") == "v"


def test_missing_directory_is_a_config_error(tmp_path: Path) -> None:
    assert "does not exist" in problems_of(tmp_path / "nope")[0]


def test_a_top_level_list_is_rejected(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="- just\n- a list\n")
    assert "must be a mapping" in problems_of(root)[0]
