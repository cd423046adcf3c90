"""The registry of adapters: the five platforms, what each allows a schedule to target,
which run unattended, and that listing them loads no platform's library."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from salon.app import BotApp
from salon.config import BotConfig, Secrets
from salon.llm import FakeProvider
from salon.model import Participant
from salon.platforms.registry import ADAPTERS, names_on, operated, target_problem
from tests.conftest import bot_config

PLATFORMS: dict[str, Any] = {
    "discord": {"token_env": "DISCORD_TOKEN"},
    "irc": {"server": "127.0.0.1", "nick": "salon", "channels": ["#Salon", "&local"]},
    "matrix": {
        "homeserver": "http://127.0.0.1:8008",
        "user_id": "@salon:localhost",
        "access_token_env": "MATRIX_TOKEN",
        "rooms": ["!room:localhost"],
    },
    "slack": {},
}
SECRETS = {
    "DISCORD_TOKEN": "t",
    "MATRIX_TOKEN": "t",
    "SLACK_BOT_TOKEN": "t",
    "SLACK_APP_TOKEN": "t",
}


def _everywhere() -> BotConfig:
    return bot_config(platforms=PLATFORMS)


def test_the_registry_lists_the_five_platforms() -> None:
    assert [a.name for a in ADAPTERS] == ["discord", "irc", "matrix", "slack", "terminal"]


def test_a_bot_is_on_the_terminal_and_the_platforms_its_config_names() -> None:
    assert names_on(bot_config()) == ["terminal"]
    assert names_on(bot_config(platforms={"irc": PLATFORMS["irc"]})) == ["irc", "terminal"]
    assert names_on(_everywhere()) == [a.name for a in ADAPTERS]


@pytest.mark.parametrize(
    ("target", "refused"),
    [
        ("irc:#salon", None),  # joined, whatever the case
        ("irc:&LOCAL", None),
        ("irc:alice", None),  # a person, not a channel
        ("irc:#elsewhere", "this bot is not in #elsewhere (it joins: #Salon, &local)"),
        ("discord:123456", None),
        ("discord:general", "'discord:general' is not a Discord channel: use the channel's id"),
        ("matrix:!room:localhost", None),
        ("slack:C0123", None),
        ("terminal:local", None),
        ("#salon", "'#salon' is not a channel: write platform:channel, e.g. irc:#salon"),
        ("irc:", "'irc:' is not a channel: write platform:channel"),
        ("telegram:1", "this bot is not on 'telegram' (it is on: discord, irc, matrix,"),
    ],
)
def test_each_adapter_says_where_a_schedule_may_post(target: str, refused: str | None) -> None:
    config = _everywhere()
    problem = target_problem(config, names_on(config), target, "")
    if refused is None:
        assert problem is None
    else:
        assert problem is not None
        assert problem.startswith(refused)


def test_a_platform_the_config_does_not_name_is_refused_as_before() -> None:
    config = bot_config()
    problem = target_problem(config, names_on(config), "discord:123", "terminal:local")
    assert problem == "this bot is not on 'discord' (it is on: terminal)"


def test_who_writes_in_the_terminal_is_the_operator() -> None:
    assert operated("terminal:local")
    assert not operated("irc:#salon")
    assert not operated("memory:general")
    assert not operated("terminal")


def test_the_terminal_may_set_a_schedule_anywhere_others_only_where_they_are(
    tmp_path: Path,
) -> None:
    config = bot_config(data_dir=str(tmp_path / "data"), platforms={"irc": PLATFORMS["irc"]})
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}))
    alice = Participant("alice", "Alice")
    assert app.channels.schedule_target("terminal:local", "irc:#salon", alice) is None
    assert app.channels.schedule_target("irc:#salon", "irc:#salon", alice) is None
    refused = app.channels.schedule_target("irc:#salon", "irc:&local", alice)
    assert refused is not None
    assert refused.startswith("a schedule can only post in the channel")


def test_salon_run_builds_the_configured_platforms_in_registry_order(tmp_path: Path) -> None:
    config = bot_config(data_dir=str(tmp_path / "data"), platforms=PLATFORMS)
    app = BotApp(
        key="salon", config=config, root=tmp_path, secrets=Secrets(SECRETS), provider=FakeProvider()
    )
    built = app.unattended_platforms()
    assert [p.name for p in built] == ["discord", "irc", "matrix", "slack"]


def test_listing_the_platforms_loads_none_of_their_libraries() -> None:
    code = (
        "import sys\n"
        "from salon.platforms.registry import ADAPTERS\n"
        "import salon.app\n"
        "libraries = {'discord', 'pydle', 'mautrix', 'slack_sdk', 'slack_bolt', 'aiohttp'}\n"
        "print(sorted(libraries & {m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
