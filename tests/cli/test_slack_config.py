"""``salon init --platform slack`` and ``salon check`` for a bot on Slack."""

from __future__ import annotations

from pathlib import Path

import pytest

from salon.cli import main


def test_init_for_slack_writes_a_section_that_check_names_the_tokens_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    assert main(["init", str(root), "--provider", "openai", "--platform", "slack"]) == 0
    bot = (root / "bots" / "assistant.yaml").read_text()
    assert "  slack:\n" in bot
    assert "bot_token_env: SLACK_BOT_TOKEN" in bot
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("SLACK_BOT_TOKEN", raising=False)
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    capsys.readouterr()
    assert main(["check", str(root)]) == 2
    err = capsys.readouterr().err
    assert "platforms.slack.bot_token_env: environment variable SLACK_BOT_TOKEN is not set" in err
    assert "platforms.slack.app_token_env: environment variable SLACK_APP_TOKEN is not set" in err
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    assert main(["check", str(root)]) == 0


def test_check_names_the_signing_secret_and_not_the_app_token_in_http_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    assert main(["init", str(root), "--provider", "openai", "--platform", "slack"]) == 0
    bot = root / "bots" / "assistant.yaml"
    text = bot.read_text().replace("  slack:\n", "  slack:\n    mode: http\n", 1)
    bot.write_text(text)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.delenv("SLACK_APP_TOKEN", raising=False)
    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    capsys.readouterr()
    assert main(["check", str(root)]) == 2
    err = capsys.readouterr().err
    assert (
        "platforms.slack.signing_secret_env: environment variable SLACK_SIGNING_SECRET "
        "is not set" in err
    )
    assert "SLACK_APP_TOKEN" not in err  # Socket Mode's, not needed over HTTP
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "8f74")
    assert main(["check", str(root)]) == 0


@pytest.mark.parametrize(
    ("slack", "reason"),
    [
        ({"listen": "localhost"}, "host:port"),
        ({"listen": "127.0.0.1:99999"}, "host:port"),
        ({"path": "slack/events"}, "start with /"),
        ({"mode": "webhook"}, "socket"),
    ],
)
def test_a_bad_http_setting_is_refused(slack: dict[str, str], reason: str) -> None:
    from pydantic import ValidationError

    from salon.config.platforms import SlackConfig

    with pytest.raises(ValidationError, match=reason):
        SlackConfig.model_validate({"mode": "http", **slack})
