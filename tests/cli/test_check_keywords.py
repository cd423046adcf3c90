"""`salon check` on keywords: a keyword whose tool Salon does not have is an error."""

from __future__ import annotations

import pytest

from salon.cli import main
from tests.conftest import WriteConfig

SHARED = """\
providers:
  local: {type: openai, base_url: "http://127.0.0.1:1/v1", model: m}
provider: local
"""


def test_a_keyword_without_its_tool_is_an_error(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_config(
        SHARED,
        bob="""\
        keywords:
          "!time": {tool: get_current_time}
          weather: {tool: get_weather, final_pass: true}
          help: {internal: true}
        """,
    )
    assert main(["check", str(root)]) == 2
    err = capsys.readouterr().err
    assert "bob.yaml:3: keywords.weather.tool: no tool get_weather" in err
    assert "keywords.time" not in err  # a built-in tool


def test_keywords_with_their_tools_check(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_config(
        SHARED,
        bob="""\
        integrations:
          weather: {}
        keywords:
          weather: {tool: get_weather}
        """,
    )
    assert main(["check", str(root)]) == 0
