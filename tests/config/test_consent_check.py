"""``salon check`` names a per_user OAuth server without ``callback_url``: no person can be
sent the link that connects their account (the consent flow in a direct message)."""

from __future__ import annotations

from pathlib import Path

from salon.config import load_config_dir
from salon.config.check import check_bots
from salon.config.tools import TOKEN_KEY_ENV as KEY_ENV
from tests.config.test_thinking_check import ENV, SHARED
from tests.conftest import WriteConfig

SERVER = "mcp_servers:\n  tracker:\n    url: https://tracker.example/mcp\n    oauth: {oauth}\n"


def warnings(write_config: WriteConfig, oauth: str) -> list[str]:
    bot = "provider: open\n" + SERVER.format(oauth=oauth)
    root: Path = write_config(
        SHARED.format(kind="anthropic").replace("    aws_region: us-east-1\n", ""), ann=bot
    )
    report = check_bots(load_config_dir(root), {**ENV, KEY_ENV: "a long random key"})
    assert report.problems == []
    return [line for line in report.lines if line.startswith("warning:")]


def test_per_user_without_a_callback_url_is_named(write_config: WriteConfig) -> None:
    (line,) = warnings(write_config, "{per_user: true}")
    assert line == (
        "warning: mcp_servers.tracker.oauth: per_user without callback_url: people are not "
        "sent a link to connect their account; the operator runs salon tools auth tracker "
        "--person ID for each"
    )


def test_per_user_with_a_callback_url_or_the_bots_own_tokens_say_nothing(
    write_config: WriteConfig,
) -> None:
    url = "https://salon.example/config/oauth/callback"
    assert warnings(write_config, f"{{per_user: true, callback_url: '{url}'}}") == []
    assert warnings(write_config, "{}") == []
