"""The Slack adapter driving the real slack_bolt / slack_sdk against a loopback fake of
Slack's Web API and Socket Mode (``fakes/slack_server.py``); the Events API over HTTP is
``test_slack_http.py``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from fakes.llm_server import LLMServer, Scripted
from fakes.slack_server import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackServer
from salon.app import BotApp
from salon.config import Secrets
from salon.errors import PlatformError
from salon.llm import FakeProvider, FakeReply
from salon.model import ChannelRef, Participant, ToolCall
from salon.platforms.base import Capability
from salon.platforms.slack.platform import SlackPlatform
from tests.conftest import ServeApp, bot_config
from tests.platforms.conftest import real_provider

GENERAL = "C0GENERAL"

StartSlack = Callable[..., Any]


@pytest.fixture
async def fake_slack() -> AsyncIterator[SlackServer]:
    """The fake Slack; a test fails when a bot message would have notified a channel or
    a group (``<!channel>``, ``<!here>``, ``<!everyone>``, ``<!subteam^…>``), or when an
    event went unacknowledged for a second (Slack allows three)."""
    server = SlackServer(ack_timeout=1.0)
    await server.start()
    yield server
    await server.stop()
    assert not server.pings, f"the bot notified what it may not: {server.pings}"
    assert server.redelivered == 0, "an event was not acknowledged within the timeout"


@pytest.fixture
def start_slack(fake_slack: SlackServer, tmp_path: Path, serve_app: ServeApp) -> StartSlack:
    async def start(
        provider: FakeProvider, extra_servers: Any = (), **config: Any
    ) -> tuple[BotApp, SlackPlatform]:
        slack = config.pop("slack", {})
        cfg = bot_config(
            data_dir=str(tmp_path / "data"),
            platforms={"slack": {"api_base_url": fake_slack.base_url, **slack}},
            **config,
        )
        secrets = Secrets(
            {
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_APP_TOKEN": APP_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            }
        )
        app = BotApp(
            key="salon",
            config=cfg,
            root=tmp_path,
            secrets=secrets,
            provider=provider,
            extra_servers=extra_servers,
        )
        (platform,) = app.unattended_platforms()
        assert isinstance(platform, SlackPlatform)
        await serve_app(app, [platform])
        if slack.get("mode") == "http":  # the operator pastes the Request URL in
            await asyncio.wait_for(platform.ready.wait(), 15)
            await fake_slack.set_request_url(platform.request_url)
        else:
            await fake_slack.connected()
        return app, platform

    return start


def mention(server: SlackServer, text: str) -> str:
    return f"<@{server.bot.id}> {text}"


def history_reads(server: SlackServer) -> int:
    """Requests filling the history kept (a read-back after a gap names ``oldest``)."""
    reads = ("conversations.history", "conversations.replies")
    return sum(1 for method, _, p in server.calls if method in reads and "oldest" not in p)


async def test_a_mention_gets_an_answer_with_readable_names(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["Hello Alice!"])
    await start_slack(provider)
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, "just talking &amp; such")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "hi there"))
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == "Hello Alice!"
    assert "thread_ts" not in reply
    shown = provider.requests[0].messages[-1].plain_text
    assert shown == "Alice: just talking & such\nAlice: @Salon hi there"


async def test_group_mentions_and_dates_reach_the_model_as_people_read_them(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    """Slack writes a user group as ``<!subteam^ID|@handle>`` (the label has its ``@``)
    and a date as ``<!date^ts^format|fallback>``; ``<!here>`` may carry a label too."""
    provider = FakeProvider(["noted"])
    await start_slack(provider)
    said = (
        "<!subteam^S0DEVS|@devs> ship it by <!date^1392734382^{date_short}|Feb 18, 2014>, "
        "<!here|@here> and <!channel>; <!subteam^S0OPS> too"
    )
    await fake_slack.post(GENERAL, fake_slack.user("Alice"), mention(fake_slack, said))
    await fake_slack.wait_bot_messages(GENERAL, 1)
    shown = provider.requests[0].messages[-1].plain_text
    assert shown == ("Alice: @Salon @devs ship it by Feb 18, 2014, @here and @channel; @S0OPS too")


async def test_a_direct_message_is_answered_without_a_mention_and_others_are_not(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["in private"])
    await start_slack(provider)
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, "nobody addressed here")
    dm = fake_slack.im(alice)
    await fake_slack.post(dm, alice, "just us")
    (reply,) = await fake_slack.wait_bot_messages(dm, 1)
    assert reply["text"] == "in private"
    assert fake_slack.messages(GENERAL) == []
    assert len(provider.requests) == 1


async def test_a_thread_is_its_own_context_continuing_its_root(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["in the thread"])
    await start_slack(provider)
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, "unrelated chatter")
    root = await fake_slack.post(GENERAL, alice, "a question about soup")
    await fake_slack.post(GENERAL, alice, "more chatter")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "any ideas?"), thread_ts=root["ts"])
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["thread_ts"] == root["ts"]  # answered in the thread
    shown = provider.requests[0].messages[-1].plain_text
    assert shown == "Alice: a question about soup\nAlice: @Salon any ideas?"


async def test_a_pinned_config_is_applied_and_edits_and_deletes_reach_the_next_context(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["one", "two"])
    await start_slack(provider, system_prompt="base")
    alice = fake_slack.user("Alice")
    config = await fake_slack.post(GENERAL, alice, ".config\n---\nsystem_prompt: pinned")
    await fake_slack.pin(GENERAL, config["ts"], alice)
    typo = await fake_slack.post(GENERAL, alice, "I like tee")
    gone = await fake_slack.post(GENERAL, alice, "something regretted")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "hello"))
    await fake_slack.wait_bot_messages(GENERAL, 1)
    assert provider.requests[0].system == "pinned"
    await fake_slack.edit(GENERAL, typo["ts"], "I like tea")
    await fake_slack.delete(GENERAL, gone["ts"])
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "again"))
    await fake_slack.wait_bot_messages(GENERAL, 2)
    second = "\n".join(m.plain_text for m in provider.requests[1].messages)
    assert "I like tea" in second
    assert "tee" not in second
    assert "regretted" not in second


async def test_pins_are_read_once_until_a_pin_or_an_edit_changes_them(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["one", "two", "three", "four"])
    await start_slack(provider, system_prompt="base")
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "hello"))
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "still there?"))
    await fake_slack.wait_bot_messages(GENERAL, 2)
    assert [m for m, _, _ in fake_slack.calls].count("pins.list") == 1
    config = await fake_slack.post(GENERAL, alice, ".config\n---\nsystem_prompt: pinned")
    await fake_slack.pin(GENERAL, config["ts"], alice)
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "and now?"))
    await fake_slack.wait_bot_messages(GENERAL, 3)
    assert provider.requests[2].system == "pinned"
    await fake_slack.edit(GENERAL, config["ts"], ".config\n---\nsystem_prompt: edited")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "and now?"))
    await fake_slack.wait_bot_messages(GENERAL, 4)
    assert provider.requests[3].system == "edited"


# Slack's Events API over HTTP (``mode: http``) instead of Socket Mode: the same events,
# buttons and commands, POSTed by the fake to the bot's Request URL.
HTTP = {"mode": "http", "listen": "127.0.0.1:0"}


@pytest.mark.parametrize("slack", [{}, HTTP], ids=["socket", "http"])
async def test_approval_buttons_refuse_someone_else_and_take_the_requester(
    fake_slack: SlackServer, start_slack: StartSlack, slack: dict[str, str]
) -> None:
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    ran: list[str] = []
    provider = FakeProvider(
        [FakeReply(calls=(ToolCall("c1", "wipe", {"target": "cache"}),)), "Wiped."]
    )
    _, platform = await start_slack(
        provider,
        extra_servers=[in_process(danger_server(ran), "danger")],
        tool_output_visible=False,
        slack=slack,
    )
    alice, bob = fake_slack.user("Alice"), fake_slack.user("Bob")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "wipe the cache"))
    (prompt,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert "wants to run wipe (target: cache)" in prompt["text"]
    buttons = {
        e["text"]["text"]: (e["action_id"], e["value"])
        for block in prompt["blocks"]
        if block["type"] == "actions"
        for e in block["elements"]
    }
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    await fake_slack.click(bob, GENERAL, prompt["ts"], *buttons["Approve"])
    await fake_slack.wait_for(lambda: len(fake_slack.responses) == 1)
    refusal = fake_slack.responses[0]
    assert refusal["text"] == "Only Alice can answer this."
    assert refusal["response_type"] == "ephemeral"
    assert ran == []
    await fake_slack.click(alice, GENERAL, prompt["ts"], *buttons["Approve"])
    await fake_slack.wait_bot_messages(GENERAL, 2)
    assert ran == ["cache"]
    closed = fake_slack.messages(GENERAL)[0]
    assert "Approved by Alice." in closed["text"]
    assert all(b["type"] != "actions" for b in closed["blocks"])  # no buttons left
    assert fake_slack.http.failed == []  # over HTTP, every request was answered


async def test_an_approval_of_long_arguments_shows_a_preview_and_the_whole_in_its_thread(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    """Block Kit refuses a section over 3,000 characters (``invalid_blocks``): the prompt
    shows the start of the request, its thread the whole of it."""
    from tests.platforms.test_approvals import danger_server
    from tests.tools.conftest import in_process

    ran: list[str] = []
    target = " ".join(f"part{i}&" for i in range(1200))  # 9,000 characters, more escaped
    provider = FakeProvider([FakeReply(calls=(ToolCall("c1", "wipe", {"target": target}),)), "Ok."])
    _, platform = await start_slack(
        provider, extra_servers=[in_process(danger_server(ran), "danger")]
    )
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "wipe all of it"))
    await asyncio.wait_for(platform.wait_prompts(1), 10)
    prompt = fake_slack.messages(GENERAL)[0]
    (section, _) = prompt["blocks"]
    assert "wants to run wipe (target: part0&amp; part1&amp;" in section["text"]["text"]
    assert "part1199" not in section["text"]["text"]

    def thread() -> str:
        replies = [m for m in fake_slack.messages(GENERAL) if m["ts"] != prompt["ts"]]
        assert all(m.get("thread_ts") == prompt["ts"] for m in replies)
        return " ".join(m["text"] for m in replies).replace("&amp;", "&")

    await fake_slack.wait_for(lambda: "part1199&" in thread())
    assert target in " ".join(thread().split())
    buttons = {
        e["text"]["text"]: (e["action_id"], e["value"])
        for block in prompt["blocks"]
        if block["type"] == "actions"
        for e in block["elements"]
    }
    await fake_slack.click(alice, GENERAL, prompt["ts"], *buttons["Approve"])
    await fake_slack.wait_for(lambda: ran == [target])
    closed = fake_slack.messages(GENERAL)[0]
    assert "Approved by Alice." in closed["blocks"][0]["text"]["text"]


async def test_monitor_command_makes_the_bot_read_everything(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["seen"])
    await start_slack(provider)
    alice = fake_slack.user("Alice")
    envelope = await fake_slack.command(alice, GENERAL, "/monitor")
    answer = await fake_slack.wait_ack(envelope)
    assert answer == {"text": "Salon now reads every message here."}
    await fake_slack.post(GENERAL, alice, "nobody addressed")
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == "seen"


async def test_ask_command_asks_one_question(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["forty-two"])
    await start_slack(provider)
    envelope = await fake_slack.command(fake_slack.user("Alice"), GENERAL, "/ask", "meaning?")
    assert await fake_slack.wait_ack(envelope) == {"text": "Asking: meaning?"}
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == "forty-two"


async def test_what_the_model_writes_cannot_notify_a_channel_or_a_group(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    said = "<!channel> <!here> <!everyone> <!subteam^S123|devs> @channel & done"
    provider = FakeProvider([said])
    await start_slack(provider)
    await fake_slack.post(GENERAL, fake_slack.user("Alice"), mention(fake_slack, "shout"))
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == (
        "&lt;!channel&gt; &lt;!here&gt; &lt;!everyone&gt; &lt;!subteam^S123|devs&gt; "
        "@channel &amp; done"
    )
    assert fake_slack.pings == []  # and the fixture checks it again at the end


async def test_links_and_media_the_bot_posts_are_not_unfurled(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    """``unfurl_links`` is off for a bot by default, ``unfurl_media`` on: both are sent
    false, so what the model links shows no preview (an image, a video) in the channel."""
    provider = FakeProvider(["See https://example.com/cat.png and https://example.com/"])
    _, platform = await start_slack(provider)
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "a picture?"))
    await fake_slack.wait_bot_messages(GENERAL, 1)
    await platform.send_direct(Participant(alice.id, "Alice"), "https://example.com/dog.mp4")
    posts = [p for m, _, p in fake_slack.calls if m == "chat.postMessage"]
    assert len(posts) == 2
    assert all(p.get("unfurl_links") is False and p.get("unfurl_media") is False for p in posts)


async def test_a_rate_limited_post_is_waited_out_and_posted_once(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["patient"])
    await start_slack(provider)
    fake_slack.rate_limit("chat.postMessage", retry_after=1)
    await fake_slack.post(GENERAL, fake_slack.user("Alice"), mention(fake_slack, "hi"))
    (reply,) = await fake_slack.wait_bot_messages(GENERAL, 1)
    assert reply["text"] == "patient"
    posts = [t for method, t, _ in fake_slack.calls if method == "chat.postMessage"]
    assert len(posts) == 2
    assert posts[1] - posts[0] >= 1.0


async def test_events_are_acknowledged_at_once_while_the_model_is_busy(
    fake_slack: SlackServer, start_slack: StartSlack, llm_server: LLMServer
) -> None:
    resume = asyncio.Event()
    llm_server.queue(
        Scripted(chunks=["Para one.\n\n", "Para two."], pause_before_chunk=1, resume=resume)
    )
    provider, providers = real_provider(llm_server, "openai")
    await start_slack(provider, providers=providers)
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "go"))
    await fake_slack.wait_bot_messages(GENERAL, 1)  # the model holds its second paragraph
    later = await fake_slack.post(GENERAL, alice, mention(fake_slack, "and this?"))
    (envelope,) = [
        d for d in fake_slack.deliveries if d["payload"].get("event", {}).get("ts") == later["ts"]
    ]
    await fake_slack.wait_ack(envelope["envelope_id"], within=1.0)  # Slack allows 3 s
    assert not resume.is_set()
    resume.set()
    await fake_slack.wait_bot_messages(GENERAL, 2)


async def test_a_redelivered_event_is_answered_once(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["once", "twice?"])
    _, platform = await start_slack(provider)
    posted = await fake_slack.post(GENERAL, fake_slack.user("Alice"), mention(fake_slack, "hi"))
    await fake_slack.wait_bot_messages(GENERAL, 1)
    first = next(
        d for d in fake_slack.deliveries if d["payload"].get("event", {}).get("ts") == posted["ts"]
    )
    again = {**first, "envelope_id": "again-1", "retry_attempt": 1, "retry_reason": "timeout"}
    await fake_slack.resend(again)
    await fake_slack.wait_ack("again-1")  # acknowledged, so Slack stops sending it
    await asyncio.wait_for(platform.wait_repeated(), 10)
    assert platform.repeated == 1
    assert platform.handled == 1
    assert len(fake_slack.messages(GENERAL)) == 1
    assert len(provider.requests) == 1


async def test_a_new_connection_drops_the_history_kept(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    provider = FakeProvider(["one", "two"])
    await start_slack(provider)
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "hi"))
    await fake_slack.wait_bot_messages(GENERAL, 1)
    fetched = history_reads(fake_slack)
    await fake_slack.drop()
    await fake_slack.connected(times=2)  # slack_sdk opened a new one
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "again"))
    await fake_slack.wait_bot_messages(GENERAL, 2)
    assert history_reads(fake_slack) == fetched + 1  # read from Slack again, not the cache


async def test_a_long_answer_is_split_within_slacks_limit(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    words = " ".join(f"w{i}<&>" for i in range(1500))  # over 10,000 characters, escaped longer
    provider = FakeProvider([words])
    _, platform = await start_slack(provider)
    await fake_slack.post(GENERAL, fake_slack.user("Alice"), mention(fake_slack, "talk"))
    await fake_slack.wait_for(
        lambda: "w1499" in "".join(m["text"] for m in fake_slack.messages(GENERAL))
    )
    said = [m["text"] for m in fake_slack.messages(GENERAL)]
    assert len(said) >= 3
    shown = [t.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&") for t in said]
    assert all(len(t) <= platform.max_message_chars for t in shown)
    assert " ".join(shown).split() == words.split()  # nothing lost, nothing doubled


async def test_a_long_message_cut_keeps_the_indentation_of_its_code(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    _, platform = await start_slack(FakeProvider())
    lines = [f"    value_{i} = compute({i}, twice=True)  # step {i}" for i in range(200)]
    code = "\n".join(["def f():", *lines])
    await platform.send(ChannelRef("slack", GENERAL), code)
    said = [m["text"] for m in fake_slack.messages(GENERAL)]
    assert len(said) >= 3
    assert all(text.startswith("    value_") for text in said[1:])
    assert "\n".join(said) == code  # cut at line breaks, nothing else lost


async def test_progress_is_one_note_edited_to_its_end(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    _, platform = await start_slack(FakeProvider(), slack={"progress_interval": 0.05})
    here = ChannelRef("slack", GENERAL)
    for step in range(1, 6):
        await platform.progress(here, "job-1", f"generate_image: step {step}/5 <here>")
    await platform.progress(here, "job-1", "generate_image: done in 3 s", done=True)
    await platform.progress(here, "job-1", "late report", done=True)  # after the end: nothing
    (note,) = fake_slack.messages(GENERAL)
    assert note["text"] == "generate_image: done in 3 s"
    assert note["metadata"]["event_type"] == "salon_note"
    edits = [p for method, _, p in fake_slack.calls if method == "chat.update"]
    assert 1 <= len(edits) <= 2  # reports in between are folded, not each an edit


async def test_live_check_names_the_scopes_the_bot_token_lacks(fake_slack: SlackServer) -> None:
    from salon.platforms.slack import live_check

    cfg = bot_config(platforms={"slack": {"api_base_url": fake_slack.base_url}})
    secrets = Secrets({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN})
    fake_slack.scopes.discard("pins:read")
    fake_slack.scopes.discard("commands")
    line, ok = await live_check(cfg, secrets)
    assert not ok
    assert line == (
        "live: slack: the bot token lacks scopes commands, pins:read "
        "(add them under OAuth & Permissions and reinstall the app)"
    )
    fake_slack.scopes |= {"pins:read", "commands"}
    line, ok = await live_check(cfg, secrets)
    assert ok
    assert line == "live: slack: ok, salon in Fake; Socket Mode open to this app token"
    wrong = Secrets({"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_APP_TOKEN": BOT_TOKEN})
    line, ok = await live_check(cfg, wrong)
    assert not ok
    assert line == (
        "live: slack: Slack refused to open Socket Mode with SLACK_APP_TOKEN: "
        "not_allowed_token_type"
    )


async def test_a_direct_message_opens_the_persons_dm_and_needs_im_write(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    """What only one person may see (the link that connects their account): their DM with
    the bot (conversations.open), escaped as every text is; without scope im:write, a
    PlatformError that says so."""
    _, platform = await start_slack(FakeProvider([]))
    alice = fake_slack.user("Alice")
    assert platform.can(Capability.DIRECT_MESSAGES)
    await platform.send_direct(
        Participant(alice.id, "Alice"), "connect <here>:\nhttp://x/a?b=1&c=2"
    )
    (said,) = fake_slack.messages(fake_slack.im(alice))
    assert said["text"] == "connect &lt;here&gt;:\nhttp://x/a?b=1&amp;c=2"
    assert fake_slack.messages(GENERAL) == []
    fake_slack.scopes.discard("im:write")
    with pytest.raises(
        PlatformError, match=r"missing_scope \(the bot token needs scope im:write\)"
    ):
        await platform.send_direct(Participant(alice.id, "Alice"), "again")
