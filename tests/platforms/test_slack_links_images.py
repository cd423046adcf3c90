"""Slack's linked contexts (the requester's own membership of the linked channel, from
``conversations.members``) and images as the model's input (``url_private`` downloaded
with the bot token), against the fake Slack."""

from __future__ import annotations

from datetime import UTC, datetime

from aiohttp import web

from fakes.slack_server import BOT_TOKEN, SlackServer, SlackUser
from fakes.slack_web import TEAM
from salon.llm import FakeProvider, ImagePart
from salon.model import ChannelRef, Message, Participant
from salon.platforms.slack.files import Images, attachments_of
from tests.platforms import test_slack
from tests.platforms.test_slack import GENERAL, StartSlack, mention

fake_slack, start_slack = test_slack.fake_slack, test_slack.start_slack  # the fixtures

STAFF = "G0STAFF"
RANDOM = "C0RANDOM"
PARTNERS = "C0PARTNERS"  # a Slack Connect channel: another organization hosts it
OTHER_TEAM = "T0OTHERORG"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def seen(provider: FakeProvider, index: int = -1) -> str:
    return "\n".join(m.plain_text for m in provider.requests[index].messages)


async def answered(server: SlackServer, who: SlackUser, text: str, count: int) -> None:
    await server.post(GENERAL, who, mention(server, text))
    await server.wait_bot_messages(GENERAL, count)


async def test_only_a_member_of_the_linked_channel_gets_its_messages(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    carol, bob = fake_slack.user("Carol"), fake_slack.user("Bob")
    fake_slack.channel(STAFF, "staff", members=[carol])  # private: Carol and the bot
    await fake_slack.post(STAFF, carol, "STAFF-ONLY the launch slips a week")
    provider = FakeProvider(["a", "b", "c", "d"])
    links = [{"channel": f"slack:{STAFF}", "where": [GENERAL]}]
    await start_slack(provider, links=links)
    await answered(fake_slack, bob, "any news?", 1)
    assert "STAFF-ONLY" not in seen(provider)
    await answered(fake_slack, carol, "any news?", 2)
    assert "STAFF-ONLY the launch slips a week" in seen(provider)
    assert "staff" in seen(provider)
    await fake_slack.join(STAFF, bob)
    await fake_slack.leave(STAFF, carol)
    await answered(fake_slack, bob, "and now?", 3)
    assert "STAFF-ONLY" in seen(provider)
    await answered(fake_slack, carol, "and now?", 4)
    assert "STAFF-ONLY" not in seen(provider)


async def test_a_channel_the_bot_cannot_see_is_never_linked(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    carol = fake_slack.user("Carol")
    fake_slack.channel(STAFF, "staff", members=[carol], bot=False)
    fake_slack.channels[STAFF].messages.append(
        {"type": "message", "user": carol.id, "text": "HIDDEN plans", "ts": "1.000001"}
    )
    provider = FakeProvider(["a"])
    await start_slack(provider, links=[{"channel": STAFF}])
    await answered(fake_slack, carol, "news?", 1)
    assert "HIDDEN" not in seen(provider)


def images(provider: FakeProvider) -> list[bytes]:
    parts = [p for m in provider.requests[-1].messages for p in m.parts]
    return [p.data for p in parts if isinstance(p, ImagePart)]


async def test_an_image_reaches_the_model_downloaded_with_the_bot_token(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, "look", files=[("cat.png", "image/png", PNG)])
    provider = FakeProvider(["a cat"])
    await start_slack(provider)
    await answered(fake_slack, alice, "what is in the picture?", 1)
    assert images(provider) == [PNG]
    assert "look" in seen(provider)


async def test_only_the_newest_max_images_are_downloaded(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    alice = fake_slack.user("Alice")
    for n in range(4):
        picture = [(f"p{n}.png", "image/png", PNG + bytes([n]))]
        await fake_slack.post(GENERAL, alice, f"picture {n}", files=picture)
    await fake_slack.post(GENERAL, alice, "notes", files=[("a.txt", "text/plain", b"text")])
    provider = FakeProvider(["two"])
    await start_slack(provider, slack={"max_images": 2})
    await answered(fake_slack, alice, "which is best?", 1)
    assert images(provider) == [PNG + bytes([2]), PNG + bytes([3])]
    assert len(fake_slack.downloads) == 2  # nothing else fetched


async def test_without_files_read_the_sign_in_page_is_no_image(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    fake_slack.scopes.discard("files:read")
    alice = fake_slack.user("Alice")
    await fake_slack.post(GENERAL, alice, "look", files=[("cat.png", "image/png", PNG)])
    provider = FakeProvider(["no picture"])
    await start_slack(provider)
    await answered(fake_slack, alice, "what is in the picture?", 1)
    assert images(provider) == []
    assert "look" in seen(provider)


async def test_the_bot_token_goes_to_no_other_host(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    """A file whose ``url_private`` is not Slack's file host is not fetched at all."""
    asked: list[str] = []

    async def elsewhere(request: web.Request) -> web.Response:
        asked.append(request.headers.get("Authorization", ""))
        return web.Response(body=PNG, content_type="image/png")

    app = web.Application()
    app.router.add_get("/{name}", elsewhere)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        alice = fake_slack.user("Alice")
        shared = await fake_slack.post(GENERAL, alice, "look", files=[("a.png", "image/png", PNG)])
        shared["files"][0]["url_private"] = f"http://127.0.0.1:{port}/a.png"
        provider = FakeProvider(["none"])
        await start_slack(provider)
        await answered(fake_slack, alice, "what is in the picture?", 1)
        assert images(provider) == []
        assert asked == []
    finally:
        await runner.cleanup()


async def test_a_file_on_plain_http_is_not_fetched_with_the_token(
    fake_slack: SlackServer,
) -> None:
    """Slack's ``url_private`` is https: one on plain http is refused, even on the Web
    API's own host (reached here over https), so the token never travels unencrypted."""
    alice = fake_slack.user("Alice")
    shared = await fake_slack.post(GENERAL, alice, "look", files=[("a.png", "image/png", PNG)])
    assert shared["files"][0]["url_private"].startswith("http://127.0.0.1:")
    images = Images(
        token=BOT_TOKEN,
        api_base_url=f"https://127.0.0.1:{fake_slack.port}/api/",
        max_images=4,
        max_bytes=1 << 20,
    )
    message = Message(
        shared["ts"],
        ChannelRef("slack", GENERAL),
        Participant(alice.id, "Alice"),
        "look",
        datetime.now(UTC),
        attachments=attachments_of(shared),
    )
    try:
        (loaded,) = await images.load([message])
    finally:
        await images.close()
    assert loaded.attachments[0].data is None
    assert fake_slack.downloads == []


def test_slacks_file_hosts_are_trusted_over_https_only() -> None:
    """``files.slack.com``, GovSlack's ``files.slack-gov.com``, and the host of
    ``api_base_url`` with its scheme (a loopback fake may be plain http)."""
    images = Images(
        token=BOT_TOKEN, api_base_url="http://127.0.0.1:9/api/", max_images=1, max_bytes=1
    )
    assert images.may_fetch("https://files.slack.com/files-pri/T1-F1/a.png")
    assert images.may_fetch("https://files.slack-gov.com/files-pri/T1-F1/a.png")
    assert images.may_fetch("http://127.0.0.1:9/files-pri/T1-F1/a.png")
    assert not images.may_fetch("http://files.slack.com/files-pri/T1-F1/a.png")
    assert not images.may_fetch("http://files.slack-gov.com/files-pri/T1-F1/a.png")
    assert not images.may_fetch("https://127.0.0.1:9/files-pri/T1-F1/a.png")
    assert not images.may_fetch("https://files.slack.com.evil.example/a.png")
    assert not images.may_fetch("https://example.com/a.png")


async def test_members_are_read_past_the_first_page(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    crowd = [fake_slack.user(f"P{n:03d}") for n in range(250)]
    fake_slack.channel(STAFF, "staff", members=crowd)
    await fake_slack.post(STAFF, crowd[0], "STAFF-ONLY plans")
    last = max(crowd, key=lambda u: u.id)  # on the second page (members come sorted)
    provider = FakeProvider(["a"])
    await start_slack(provider, links=[{"channel": STAFF}])
    await answered(fake_slack, last, "news?", 1)
    assert "STAFF-ONLY plans" in seen(provider)
    pages = [p for m, _, p in fake_slack.calls if m == "conversations.members"]
    assert len(pages) == 2


async def test_an_image_in_the_question_itself_is_seen(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    alice = fake_slack.user("Alice")
    provider = FakeProvider(["a cat", "still a cat"])
    await start_slack(provider)
    await answered(fake_slack, alice, "hello", 1)  # the history is kept from here on
    picture = [("cat.png", "image/png", PNG)]
    await fake_slack.post(GENERAL, alice, mention(fake_slack, "and this?"), files=picture)
    await fake_slack.wait_bot_messages(GENERAL, 2)
    assert images(provider) == [PNG]


async def test_a_pinned_config_links_channels_of_its_own_workspace_only(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    """The workspace is a Slack channel's server for this rule: a pinned ``.config`` may
    link another channel of it, not a Slack Connect channel another organization hosts."""
    alice = fake_slack.user("Alice")
    fake_slack.channel(RANDOM, "random")
    fake_slack.channel(PARTNERS, "partners", host=OTHER_TEAM)
    await fake_slack.post(RANDOM, alice, "SAME-WORKSPACE random talk")
    await fake_slack.post(PARTNERS, alice, "OTHER-WORKSPACE plans")
    provider = FakeProvider(["a", "b", "c", "d"])
    _, platform = await start_slack(provider)
    found = await platform.find_channel(RANDOM)
    assert found is not None
    assert found.guild_id is None  # the config layers stay as they were: no guild's layer
    assert found.server_id == TEAM
    same = await fake_slack.post(GENERAL, alice, f".config\n---\nlinks:\n  - channel: {RANDOM}")
    other = await fake_slack.post(
        GENERAL, alice, f".config\n---\nlinks:\n  - channel: slack:{PARTNERS}"
    )
    await fake_slack.pin(GENERAL, same["ts"], alice)
    await fake_slack.pin(GENERAL, other["ts"], alice)
    await answered(fake_slack, alice, "plans?", 1)
    assert "SAME-WORKSPACE random talk" in seen(provider)
    assert "OTHER-WORKSPACE" not in seen(provider)
    assert [r["name"] for r in other.get("reactions", [])] == ["warning"]
    await fake_slack.command(alice, GENERAL, "/ask", "and by command?")  # no event envelope
    await fake_slack.wait_bot_messages(GENERAL, 2)
    assert "SAME-WORKSPACE random talk" in seen(provider)
    assert "reactions" not in same
    # In the shared channel itself, a pinned config links nothing of this workspace.
    inside = await fake_slack.post(PARTNERS, alice, f".config\n---\nlinks:\n  - channel: {RANDOM}")
    await fake_slack.pin(PARTNERS, inside["ts"], alice)
    await fake_slack.post(PARTNERS, alice, mention(fake_slack, "and here?"))
    await fake_slack.wait_bot_messages(PARTNERS, 1)
    assert "SAME-WORKSPACE" not in seen(provider)
    assert [r["name"] for r in inside.get("reactions", [])] == ["warning"]
    # Nor in a direct message, as on Discord.
    dm = fake_slack.im(alice)
    pinned = await fake_slack.post(dm, alice, f".config\n---\nlinks:\n  - channel: {RANDOM}")
    await fake_slack.pin(dm, pinned["ts"], alice)
    await fake_slack.post(dm, alice, "and in private?")
    await fake_slack.wait_bot_messages(dm, 1)
    assert "SAME-WORKSPACE" not in seen(provider)
    assert [r["name"] for r in pinned.get("reactions", [])] == ["warning"]
