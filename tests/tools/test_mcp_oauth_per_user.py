"""OAuth per person (``oauth.per_user``): the bot's tokens list the tools; each person's
calls run with the tokens of their own account (``salon tools auth SERVER --person``), kept
sealed by bot, server and person; a person without them is told so, and another person's
tokens are never used. Against fakes/oauth_server.py, whose ``whoami`` names the account a
call's token belongs to."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2

from salon.config import Secrets
from salon.model import ToolCall
from salon.store.sql import SQLStore
from salon.tools.caller import Caller
from salon.tools.hub import ToolHub
from salon.tools.mcp_auth import KEY_ENV
from salon.tools.servers import configured_specs
from salon.tools_cli import auth_server
from tests.conftest import bot_config
from tests.tools.test_mcp_oauth import KEY, Guarded, guarded, operator_authorizes, store

__all__ = ["guarded", "store"]  # the fixtures, used here

ALICE, BOB = "discord:1001", "discord:1002"


def per_user(guarded: Guarded) -> Any:
    return bot_config(mcp_servers={"guarded": {"url": guarded.url, "oauth": {"per_user": True}}})


async def person_authorizes(store: SQLStore, guarded: Guarded, person: str, account: str) -> None:
    """``salon tools auth guarded --person PERSON``, the link opened by that person."""
    said: list[str] = []
    opened: list[asyncio.Task[httpx2.Response]] = []

    async def browse(link: str) -> httpx2.Response:
        guarded.authority.account = account  # who signs in at the consent screen
        async with httpx2.AsyncClient(follow_redirects=True) as browser:
            return await browser.get(link)

    def out(line: str) -> None:
        said.append(line)
        if line.startswith("Open this link"):
            opened.append(asyncio.create_task(browse(line.splitlines()[1])))

    secrets = Secrets({KEY_ENV: KEY})
    config = per_user(guarded)
    code = await auth_server("salon", config, store, secrets, "guarded", out=out, person=person)
    assert code == 0, said
    await asyncio.gather(*opened)
    await store.open()  # auth_server closes the store it was given


async def whoami(store: SQLStore, guarded: Guarded, *people: str) -> list[str]:
    specs = configured_specs(per_user(guarded), Secrets({KEY_ENV: KEY}), store.tokens, "salon")
    said = []
    async with ToolHub(specs) as hub:
        assert hub.failed_servers() == {}
        for n, person in enumerate(people):
            platform, _, who = person.partition(":")
            caller = Caller.from_arguments({"requester_id": who, "channel": f"{platform}:10"})
            result = await hub.call(ToolCall(f"c{n}", "whoami", {}), caller=caller)
            said.append(result.content)
    return said


async def test_each_person_calls_with_their_own_account_and_never_anothers(
    store: SQLStore, guarded: Guarded
) -> None:
    await operator_authorizes(store, guarded)  # the bot's tokens: the tools are listed
    await person_authorizes(store, guarded, ALICE, "alice@tracker")
    alice, bob = await whoami(store, guarded, ALICE, BOB)
    assert alice == "alice@tracker"
    assert bob == (
        "MCP server guarded is unavailable: MCP server guarded runs each person's calls with "
        "their own account, and you have not connected yours: the operator runs salon tools "
        f"auth guarded --person {BOB}"
    )
    sealed = await store.tokens.get("salon", "guarded", f"tokens@{ALICE}")
    assert sealed is not None
    assert all(token.encode() not in sealed for token in guarded.authority.access)
    await person_authorizes(store, guarded, BOB, "bob@tracker")
    assert await whoami(store, guarded, BOB, ALICE) == ["bob@tracker", "alice@tracker"]


async def test_revoking_one_person_leaves_the_others_and_the_bots(
    store: SQLStore, guarded: Guarded
) -> None:
    await operator_authorizes(store, guarded)
    await person_authorizes(store, guarded, ALICE, "alice@tracker")
    await person_authorizes(store, guarded, BOB, "bob@tracker")
    said: list[str] = []
    secrets = Secrets({KEY_ENV: KEY})
    code = await auth_server(
        "salon",
        per_user(guarded),
        store,
        secrets,
        "guarded",
        revoke=True,
        person=BOB,
        out=said.append,
    )
    await store.open()
    assert (code, said) == (0, ["guarded: tokens forgotten"])
    alice, bob = await whoami(store, guarded, ALICE, BOB)
    assert alice == "alice@tracker"
    assert "you have not connected yours" in bob


async def test_person_is_refused_for_a_server_whose_tokens_are_the_bots(
    store: SQLStore, guarded: Guarded
) -> None:
    said: list[str] = []
    config = bot_config(mcp_servers={"guarded": {"url": guarded.url, "oauth": {}}})
    code = await auth_server(
        "salon", config, store, Secrets({KEY_ENV: KEY}), "guarded", person=ALICE, out=said.append
    )
    assert code == 2
    assert said == ["error: guarded is not per_user: its tokens are the bot's (leave out --person)"]
