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
