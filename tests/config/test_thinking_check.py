"""``salon check`` refuses the thinking settings a vendor's API would refuse, one clear
line naming the key, in the file that set it."""

from __future__ import annotations

from pathlib import Path

import pytest

from salon.config import load_config_dir
from salon.config.check import check_bots
from tests.conftest import WriteConfig

SHARED = """\
providers:
  claude:
    type: {kind}
    model: claude-sonnet-5-5
    api_key_env: SALON_TEST_KEY
    aws_region: us-east-1
  open:
    type: openai
    base_url: http://127.0.0.1:9/v1
    api_key_env: SALON_TEST_KEY
    model: small
max_tokens: 4000
"""
ENV = {"SALON_TEST_KEY": "k-123456", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}


def problems(write_config: WriteConfig, bot: str, kind: str = "anthropic") -> list[str]:
    shared = SHARED.format(kind=kind)
    if kind != "bedrock":
        shared = shared.replace("    aws_region: us-east-1\n", "")
    root: Path = write_config(shared, ann=bot)
    report = check_bots(load_config_dir(root), ENV)
    return [str(p) for p in report.problems]


@pytest.mark.parametrize("kind", ["anthropic", "bedrock"])
def test_a_budget_below_1024_is_refused_on_either_door(
    write_config: WriteConfig, kind: str
) -> None:
    bot = "provider: claude\nthinking: {enabled: true, budget_tokens: 500}\n"
    (line,) = problems(write_config, bot, kind)
    assert "ann.yaml:2: thinking.budget_tokens: " in line
    assert f"{kind} takes at least 1024 tokens, not 500" in line


def test_a_budget_not_below_max_tokens_is_refused(write_config: WriteConfig) -> None:
    bot = "provider: claude\nthinking: {enabled: true, budget_tokens: 4000}\n"
    (line,) = problems(write_config, bot)
    assert ": thinking.budget_tokens: " in line
    assert "max_tokens (4000)" in line


@pytest.mark.parametrize("kind", ["anthropic", "bedrock"])
def test_thinking_with_an_assistant_prefill_is_refused(
    write_config: WriteConfig, kind: str
) -> None:
    """The API refuses thinking with a prefilled assistant turn. A pinned .config that
    turns thinking on for a prefill bot is not checked: those requests go without it."""
    bot = "provider: claude\nmodel: claude-opus-4-5\nmode: prefill\nthinking: {enabled: true}\n"
    (line,) = problems(write_config, bot, kind)
    assert "ann.yaml:4: thinking.enabled: " in line
    assert "no thinking with an assistant prefill (mode: prefill)" in line


def test_what_a_vendor_takes_passes(write_config: WriteConfig) -> None:
    for bot in (
        "provider: claude\nthinking: {enabled: true, budget_tokens: 2048}\n",
        "provider: claude\nthinking: {enabled: true, effort: low}\n",  # Anthropic takes effort
        # Salon never sends a temperature to Anthropic (the log says so once).
        "provider: claude\ntemperature: 0.7\nthinking: {enabled: true, budget_tokens: 2048}\n",
        "provider: claude\ntemperature: 0.2\nthinking: {enabled: false, budget_tokens: 10}\n",
        "provider: open\ntemperature: 0.2\nthinking: {enabled: true, budget_tokens: 100}\n",
    ):
        assert not problems(write_config, bot), bot


@pytest.mark.parametrize("kind", ["anthropic", "bedrock"])
def test_prefill_on_a_claude_model_that_refuses_it_is_refused(
    write_config: WriteConfig, kind: str
) -> None:
    bot = "provider: claude\nmodel: claude-opus-4-6\nmode: prefill\n"
    (line,) = problems(write_config, bot, kind)
    assert "ann.yaml:3: mode: claude-opus-4-6 refuses an assistant prefill" in line
    for fine in (
        "provider: claude\nmodel: claude-opus-4-5\nmode: prefill\n",
        "provider: claude\nmodel: claude-opus-4-6\nmode: chat\n",
        "provider: open\nmodel: claude-opus-4-6\nmode: prefill\n",  # a server that continues
    ):
        assert not problems(write_config, fine, kind), fine
