"""The consent flow in a direct message (``oauth.per_user`` with ``callback_url``): a
person whose call finds no tokens of theirs is sent the authorization link in a DM (never
in the channel), the channel gets one short line, and the model is told the call is not
authorized yet. The person opens the link; the redirect lands on the web server's callback
(another store object on the same database, as ``salon run``'s supervisor has: the flow is
handed over through the store), their tokens are kept for them, and their next call runs
as them; another person's does not. Against the fake Discord, the fake authorization
server (fakes/oauth_server.py: ``whoami`` names the account of a call's token) and the
real web server."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from fakes.discord_server import DiscordServer, FakeUser
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from salon.store.sql import SQLStore, sqlite_url
from salon.tools.mcp_auth import KEY_ENV, tokens_kind
from salon.tools.oauth_desk import OAuthDesk
from tests.platforms.conftest import GENERAL, Start, ask
from tests.tools.test_mcp_oauth import KEY, Guarded, guarded, operator_authorizes
from tests.web.conftest import ENVIRON, serving, write_fleet

__all__ = ["guarded"]  # the fixture, used here

_LINK = re.compile(r"https?://\S+")


@dataclass
class Web:
    store: SQLStore  # the web server's own store object, on the bot's database
    callback: str


@pytest.fixture
async def web(tmp_path: Path, guarded: Guarded) -> AsyncIterator[Web]:
    """The web server of the fleet, on the bot's database (the operator's tokens already
    there: the bot lists the server's tools with them)."""
    data = tmp_path / "data-salon"
    data.mkdir()
    store = SQLStore(sqlite_url(data / "salon.db"))
    await store.open()
    try:
        await operator_authorizes(store, guarded)
        environ = {**ENVIRON, KEY_ENV: KEY}
        root = write_fleet(tmp_path / "site")
        desk = OAuthDesk(store.tokens, environ, poll=0.05)
        async with serving(root, store, environ, oauth_desk=desk) as (_, url):
            yield Web(store, f"{url}/config/oauth/callback")
    finally:
        await store.close()


def results(provider: FakeProvider, request: int) -> list[str]:
    """The tool results the model was given in one request."""
    messages = provider.requests[request].messages
    return [p.result.content for m in messages for p in m.parts if hasattr(p, "result")]


def whoami_then(answer: str, n: int) -> list[Any]:
    return [FakeReply(calls=(ToolCall(f"c{n}", "whoami", {}),)), answer]


async def start(start_bot: Start, guarded: Guarded, web: Web, provider: FakeProvider) -> None:
    oauth = {"per_user": True, "callback_url": web.callback}
    await start_bot(
        provider,
        mcp_servers={"guarded": {"url": guarded.url, "oauth": oauth}},
        secrets={KEY_ENV: KEY},
        default_tool_policy="allow",
        tool_output_visible=False,
    )


def dms(fake_discord: DiscordServer, person: FakeUser) -> list[str]:
    channel = fake_discord.dm_channels.get(person.id)
    return [m["content"] for m in fake_discord.channels[channel]] if channel else []


async def test_the_link_comes_in_a_dm_and_once_connected_the_person_calls_as_themselves(
    guarded: Guarded, web: Web, fake_discord: DiscordServer, start_bot: Start
) -> None:
    replies = [*whoami_then("Not yet.", 1), *whoami_then("Done.", 2), *whoami_then("No.", 3)]
    provider = FakeProvider(replies)
    await start(start_bot, guarded, web, provider)
    alice, bob = fake_discord.user("Alice"), fake_discord.user("Bob")

    await ask(fake_discord, GENERAL, alice, "who am I at the tracker?")
    said = await fake_discord.wait_bot_messages(GENERAL, 2)
    assert [m["content"] for m in said] == [
        "Alice: I sent you a link in a DM to connect your guarded account.",
        "Not yet.",
    ]
    (dm,) = dms(fake_discord, alice)
    (link,) = _LINK.findall(dm)
    assert httpx2.URL(link).params["redirect_uri"] == web.callback
    (result,) = results(provider, 1)
    assert result.startswith("not authorized yet: MCP server guarded runs each call with")
    assert "sent a link in a direct message" in result
    assert all("http" not in m["content"] for m in fake_discord.channels[GENERAL])

    # Alice opens her link: she signs in as herself, the redirect reaches the callback.
    guarded.authority.account = "alice@tracker"
    async with httpx2.AsyncClient(follow_redirects=True, timeout=20) as browser:
        landed = await browser.get(link)
        again = await browser.get(landed.url)  # the state is used up
    assert landed.status_code == 200, landed.text
    assert "Your guarded account is connected" in landed.text
    assert again.status_code == 400
    assert "unknown or over" in again.text
    kind = tokens_kind(f"discord:{alice.id}")
    assert await web.store.tokens.get("salon", "guarded", kind) is not None

    await ask(fake_discord, GENERAL, alice, "and now?")
    await fake_discord.wait_bot_messages(GENERAL, 3)
    assert results(provider, 3)[-1] == "alice@tracker"  # (the first call's is history)

    # Bob's call never runs with Alice's tokens: he gets a link of his own.
    await ask(fake_discord, GENERAL, bob, "who am I?")
    said = await fake_discord.wait_bot_messages(GENERAL, 5)
    assert said[3]["content"] == "Bob: I sent you a link in a DM to connect your guarded account."
    assert results(provider, 5)[-1].startswith("not authorized yet")
    (bobs,) = dms(fake_discord, bob)
    assert _LINK.findall(bobs) != [link]


async def test_a_forged_state_on_the_callback_is_refused(
    guarded: Guarded, web: Web, fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(whoami_then("Not yet.", 1))
    await start(start_bot, guarded, web, provider)
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "who am I at the tracker?")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    (dm,) = dms(fake_discord, alice)
    (link,) = _LINK.findall(dm)
    state = httpx2.URL(link).params["state"]
    async with httpx2.AsyncClient(timeout=10) as browser:
        forged = await browser.get(web.callback, params={"code": "x", "state": state + "x"})
        empty = await browser.get(web.callback, params={"code": "x"})
    assert (forged.status_code, empty.status_code) == (400, 400)
    assert "unknown or over" in forged.text
    async with httpx2.AsyncClient(follow_redirects=True, timeout=20) as browser:
        landed = await browser.get(link)  # the real state was not spent by the forged ones
    assert "Your guarded account is connected" in landed.text


async def test_a_person_who_takes_no_dms_is_told_in_the_channel_without_the_link(
    guarded: Guarded, web: Web, fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider(whoami_then("Sorry.", 1))
    await start(start_bot, guarded, web, provider)
    alice = fake_discord.user("Alice")
    fake_discord.dms_closed.add(alice.id)
    await ask(fake_discord, GENERAL, alice, "who am I at the tracker?")
    said = await fake_discord.wait_bot_messages(GENERAL, 2)
    assert said[0]["content"] == (
        "Alice: guarded needs your own account; the operator connects it with salon tools "
        f"auth guarded --person discord:{alice.id}."
    )
    assert dms(fake_discord, alice) == []
    (result,) = results(provider, 1)
    assert "you have not connected yours" in result


async def test_a_refused_consent_ends_the_flow_and_the_next_call_sends_a_new_link(
    guarded: Guarded, web: Web, fake_discord: DiscordServer, start_bot: Start
) -> None:
    provider = FakeProvider([*whoami_then("Not yet.", 1), *whoami_then("Still not.", 2)])
    await start(start_bot, guarded, web, provider)
    alice = fake_discord.user("Alice")
    await ask(fake_discord, GENERAL, alice, "who am I at the tracker?")
    await fake_discord.wait_bot_messages(GENERAL, 2)
    (first,) = _LINK.findall(dms(fake_discord, alice)[0])
    state = httpx2.URL(first).params["state"]
    # What the authorization server sends when the person says no (RFC 6749 4.1.2.1).
    async with httpx2.AsyncClient(timeout=20) as browser:
        refused = await browser.get(web.callback, params={"error": "access_denied", "state": state})
    assert refused.status_code == 400
    assert "guarded was not connected: access_denied" in refused.text
    await ask(fake_discord, GENERAL, alice, "again?")
    await fake_discord.wait_bot_messages(GENERAL, 4)
    second = dms(fake_discord, alice)[1]
    assert _LINK.findall(second) != [first]
    assert (
        await web.store.tokens.get("salon", "guarded", tokens_kind(f"discord:{alice.id}")) is None
    )
