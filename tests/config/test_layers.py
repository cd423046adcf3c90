"""Guild layers, bot-guild overlays and pinned ``.config`` messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from salon.config import PinnedConfig, load_config_dir, parse_config_message
from salon.errors import ConfigError
from tests.conftest import WriteConfig

SHARED = """\
providers:
  local: {type: openai, model: small, base_url: "http://127.0.0.1:9/v1"}
  other: {type: openai, model: big, base_url: "http://127.0.0.1:9/v1"}
provider: local
max_tokens: 100
system_prompt: shared
"""


def write_guild(root: Path, name: str, text: str) -> None:
    (root / "guilds").mkdir(exist_ok=True)
    (root / "guilds" / f"{name}.yaml").write_text(text, encoding="utf-8")


def test_layers_apply_in_order(write_config: WriteConfig) -> None:
    root = write_config(
        SHARED,
        muse="system_prompt: bot\ntemperature: 0.5\n",
        **{"muse-555": "max_tokens: 333\n"},
    )
    write_guild(root, "555", "system_prompt: guild\nmax_tokens: 200\nreply_on_name: true\n")
    configs = load_config_dir(root)
    assert set(configs.bots) == {"muse"}  # the overlay is not a bot of its own
    resolver = configs.channel_configs("muse")
    plain = resolver.resolve(None).config
    assert (plain.system_prompt, plain.max_tokens, plain.reply_on_name) == ("bot", 100, False)
    guild = resolver.resolve("555").config
    # shared -> guild -> bot -> bot-guild: the bot file beats the guild, the overlay beats both
    assert guild.system_prompt == "bot"
    assert guild.max_tokens == 333
    assert guild.reply_on_name is True
    assert guild.temperature == 0.5
    assert guild.name == "muse"
    assert resolver.resolve("777").config is plain  # a guild without files


def test_a_dashed_bot_name_is_still_a_bot(write_config: WriteConfig) -> None:
    root = write_config(SHARED, **{"night-owl": "max_tokens: 5\n", "muse": ""})
    assert set(load_config_dir(root).bots) == {"night-owl", "muse"}


def test_bad_guild_files_are_reported_with_file_and_line(write_config: WriteConfig) -> None:
    root = write_config(SHARED, muse="", **{"muse-555": "temperature: 7\n"})
    write_guild(root, "555", "max_tokens: 10\nproviders: {}\n")
    with pytest.raises(ConfigError) as caught:
        load_config_dir(root)
    found = [str(p) for p in caught.value.problems]
    assert any("555.yaml:2: providers: applies to the whole bot" in p for p in found)
    assert any("muse-555.yaml:1: temperature:" in p for p in found)


def test_parse_config_message() -> None:
    assert parse_config_message(".config muse echo\n---\nmax_tokens: 5") == (
        ["muse", "echo"],
        "max_tokens: 5",
    )
    assert parse_config_message(".config\nmax_tokens: 5") == ([], "max_tokens: 5")
    assert parse_config_message(".configure") is None
    assert parse_config_message("hello") is None


def test_pinned_configs_apply_oldest_first_and_bad_ones_are_skipped(
    write_config: WriteConfig,
) -> None:
    root = write_config(SHARED, muse="")
    resolver = load_config_dir(root).channel_configs("muse")
    pinned = [
        PinnedConfig("1", ".config\n---\nmax_tokens: 10\nsystem_prompt: one"),
        PinnedConfig("2", ".config muse\n---\nmax_tokens: 20"),
        PinnedConfig("3", ".config echo\n---\nmax_tokens: 30"),  # another bot's
        PinnedConfig("4", ".config muse\n---\nmax_tokens: [unclosed"),
        PinnedConfig("5", ".config\n---\ncolour: red"),
        PinnedConfig("6", ".config\n---\ntool_policies: {shell: {policy: allow}}"),
        PinnedConfig("7", ".config\n---\n- a list"),
        PinnedConfig("8", ".config\n---\nmax_tokens: -1"),
        PinnedConfig("9", ".config\n---\nmode: prefill\nprovider: other"),
    ]
    resolved = resolver.resolve(None, pinned)
    config = resolved.config
    assert (config.max_tokens, config.system_prompt) == (20, "one")
    assert config.mode == "prefill"
    assert config.model_name() == "big"
    reasons = dict(resolved.rejected)
    assert set(reasons) == {"4", "5", "6", "7", "8"}
    assert "invalid YAML" in reasons["4"]
    assert reasons["5"] == "colour: unknown key"
    assert "cannot be set by a pinned message" in reasons["6"]
    assert "mapping" in reasons["7"]
    assert reasons["8"].startswith("max_tokens:")
    assert resolver.resolve(None, pinned) is resolved  # cached


def test_google_needs_an_api_key(write_config: WriteConfig) -> None:
    root = write_config("providers:\n  g: {type: google, model: gemini}\nprovider: g\n", muse="")
    with pytest.raises(ConfigError) as caught:
        load_config_dir(root)
    assert "google needs an API key" in str(caught.value)


def test_a_pin_cannot_lift_limits_but_may_add_keywords(write_config: WriteConfig) -> None:
    root = write_config(SHARED, muse="limits: {user_rate: {requests: 5}}\n")
    resolver = load_config_dir(root).channel_configs("muse")
    pinned = [
        PinnedConfig("1", ".config\n---\nlimits: {user_rate: null}"),
        PinnedConfig("2", ".config\n---\nkeywords: {time: {tool: get_current_time}}"),
    ]
    resolved = resolver.resolve(None, pinned)
    assert resolved.config.limits.user_rate is not None
    assert "keywords" not in dict(resolved.rejected).get("2", "")
    assert set(resolved.config.keywords) == {"time"}
    assert "cannot be set by a pinned message" in dict(resolved.rejected)["1"]
