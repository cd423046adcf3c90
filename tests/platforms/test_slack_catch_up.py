"""Nothing addressed to the bot is lost on Slack: Socket Mode does not deliver again what
happened while the app had no connection, so a mention made while the bot was stopped, or
while its socket was down, is read back (``conversations.history``) and answered once;
one older than ``catch_up.max_age`` is not; a post Slack could not take (503) is tried
again and shows once; an answer a stop cut off after its first message showed (found by
its key in the message metadata) is closed with one line, not repeated."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fakes.slack_server import APP_TOKEN, BOT_TOKEN, SlackServer, SlackUser
from salon.app import BotApp
from salon.config import Secrets
from salon.errors import PlatformError
from salon.llm import FakeProvider
from salon.llm.base import LLMRequest, StreamEvent, TextDelta
from salon.platforms.slack.client import build_web_client, call
from salon.platforms.slack.platform import SlackPlatform
from tests.conftest import bot_config

WAIT = 20.0
GENERAL = "C0GENERAL"


@pytest.fixture
async def fake_slack() -> AsyncIterator[SlackServer]:
    server = SlackServer(ack_timeout=1.0)
    await server.start()
    yield server
    await server.stop()


def said(server: SlackServer, channel: str) -> list[str]:
    return [m["text"] for m in server.messages(channel)]


async def mention(
    server: SlackServer, channel: str, user: SlackUser, text: str, **where: Any
) -> dict[str, Any]:
    return await server.post(channel, user, f"<@{server.bot.id}> {text}", **where)


def make_app(fake: SlackServer, tmp_path: Path, provider: FakeProvider, **config: Any) -> BotApp:
    settings = bot_config(
        data_dir=str(tmp_path / "data"),
        platforms={"slack": {"api_base_url": fake.base_url}},
        **config,
    )
    secrets = Secrets({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN})
    return BotApp(key="salon", config=settings, root=tmp_path, secrets=secrets, provider=provider)


class Running:
    """A bot app serving the fake Slack until ``stop``."""

    def __init__(self, app: BotApp, fake: SlackServer) -> None:
        self.app = app
        self.fake = fake
        self.until = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> SlackPlatform:
        await self.app.__aenter__()
        (platform,) = self.app.unattended_platforms()
        assert isinstance(platform, SlackPlatform)
        self.task = asyncio.create_task(self.app.serve(self.until, [platform]))
        await asyncio.wait_for(platform.ready.wait(), WAIT)
        await self.fake.connected(WAIT)
        return platform

    async def stop(self) -> None:
        self.until.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, WAIT)
        await self.app.__aexit__(None, None, None)
        await self.fake.disconnected(WAIT)


async def caught_up(app: BotApp, count: int) -> None:
    """Until the bot's read-back handed ``count`` messages on, and they were handled."""
    delivery = app.agent.delivery
    assert delivery is not None
    await asyncio.wait_for(delivery.wait_caught_up(count), WAIT)
    await app.agent.wait_idle()


async def test_a_mention_made_while_the_bot_was_stopped_is_answered_once_at_its_start(
    fake_slack: SlackServer, tmp_path: Path
) -> None:
    alice = fake_slack.user("Alice")
    first = Running(make_app(fake_slack, tmp_path, FakeProvider(["Hello Alice."])), fake_slack)
    await first.start()
    await mention(fake_slack, GENERAL, alice, "hi")
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await first.app.agent.wait_idle()
    await first.stop()

    await mention(fake_slack, GENERAL, alice, "are you there?")  # nobody is connected
    await fake_slack.post(GENERAL, fake_slack.user("Bob"), "just chatting")
    assert len(fake_slack.missed) == 2

    provider = FakeProvider(["Yes, back now."])
    again = Running(make_app(fake_slack, tmp_path, provider), fake_slack)
    await again.start()
    await fake_slack.wait_bot_messages(GENERAL, 2)
    await caught_up(again.app, 2)
    await again.stop()
    assert said(fake_slack, GENERAL) == ["Hello Alice.", "Yes, back now."]
    (request,) = provider.requests
    assert "are you there?" in request.messages[-1].plain_text


async def test_a_thread_reply_and_a_direct_message_made_while_stopped_are_answered_there(
    fake_slack: SlackServer, tmp_path: Path
) -> None:
    alice = fake_slack.user("Alice")
    dm = fake_slack.im(alice)
    first = Running(
        make_app(fake_slack, tmp_path, FakeProvider(["In the thread.", "Hi."])), fake_slack
    )
    await first.start()
    root = await fake_slack.post(GENERAL, alice, "a plan")
    await mention(fake_slack, GENERAL, alice, "thoughts?", thread_ts=root["ts"])
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await fake_slack.post(dm, alice, "hello")
    await fake_slack.wait_bot_messages(dm, 1)
    await first.app.agent.wait_idle()
    await first.stop()

    await mention(fake_slack, GENERAL, alice, "and now?", thread_ts=root["ts"])
    await fake_slack.post(dm, alice, "still there?")  # a direct message needs no mention

    provider = FakeProvider(["Thread again.", "Still here."])
    again = Running(make_app(fake_slack, tmp_path, provider), fake_slack)
    await again.start()
    await fake_slack.wait_bot_messages(GENERAL, 2)
    await fake_slack.wait_bot_messages(dm, 2)
    await caught_up(again.app, 2)
    await again.stop()
    replies = fake_slack.messages(GENERAL)
    assert [m.get("thread_ts") for m in replies] == [root["ts"], root["ts"]]
    assert len(fake_slack.messages(dm)) == 2
    asked = sorted(r.messages[-1].plain_text.splitlines()[-1] for r in provider.requests)
    assert asked == ["Alice: @Salon and now?", "Alice: still there?"]
    assert len(provider.requests) == 2


@pytest.mark.parametrize("reason", [None, "refresh_requested"])
async def test_a_mention_made_while_the_socket_was_down_is_answered_once_when_it_is_back(
    fake_slack: SlackServer, tmp_path: Path, reason: str | None
) -> None:
    """Slack closes the socket, with its ``disconnect`` envelope or without (a network
    cut), and hands out no new one for a while."""
    alice = fake_slack.user("Alice")
    provider = FakeProvider(["First.", "Missed one answered."])
    running = Running(make_app(fake_slack, tmp_path, provider), fake_slack)
    platform = await running.start()
    await mention(fake_slack, GENERAL, alice, "hi")
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await running.app.agent.wait_idle()

    fake_slack.pause_connections()  # Slack hands out no new connection for now
    await fake_slack.drop(reason)
    await fake_slack.disconnected(WAIT)
    await mention(fake_slack, GENERAL, alice, "did you see this?")  # in the gap
    assert len(fake_slack.missed) == 1
    fake_slack.open_connections()
    await fake_slack.connected(WAIT, times=2)

    await fake_slack.wait_bot_messages(GENERAL, 2)
    await caught_up(running.app, 1)
    await running.stop()
    assert said(fake_slack, GENERAL) == ["First.", "Missed one answered."]
    assert len(provider.requests) == 2
    assert platform.connections >= 2


async def test_a_mention_older_than_the_window_is_not_answered_after_a_restart(
    fake_slack: SlackServer, tmp_path: Path
) -> None:
    alice = fake_slack.user("Alice")
    random = fake_slack.channel("C0RANDOM", "random")
    fake_slack.clock_offset = -3 * 3600.0  # the bot ran three hours ago
    first = Running(make_app(fake_slack, tmp_path, FakeProvider(["Hello."])), fake_slack)
    await first.start()
    await mention(fake_slack, GENERAL, alice, "hi")
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await first.app.agent.wait_idle()
    await first.stop()

    fake_slack.clock_offset = -2 * 3600.0
    await mention(fake_slack, GENERAL, alice, "two hours ago: anyone?")
    fake_slack.clock_offset = 0.0

    provider = FakeProvider(["should not be said"])
    again = Running(make_app(fake_slack, tmp_path, provider), fake_slack)
    await again.start()
    await fake_slack.wait_for(lambda: read_back(fake_slack, GENERAL), WAIT)
    await mention(fake_slack, random, alice, "now?")  # answered: the bot is up
    await fake_slack.wait_bot_messages(random, 1)
    await again.app.agent.wait_idle()
    await again.stop()
    assert said(fake_slack, GENERAL) == ["Hello."]
    assert len(provider.requests) == 1


def read_back(fake: SlackServer, channel: str) -> bool:
    """Whether the bot read ``channel`` from a point on (its catch-up)."""
    return any(
        method == "conversations.history" and p.get("channel") == channel and p.get("oldest")
        for method, _, p in fake.calls
    )


async def test_a_post_slack_could_not_take_is_tried_again_and_shows_once(
    fake_slack: SlackServer, tmp_path: Path
) -> None:
    running = Running(make_app(fake_slack, tmp_path, FakeProvider(["Made it."])), fake_slack)
    await running.start()
    fake_slack.fail("chat.postMessage", status=503)
    await mention(fake_slack, GENERAL, fake_slack.user("Alice"), "hi")
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await running.app.agent.wait_idle()
    await running.stop()
    assert said(fake_slack, GENERAL) == ["Made it."]
    posts = [method for method, _, _ in fake_slack.calls if method == "chat.postMessage"]
    assert len(posts) == 2


async def test_a_post_that_may_have_gone_through_is_not_posted_again(
    fake_slack: SlackServer, tmp_path: Path
) -> None:
    """A 500 may come after Slack posted, and Slack does not de-duplicate posts: the
    answer is not tried again (the failure is said instead)."""
    running = Running(make_app(fake_slack, tmp_path, FakeProvider(["Only once."])), fake_slack)
    await running.start()
    fake_slack.fail("chat.postMessage", status=500)
    await mention(fake_slack, GENERAL, fake_slack.user("Alice"), "hi")
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await running.app.agent.wait_idle()
    await running.stop()
    tries = [
        p for m, _, p in fake_slack.calls if m == "chat.postMessage" and p["text"] == "Only once."
    ]
    assert len(tries) == 1
    (note,) = said(fake_slack, GENERAL)
    assert "could not answer" in note


async def test_a_post_that_never_reached_slack_is_transient() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    web = build_web_client(BOT_TOKEN, base_url=f"http://127.0.0.1:{port}/api/", wait_max=1)
    with pytest.raises(PlatformError) as refused:
        await call("post", web.chat_postMessage(channel=GENERAL, text="hi"), repeatable=False)
    assert refused.value.transient
    assert "could not reach Slack to post" in str(refused.value)


async def test_a_post_whose_connection_broke_after_slack_took_it_is_not_sent_again(
    fake_slack: SlackServer,
) -> None:
    """slack_sdk tries a call again after a connection lost mid-request; Slack does not
    de-duplicate posts, so a post is not (it shows once), while a read still is."""
    web = build_web_client(BOT_TOKEN, base_url=fake_slack.base_url, wait_max=1)
    fake_slack.cut("chat.postMessage")
    with pytest.raises(PlatformError) as broke:
        await call("post", web.chat_postMessage(channel=GENERAL, text="hi"), repeatable=False)
    assert not broke.value.transient
    assert said(fake_slack, GENERAL) == ["hi"]
    assert [m for m, _, _ in fake_slack.calls] == ["chat.postMessage"]

    fake_slack.cut("conversations.history")
    read = await call("read", web.conversations_history(channel=GENERAL))
    assert [m["text"] for m in read["messages"]] == ["hi"]
    assert [m for m, _, _ in fake_slack.calls][1:] == ["conversations.history"] * 2


async def test_an_answer_whose_connection_broke_after_slack_took_it_shows_once(
    fake_slack: SlackServer, tmp_path: Path
) -> None:
    running = Running(make_app(fake_slack, tmp_path, FakeProvider(["Only once."])), fake_slack)
    await running.start()
    fake_slack.cut("chat.postMessage")
    await mention(fake_slack, GENERAL, fake_slack.user("Alice"), "hi")
    await fake_slack.wait_bot_messages(GENERAL, 2)  # the answer, and the failure said
    await running.app.agent.wait_idle()
    await running.stop()
    answer, note = said(fake_slack, GENERAL)
    assert answer == "Only once."
    assert "could not answer" in note


class Hanging(FakeProvider):
    """Streams its first paragraph, then writes on until the stop cancels it."""

    def __init__(self, first: str) -> None:
        super().__init__()
        self.first = first
        self.writing = asyncio.Event()

    async def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        if self.first:
            yield TextDelta(self.first)
        self.writing.set()
        await asyncio.Event().wait()  # never ends on its own
        yield TextDelta("never")


@pytest.mark.parametrize("in_thread", [False, True], ids=["channel", "thread"])
async def test_an_answer_a_stop_cut_off_after_it_showed_is_closed_not_repeated(
    fake_slack: SlackServer, tmp_path: Path, in_thread: bool
) -> None:
    alice = fake_slack.user("Alice")
    where: dict[str, Any] = {}
    if in_thread:
        root = await fake_slack.post(GENERAL, alice, "a plan")
        where["thread_ts"] = root["ts"]
    for n in range(3):  # others talk in between: the answer is found among them
        await fake_slack.post(GENERAL, fake_slack.user("Bob"), f"aside {n}", **where)
    hanging = Hanging("The first paragraph.\n\n")
    first = Running(make_app(fake_slack, tmp_path, hanging, shutdown_grace=0.2), fake_slack)
    await first.start()
    await mention(fake_slack, GENERAL, alice, "a long question", **where)
    (shown,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    await first.stop()  # the grace runs out: the answer is cut

    provider = FakeProvider(["must not come"])
    again = Running(make_app(fake_slack, tmp_path, provider), fake_slack)
    await again.start()
    await fake_slack.wait_bot_messages(GENERAL, 2)
    await again.app.agent.wait_idle()
    await again.stop()
    first_line, closing = said(fake_slack, GENERAL)
    assert first_line == "The first paragraph."
    assert "cut off" in closing
    assert provider.requests == []
    if in_thread:
        assert fake_slack.messages(GENERAL)[1].get("thread_ts") == where["thread_ts"]
    assert shown["metadata"]["event_type"] == "salon_answer"  # found by its key there
    assert shown["metadata"]["event_payload"]["key"]


async def test_an_answer_a_stop_cut_off_before_it_showed_is_answered_at_the_next_start(
    fake_slack: SlackServer, tmp_path: Path
) -> None:
    alice = fake_slack.user("Alice")
    hanging = Hanging("")
    first = Running(make_app(fake_slack, tmp_path, hanging, shutdown_grace=0.2), fake_slack)
    await first.start()
    await mention(fake_slack, GENERAL, alice, "a long question")
    await asyncio.wait_for(hanging.writing.wait(), WAIT)
    await first.stop()
    assert said(fake_slack, GENERAL) == []

    provider = FakeProvider(["The whole answer."])
    again = Running(make_app(fake_slack, tmp_path, provider), fake_slack)
    await again.start()
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await caught_up(again.app, 0)
    await again.stop()
    assert said(fake_slack, GENERAL) == ["The whole answer."]
    assert len(provider.requests) == 1
