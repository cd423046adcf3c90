"""Integrations inside a bot: offered through the hub, checked by `salon check`, served on stdio."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import shutil
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from fakes.vendors.comfyui import ComfyUIFake
from fakes.vendors.open_meteo import OpenMeteoFake
from salon.app import BotApp
from salon.cli import main
from salon.config import Secrets
from salon.integrations import integration_specs
from salon.llm import FakeProvider
from salon.llm.base import ToolResultPart
from salon.llm.fake import FakeReply
from salon.model import ToolCall
from salon.platforms.terminal import terminal_for
from salon.tools.hub import ToolHub
from salon.tools.policy import decide
from tests.conftest import WriteConfig, bot_config
from tests.integrations.conftest import ROOT, text_of, within

PROVIDERS = "providers:\n  p:\n    type: openai\n    model: m\n"


async def _lines(queue: asyncio.Queue[str | None]) -> AsyncIterator[str]:
    while (line := await queue.get()) is not None:
        yield line


async def test_a_bot_asks_the_weather_and_reads_the_fake_temperature(
    open_meteo: OpenMeteoFake, tmp_path: Path
) -> None:
    config = bot_config(
        data_dir=str(tmp_path / "data"),
        integrations={"weather": {"base_url": open_meteo.base_url}},
    )
    call = ToolCall("c1", "get_weather", {"location": "Seattle"})
    provider = FakeProvider([FakeReply(calls=(call,)), "It is 11.5 °C in Seattle."])
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    queue.put_nowait("what's the weather in Seattle?\n")
    queue.put_nowait(None)
    out = io.StringIO()
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    async with app:
        spec = app.hub.get("get_weather")
        assert spec is not None
        assert decide(spec, {}, config) == "allow"  # read-only: no approval needed
        terminal = terminal_for(app.build_context(), lines=_lines(queue), out=out)
        await within(app.serve(terminal.closed, [terminal]))
    assert "It is 11.5 °C in Seattle." in out.getvalue()
    results = [
        part.result
        for part in provider.requests[1].messages[-1].parts
        if isinstance(part, ToolResultPart)
    ]
    assert [r.is_error for r in results] == [False]
    assert "Now: 11.5 °C (feels like 9.5 °C), overcast" in results[0].content


async def test_an_integration_without_its_key_is_left_out_with_the_reason(
    open_meteo: OpenMeteoFake, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = bot_config(
        integrations={
            "weather": {"base_url": open_meteo.base_url},
            "search": {"api_key_env": "MY_SERP_KEY"},
            "nfl": {"enabled": False},
        }
    )
    with caplog.at_level(logging.WARNING, logger="salon.integrations"):
        specs = integration_specs(config, Secrets({}), root=tmp_path)
    assert [s.name for s in specs] == ["weather"]
    assert (
        "integration search is not offered: search: environment variable MY_SERP_KEY is not set"
        in caplog.text
    )


async def test_images_reach_the_hub_as_attachments_not_text(
    comfyui: ComfyUIFake, tmp_path: Path
) -> None:
    shutil.copy(Path(__file__).with_name("workflow.json"), tmp_path / "workflow.json")
    config = bot_config(
        integrations={"comfyui": {"base_url": comfyui.base_url, "workflow": "workflow.json"}}
    )
    async with ToolHub(integration_specs(config, Secrets({}), root=tmp_path)) as hub:
        spec = hub.get("generate_image")
        assert spec is not None
        assert spec.read_only is False
        assert spec.destructive is False
        result = await hub.call(ToolCall("c1", "generate_image", {"prompt": "a castle"}))
    assert not result.is_error, result.content
    (image,) = result.attachments
    assert image.content_type == "image/png"
    assert (image.filename, image.label) == ("salon_00001_.png", "salon_00001_.png")
    assert "[image salon_00001_.png (image/png, 73 bytes), shown in the channel]" in result.content
    assert "iVBOR" not in result.content  # no base64 in what the model reads


def test_check_says_which_variables_to_set(
    write_config: WriteConfig,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("SERPAPI_API_KEY", "ACCUWEATHER_API_KEY", "GREYNOISE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    root = write_config(
        PROVIDERS,
        bob=textwrap.dedent(
            """\
            provider: p
            integrations:
              weather:
                accuweather_api_key_env: ACCUWEATHER_API_KEY
              greynoise:
                api_key_env: GREYNOISE_API_KEY
              search: {}
              comfyui:
                workflow: missing.json
            """
        ),
    )
    assert main(["check", str(root)]) == 2
    captured = capsys.readouterr()
    bob = root / "bots" / "bob.yaml"
    assert (
        f"warning: {bob}:4: integrations.weather.accuweather_api_key_env: environment "
        "variable ACCUWEATHER_API_KEY is not set: weather uses Open-Meteo instead of AccuWeather"
        in captured.out
    )
    assert (
        f"warning: {bob}:6: integrations.greynoise.api_key_env: environment variable "
        "GREYNOISE_API_KEY is not set" in captured.out
    )
    assert (
        f"error: {bob}:7: integrations.search.api_key_env: environment variable "
        "SERPAPI_API_KEY is not set: the search tools are not offered" in captured.err
    )
    assert (
        f"error: {bob}:9: integrations.comfyui.workflow: cannot read the workflow" in captured.err
    )


def test_check_passes_with_the_keys_set(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SERPAPI_API_KEY", "serp-secret-value")
    root = write_config(PROVIDERS, bob="provider: p\nintegrations:\n  search: {}\n  nfl: {}\n")
    assert main(["check", str(root)]) == 0
    out = capsys.readouterr().out
    assert "warning" not in out
    assert "serp-secret-value" not in out


def test_an_integration_named_like_an_mcp_server_is_an_error(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    bot = (
        "provider: p\nmcp_servers:\n  weather:\n    command: weather-mcp\n"
        "integrations:\n  weather: {}\n"
    )
    root = write_config(PROVIDERS, bob=bot)
    assert main(["check", str(root)]) == 2
    assert "an MCP server is also called 'weather'" in capsys.readouterr().err


async def test_salon_tools_serve_only_weather_over_stdio(
    open_meteo: OpenMeteoFake, write_config: WriteConfig
) -> None:
    bot = f"provider: p\nintegrations:\n  weather:\n    base_url: {open_meteo.base_url}\n"
    root = write_config(PROVIDERS, bob=bot)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "salon", "tools", "serve", str(root), "--only", "weather"],
        env=dict(os.environ),
        cwd=str(ROOT),
    )
    async with Client(params, cache=None) as client:
        names = {t.name for t in (await within(client.list_tools())).tools}
        result = await within(client.call_tool("get_weather", {"location": "Seattle"}))
    assert names == {"get_weather", "get_coolest_cities"}
    assert "Now: 11.5 °C" in text_of(result)
    assert [r.path for r in open_meteo.requests] == ["/v1/search", "/v1/forecast"]


def test_serving_an_integration_that_cannot_work_says_why(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PIXELLAB_API_KEY", raising=False)
    root = write_config(PROVIDERS, bob="provider: p\n")
    assert main(["tools", "serve", str(root), "--only", "pixellab"]) == 2
    assert (
        "error: pixellab: environment variable PIXELLAB_API_KEY is not set"
        in capsys.readouterr().err
    )
    assert main(["tools", "serve", str(root), "--only", "horoscope"]) == 2
