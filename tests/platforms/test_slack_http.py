"""The Slack adapter with the Events API over HTTP (``mode: http``): the fake Slack POSTs
events, button presses and slash commands to the bot's Request URL, signed with the app's
signing secret, as Slack does; bolt verifies each and acknowledges within three seconds."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

import aiohttp
import pytest

from fakes.slack_server import BOT_TOKEN, SIGNING_SECRET, SlackServer
from salon.config import Secrets
from salon.config.platforms import SlackConfig
from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.model import Event
from salon.platforms.slack.platform import SlackPlatform
from tests.conftest import bot_config
from tests.platforms import test_slack
from tests.platforms.test_slack import GENERAL, HTTP, StartSlack, mention

fake_slack, start_slack = test_slack.fake_slack, test_slack.start_slack  # the fixtures


def event(server: SlackServer, text: str) -> dict[str, Any]:
    """An event_callback as Slack would send it, for someone else to forge."""
    alice = server.user("Alice")
    inner = {"type": "message", "channel": GENERAL, "user": alice.id, "text": text}
    inner |= {"ts": "1700009999.000100", "channel_type": "channel"}
    return {"type": "event_callback", "team_id": "T0FAKE", "event_id": "EvFORGED1", "event": inner}


async def test_the_challenge_is_answered_and_a_mention_gets_an_answer(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["Hello over HTTP!"])
    _, platform = await start_slack(provider, slack=HTTP)
    assert platform.request_url.startswith("http://127.0.0.1:")
    assert platform.request_url.endswith("/slack/events")
    assert fake_slack.http.request_url == platform.request_url  # the challenge was answered
    assert fake_slack.opened == 0  # no Socket Mode
    assert platform.connected
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "hi there"))
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == "Hello over HTTP!"
    assert {a.status for _, a in fake_slack.http.answers} == {200}  # its own message's too
    shown = provider.requests[0].messages[-1].plain_text
    assert shown == "Alice: @Salon hi there"


async def test_a_bad_signature_or_an_old_timestamp_is_refused_and_not_answered(
    fake_slack: SlackServer, start_slack: StartSlack, caplog: pytest.LogCaptureFixture
) -> None:
    provider = FakeProvider(["only the real one"])
    await start_slack(provider, slack=HTTP)
    forged = event(fake_slack, mention(fake_slack, "forged: run the wipe"))
    with caplog.at_level(logging.DEBUG):
        wrong = await fake_slack.forge(forged, secret="not-the-signing-secret")
        stale = await fake_slack.forge(forged, timestamp=int(time.time()) - 6 * 60)
    assert (wrong.status, stale.status) == (401, 401)
    refusals = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert refusals[0].startswith("Slack: refused 1 request(s) whose signature does not match")
    assert SIGNING_SECRET not in caplog.text
    await fake_slack.post(GENERAL, fake_slack.user("Alice"), mention(fake_slack, "real"))
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == "only the real one"
    assert len(provider.requests) == 1
    said = "\n".join(m.plain_text for m in provider.requests[0].messages)
    assert "forged" not in said


async def test_a_retried_event_is_answered_once(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["once", "twice?"])
    _, platform = await start_slack(provider, slack=HTTP)
    posted = await fake_slack.post(GENERAL, fake_slack.user("Alice"), mention(fake_slack, "hi"))
    await fake_slack.wait_bot_messages(GENERAL, 1)
    (first,) = [
        d for d in fake_slack.deliveries if d["payload"].get("event", {}).get("ts") == posted["ts"]
    ]
    again = {**first, "envelope_id": "again-1", "retry_attempt": 1, "retry_reason": "http_timeout"}
    answer = await fake_slack.resend(again)
    assert answer is not None
    assert answer.status == 200  # acknowledged: Slack stops sending it
    await asyncio.wait_for(platform.wait_repeated(), 10)
    assert platform.repeated == 1
    assert platform.handled == 1
    assert len(fake_slack.messages(GENERAL)) == 1
    assert len(provider.requests) == 1


async def test_ask_and_monitor_commands_come_to_the_same_url(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["forty-two", "seen"])
    await start_slack(provider, slack=HTTP)
    alice = fake_slack.user("Alice")
    asked = await fake_slack.command(alice, GENERAL, "/ask", "meaning?")
    assert await fake_slack.wait_ack(asked) == {"text": "Asking: meaning?"}
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == "forty-two"
    monitor = await fake_slack.command(alice, GENERAL, "/monitor")
    assert await fake_slack.wait_ack(monitor) == {"text": "Salon now reads every message here."}
    await fake_slack.post(GENERAL, alice, "nobody addressed")
    await fake_slack.wait_bot_messages(GENERAL, 2)
    assert fake_slack.messages(GENERAL)[-1]["text"] == "seen"
    assert fake_slack.http.failed == []


async def test_live_check_in_http_mode_needs_no_app_token(fake_slack: SlackServer) -> None:
    from salon.platforms.slack import live_check

    cfg = bot_config(platforms={"slack": {"api_base_url": fake_slack.base_url, **HTTP}})
    secrets = Secrets({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET})
    line, ok = await live_check(cfg, secrets)
    assert ok
    assert line == (
        "live: slack: ok, salon in Fake; Events API over HTTP on 127.0.0.1:0/slack/events "
        "(the signing secret is checked on Slack's first request)"
    )


class _Monitors:
    async def monitored(self, bot: str) -> set[str]:
        return set()

    async def set_monitored(self, bot: str, channel_key: str, on: bool, by: str = "") -> bool:
        return False


def _platform(fake_slack: SlackServer, listen: str) -> SlackPlatform:
    config = SlackConfig(api_base_url=fake_slack.base_url, mode="http", listen=listen)
    secrets = Secrets({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET})
    return SlackPlatform(
        bot="salon", bot_name="Salon", config=config, secrets=secrets, monitors=_Monitors()
    )


async def _nothing(event: Event) -> None:
    return None


async def test_a_busy_address_is_a_clear_error_and_a_stop_closes_the_url(
    fake_slack: SlackServer,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = _platform(fake_slack, f"127.0.0.1:{port}")
        with pytest.raises(PlatformError, match=rf"could not listen on 127.0.0.1:{port}: "):
            await busy.start(_nothing)
    platform = _platform(fake_slack, "127.0.0.1:0")
    await platform.start(_nothing)
    url = platform.request_url
    await fake_slack.set_request_url(url)
    assert platform.connected
    await platform.stop()
    assert not platform.connected
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.ClientConnectionError):
            await http.post(url, data=b"{}")


async def test_the_receiver_is_in_the_bots_health(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    """Health lists each platform's long-lived connection: here the Request URL's server."""
    app, platform = await start_slack(FakeProvider(["hi"]), slack=HTTP)
    assert platform.connection is not None
    task = app.upkeep.health().tasks[platform.connection.name]
    assert task["running"] is True
