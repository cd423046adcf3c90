"""The example configs (``examples/``) as a new user runs them: ``salon check`` says which
variables to set and then passes; on the fakes (Discord, the LLM server, the vendors),
each does what its seed describes. Seeds 000 and 001 are here; 002, 003 and 004 are in the
``test_examples_*`` files beside this one, which use ``copy_example`` and ``serve_example``."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer
from fakes.llm_wire import Scripted
from fakes.vendors.comfyui import ComfyUIFake
from fakes.vendors.images import tiny_png
from fakes.vendors.open_meteo import OpenMeteoFake
from fakes.vendors.pixellab import PixelLabFake
from salon.app import BotApp
from salon.cli import main
from salon.config import BotConfig, Secrets
from salon.config.loader import load_config_dir
from salon.platforms.discord import DiscordPlatform
from salon.platforms.irc import IrcPlatform
from tests.conftest import ServeApp
from tests.platforms.conftest import GENERAL, ask

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KEYS = {
    "bob-bot": ["DISCORD_TOKEN", "SERPAPI_API_KEY"],
    "sprite-orchestrator": ["DISCORD_TOKEN", "GROK_API_KEY", "PIXELLAB_API_KEY"],
    "personal-assistant": ["DISCORD_TOKEN", "OPENROUTER_API_KEY"],
    "chapterx": ["ANTHROPIC_API_KEY", "MUSE_DISCORD_TOKEN", "ECHO_DISCORD_TOKEN"],
    "terrarium": [],
}
OPTIONAL = [
    "ACCUWEATHER_API_KEY",
    "GREYNOISE_API_KEY",
    "OLLAMA_BASE_URL",
    "SALON_TRIGGER_TOKEN",
    "AGENT_API_URL",
]


def test_every_example_is_checked() -> None:
    assert sorted(KEYS) == sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())


@pytest.mark.parametrize("example", sorted(KEYS))
def test_check_names_the_keys_to_set_and_then_passes(
    example: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in KEYS[example] + OPTIONAL:
        monkeypatch.delenv(name, raising=False)
    missing: set[str] = set()
    for _ in KEYS[example]:  # check names what it finds; set each and ask again
        if main(["check", str(EXAMPLES / example)]) == 0:
            break
        said = capsys.readouterr().err
        named = {k for k in KEYS[example] if f"variable {k} is not set" in said}
        assert named, said
        missing |= named
        for name in named:
            monkeypatch.setenv(name, f"value-of-{name}")
    assert main(["check", str(EXAMPLES / example)]) == 0, capsys.readouterr().err
    assert missing == set(KEYS[example])
    out = capsys.readouterr().out
    assert "value-of-" not in out  # no secret is ever shown


Patch = Callable[[dict[str, Any]], None]


def copy_example(example: str, tmp_path: Path, edits: Mapping[str, Patch] | None = None) -> Path:
    """The example copied as a user would, then each named YAML file of it edited (its
    endpoints pointed at the fakes): every layer is read again from the files, as
    ``salon run`` reads them."""
    root = tmp_path / example
    shutil.copytree(EXAMPLES / example, root)
    for name, edit in (edits or {}).items():
        path = root / name
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        edit(data)
        path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    return root


async def serve_example(
    root: Path, bot: str, serve_app: ServeApp, secrets: Mapping[str, str]
) -> BotApp:
    """One bot of a copied example, built as ``salon run`` builds it (its guild layers
    included) and served on its platforms, each ready (Discord) or connected (IRC) when
    this returns."""
    configs = load_config_dir(root)
    key, config = configs.bot(bot)
    app = BotApp(
        key=key,
        config=config,
        root=root,
        secrets=Secrets(dict(secrets)),
        channel_configs=configs.channel_configs(key),
    )
    platforms = app.unattended_platforms()
    for platform in platforms:
        if isinstance(platform, DiscordPlatform):
            platform.guild_ready_timeout = 0.5
    await serve_app(app, platforms)
    for platform in platforms:
        if isinstance(platform, DiscordPlatform):
            await asyncio.wait_for(platform.ready.wait(), 15)
        elif isinstance(platform, IrcPlatform):
            await asyncio.wait_for(platform.wait_connected(), 15)
    return app


async def _start(
    example: str,
    bot: str,
    tmp_path: Path,
    *,
    serve_app: ServeApp,
    secrets: dict[str, str],
    patch: Patch,
) -> tuple[BotApp, DiscordPlatform]:
    """The example copied as a user would, its endpoints pointed at the fakes."""
    root = tmp_path / example
    shutil.copytree(EXAMPLES / example, root)
    key, config = load_config_dir(root).bot(bot)
    data = config.model_dump(exclude_unset=True)
    patch(data)
    app = BotApp(
        key=key,
        config=BotConfig.model_validate(data),
        root=root,
        secrets=Secrets({"DISCORD_TOKEN": "token-123", **secrets}),
    )
    (platform,) = app.unattended_platforms()
    assert isinstance(platform, DiscordPlatform)
    platform.guild_ready_timeout = 0.5
    await serve_app(app, [platform])
    await asyncio.wait_for(platform.ready.wait(), 15)
    return app, platform


@pytest.fixture
async def vendors() -> AsyncIterator[tuple[OpenMeteoFake, ComfyUIFake, PixelLabFake]]:
    async with AsyncExitStack() as stack:
        weather = await stack.enter_async_context(OpenMeteoFake())
        comfy = await stack.enter_async_context(ComfyUIFake())
        pixel = await stack.enter_async_context(PixelLabFake())
        yield weather, comfy, pixel


Vendors = tuple[OpenMeteoFake, ComfyUIFake, PixelLabFake]


def _bob_on_fakes(llm: LLMServer, vendors: Vendors) -> Patch:
    weather, comfy, _ = vendors

    def patch(data: dict[str, Any]) -> None:
        data["providers"]["ollama"]["base_url"] = llm.base_url + "/v1"
        data["providers"]["ollama"]["retries"] = 0
        integrations = data["integrations"]
        integrations["weather"]["base_url"] = weather.base_url
        integrations["comfyui"]["base_url"] = comfy.base_url
        integrations["search"]["base_url"] = llm.base_url  # never asked in these tests
        integrations["nfl"]["base_url"] = llm.base_url

    return patch


async def test_bob_answers_the_weather_in_seattle(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    llm_server.queue(  # Alice's two messages are within the evaluator's min_depth: no call
        Scripted(tool_calls=[("call_1", "get_weather", {"location": "Seattle"})]),
        "It's 52.7 °F and overcast in Seattle right now.",
    )
    secrets = {"SERPAPI_API_KEY": "serp-key"}
    patch = _bob_on_fakes(llm_server, vendors)
    await _start("bob-bot", "bob", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch)
    await fake_discord.post(GENERAL, fake_discord.user("Alice"), "off to Seattle tomorrow")
    await fake_discord.post(GENERAL, fake_discord.user("Robo"), "PLUGH beep")  # another bot
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "what's the weather in Seattle?")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "It's 52.7 °F and overcast in Seattle right now."
    first, second = llm_server.requests  # no evaluator call: Robo's line went first
    assert first.body["model"] == "llama3.1:8b"
    asked = json.dumps(first.body["messages"])
    assert "[channel] Alice: off to Seattle tomorrow" in asked  # each message's source
    assert "PLUGH" not in json.dumps([r.body for r in llm_server.requests])  # 001 leaves
    # other bots' messages out of the context
    assert "get_weather" in [t["function"]["name"] for t in first.body["tools"]]
    result = next(m for m in second.body["messages"] if m["role"] == "tool")
    assert "52.7 °F" in json.dumps(result["content"], ensure_ascii=False)
    assert [r.path for r in vendors[0].requests] == ["/v1/search", "/v1/forecast"]


async def test_bob_answers_the_weather_keyword_with_one_final_pass(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    """``!weather Seattle`` calls the tool without the model; the model then turns the raw
    result into an answer once, with no tools offered (001's keyword path)."""
    llm_server.queue("Seattle: 52.7 °F, overcast. Bring a jacket.")
    secrets = {"SERPAPI_API_KEY": "serp-key"}
    patch = _bob_on_fakes(llm_server, vendors)
    await _start("bob-bot", "bob", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch)
    alice = fake_discord.user("Alice")
    await fake_discord.post(GENERAL, alice, "!weather Seattle")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "Seattle: 52.7 °F, overcast. Bring a jacket."
    (final,) = llm_server.requests
    assert "tools" not in final.body
    assert "52.7" in json.dumps(final.body["messages"], ensure_ascii=False)
    assert [r.path for r in vendors[0].requests] == ["/v1/search", "/v1/forecast"]


async def test_bob_generates_a_castle_on_the_slash_command(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    secrets = {"SERPAPI_API_KEY": "serp-key"}
    patch = _bob_on_fakes(llm_server, vendors)
    app, _ = await _start(
        "bob-bot", "bob", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch
    )
    await fake_discord.command(GENERAL, fake_discord.user("Alice"), "generate", prompt="a castle")

    def image_posts() -> list[dict[str, Any]]:
        return [m for m in fake_discord.channels[GENERAL] if m["attachments"]]

    async with asyncio.timeout(15), fake_discord.sent:
        await fake_discord.sent.wait_for(lambda: bool(image_posts()))
    (post,) = image_posts()
    (attachment,) = post["attachments"]
    assert fake_discord.files[attachment["id"]] == tiny_png(4, 4, 40)
    assert post["content"] == "(generate_image: prompt: a castle)"
    assert llm_server.requests == []  # the command needs no model
    saved = list((tmp_path / "bob-bot" / "data" / "outputs").rglob("*.png"))
    assert len(saved) == 1
    assert saved[0].read_bytes() == tiny_png(4, 4, 40)
    assert app.key == "bob"


async def test_bob_draws_the_replied_to_message_on_the_generate_keyword(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    """``!generate`` written in a reply prepends the replied-to message to the prompt, as
    001's ComfyUI path does (one level), and needs no model."""
    secrets = {"SERPAPI_API_KEY": "serp-key"}
    patch = _bob_on_fakes(llm_server, vendors)
    await _start("bob-bot", "bob", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch)
    alice = fake_discord.user("Alice")
    idea = await fake_discord.post(GENERAL, alice, "a castle at dusk")
    await fake_discord.post(GENERAL, alice, "!generate in watercolour", reply_to=idea)

    def image_posts() -> list[dict[str, Any]]:
        return [m for m in fake_discord.channels[GENERAL] if m["attachments"]]

    async with asyncio.timeout(15), fake_discord.sent:
        await fake_discord.sent.wait_for(lambda: bool(image_posts()))
    (post,) = image_posts()
    assert "a castle at dusk" in post["content"]
    assert "in watercolour" in post["content"]
    assert llm_server.requests == []


def _sprite_on_fakes(llm: LLMServer, vendors: Vendors) -> Patch:
    weather, _, pixel = vendors

    def patch(data: dict[str, Any]) -> None:
        data["providers"]["grok"]["base_url"] = llm.base_url + "/v1"
        data["providers"]["grok"]["retries"] = 0
        integrations = data["integrations"]
        integrations["weather"]["base_url"] = weather.base_url
        integrations["pixellab"]["base_url"] = pixel.base_url
        integrations["pixellab"]["poll_interval"] = 0.01
        integrations["greynoise"]["base_url"] = llm.base_url  # never asked in these tests

    return patch


async def test_the_orchestrator_plans_the_weather_in_seattle(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    plan = {"use_tool": True, "tool": "get_weather", "args": {"location": "Seattle"}}
    llm_server.queue(json.dumps(plan), "The clouds over Seattle whisper: 11.5 °C, overcast.")
    secrets = {"GROK_API_KEY": "xai-key", "PIXELLAB_API_KEY": "px-test-key"}
    patch = _sprite_on_fakes(llm_server, vendors)
    await _start(
        "sprite-orchestrator", "sprite", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch
    )
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "weather in Seattle?")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "The clouds over Seattle whisper: 11.5 °C, overcast."
    asked = next(m for m in fake_discord.channels[GENERAL] if "weather in Seattle?" in m["content"])
    assert answer["message_reference"]["message_id"] == asked["id"]  # 000's message.reply
    first, second = llm_server.requests
    assert first.body["model"] == "grok-4-fast"
    assert first.body["temperature"] == 1.0  # the plan's temperature, then the answer's
    assert second.body["temperature"] == 1.2
    assert first.headers["authorization"] == "Bearer xai-key"
    assert "Now: 11.5 °C" in json.dumps(second.body["messages"], ensure_ascii=False)


async def test_the_orchestrator_answers_directly_when_its_plan_fails_and_fails_in_its_words(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    """000: a planning call that fails falls back to a direct answer; an answer that fails
    gets the ERROR_MESSAGE text, not Salon's own line."""
    llm_server.queue(Scripted(status=500), "The stars say hello.")
    secrets = {"GROK_API_KEY": "xai-key", "PIXELLAB_API_KEY": "px-test-key"}
    patch = _sprite_on_fakes(llm_server, vendors)
    await _start(
        "sprite-orchestrator", "sprite", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch
    )
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "hello?")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "The stars say hello."
    llm_server.queue(Scripted(status=500), Scripted(status=500))
    await ask(fake_discord, GENERAL, alice, "hello again?")
    _, failed = await fake_discord.wait_bot_messages(GENERAL, 2)
    assert failed["content"].startswith("I tried to help, but ran into an issue: ")


async def test_the_orchestrator_posts_a_sprites_directions_with_their_links(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    plan = {"use_tool": True, "tool": "generate_sprite", "args": {"description": "a knight"}}
    llm_server.queue(json.dumps(plan), "Behold, the knight of four winds.")
    secrets = {"GROK_API_KEY": "xai-key", "PIXELLAB_API_KEY": "px-test-key"}
    patch = _sprite_on_fakes(llm_server, vendors)
    await _start(
        "sprite-orchestrator", "sprite", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch
    )
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "make me a knight sprite")
    said = "Behold, the knight of four winds."

    def answered() -> bool:
        return any(m["content"] == said for m in fake_discord.channels[GENERAL])

    async with asyncio.timeout(15), fake_discord.sent:
        await fake_discord.sent.wait_for(answered)
    messages = fake_discord.channels[GENERAL]
    sprite = next(m for m in messages if m["attachments"])
    assert [e["title"] for e in sprite["embeds"]] == ["south", "west", "east", "north"]
    base = vendors[2].base_url
    assert [e["url"] for e in sprite["embeds"]] == [
        f"{base}/files/char-1-{d}.png" for d in ("south", "west", "east", "north")
    ]
    assert sprite["embeds"][0]["description"].count("](") == 4  # every direction linked
    progress = [m for m in messages if "generate_sprite:" in m["content"] and m is not sprite]
    assert [m["content"][:1] for m in progress] == ["✅"]  # one message, edited to its end
    assert "iVBOR" not in json.dumps(llm_server.requests[1].body)  # no image data to Grok


async def test_the_orchestrators_own_env_file_works_as_is(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    """000's optional variables, as its .env sets them, read by the example."""
    seed_env = {
        "BOT_NAME": "Oracle",
        "GROK_MODEL": "grok-3-mini",
        "GROK_TEMPERATURE": "0.7",
        "MAX_REQUESTS_PER_USER_PER_HOUR": "1",
        "ERROR_MESSAGE": "The spirits are silent.",
    }
    llm_server.queue(Scripted(status=500), Scripted(status=500))  # the plan, the answer
    secrets = {"GROK_API_KEY": "xai-key", "PIXELLAB_API_KEY": "px-test-key"}
    patch = _sprite_on_fakes(llm_server, vendors)
    with pytest.MonkeyPatch.context() as env:  # read as the files are, at the start
        for name, value in seed_env.items():
            env.setenv(name, value)
        await _start(
            "sprite-orchestrator",
            "sprite",
            tmp_path,
            serve_app=serve_app,
            secrets=secrets,
            patch=patch,
        )
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "hello?")
    (failed,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert failed["content"] == "The spirits are silent."  # ERROR_MESSAGE
    plan, answer = llm_server.requests
    assert plan.body["model"] == answer.body["model"] == "grok-3-mini"  # GROK_MODEL
    assert plan.body["temperature"] == 0.7  # GROK_TEMPERATURE: the plan's
    assert "You are Oracle" in json.dumps(answer.body["messages"])  # BOT_NAME
    await ask(fake_discord, GENERAL, alice, "hello again?")
    _, limited = await fake_discord.wait_bot_messages(GENERAL, 2)
    assert "you have reached 1 request per hour" in limited["content"]  # the seed's limit
    assert len(llm_server.requests) == 2


async def test_an_admin_clears_the_orchestrators_history(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    """000's clearHistory: ``.history`` with no body, from a member of the example's
    authorized role (Admin), and from nobody else."""
    llm_server.queue(json.dumps({"use_tool": False}), "Hello.")
    llm_server.queue(json.dumps({"use_tool": False}), "Hello again.")
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")
    fake_discord.role_names["501"] = "Admin"  # the guild's roles, as the bot will read them
    fake_discord.roles[alice.id] = ["501"]
    secrets = {"GROK_API_KEY": "xai-key", "PIXELLAB_API_KEY": "px-test-key"}
    patch = _sprite_on_fakes(llm_server, vendors)
    await _start(
        "sprite-orchestrator", "sprite", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch
    )
    await fake_discord.post(GENERAL, bob, "PLUGH before the first clear")
    await fake_discord.post(GENERAL, bob, ".history")  # Bob is no Admin: nothing cleared
    await ask(fake_discord, GENERAL, bob, "one")
    await fake_discord.wait_bot_messages(GENERAL, 1)
    assert "PLUGH" in json.dumps(llm_server.requests[-1].body["messages"])
    await fake_discord.post(GENERAL, alice, ".history")
    await ask(fake_discord, GENERAL, bob, "two")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    asked = json.dumps(llm_server.requests[-1].body["messages"])
    assert "PLUGH" not in asked
    assert "two" in asked


async def test_a_hung_grok_costs_one_30_second_call_before_the_direct_answer(
    fake_discord: DiscordServer,
    llm_server: LLMServer,
    vendors: Vendors,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    """000 makes one call with a 30 s timeout, then falls back: the example's provider
    does not retry (here the timeout is shortened; the retries are the example's)."""
    llm_server.queue(Scripted(fault="hang_before_head"), "The stars say hello.")
    secrets = {"GROK_API_KEY": "xai-key", "PIXELLAB_API_KEY": "px-test-key"}
    on_fakes = _sprite_on_fakes(llm_server, vendors)

    def patch(data: dict[str, Any]) -> None:
        retries = data["providers"]["grok"].get("retries")
        on_fakes(data)
        data["providers"]["grok"]["timeout"] = 0.5
        data["providers"]["grok"].pop("retries")
        if retries is not None:
            data["providers"]["grok"]["retries"] = retries

    await _start(
        "sprite-orchestrator", "sprite", tmp_path, serve_app=serve_app, secrets=secrets, patch=patch
    )
    await ask(fake_discord, GENERAL, fake_discord.user("Alice"), "hello?")
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["content"] == "The stars say hello."
    assert len(llm_server.requests) == 2  # the hung plan once, then the answer
