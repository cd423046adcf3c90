"""The store's sealed MCP tokens (salon.tools.mcp_auth seals them before they come here)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from fakes.databases import Database
from salon.store.sql import SQLStore


@pytest.fixture
async def store(database: Database) -> AsyncIterator[SQLStore]:
    store = await database.open_store()
    yield store
    await store.close()


async def test_tokens_are_kept_replaced_and_forgotten_per_bot_and_server(store: SQLStore) -> None:
    tokens = store.tokens
    assert await tokens.get("salon", "tracker", "tokens") is None
    await tokens.put("salon", "tracker", "tokens", b"\x00sealed one")
    await tokens.put("salon", "tracker", "client", b"registration")
    await tokens.put("other", "tracker", "tokens", b"another bot's")
    await tokens.put("salon", "tracker", "tokens", b"sealed two")  # a refresh replaces
    assert await tokens.get("salon", "tracker", "tokens") == b"sealed two"
    assert await tokens.forget("salon", "tracker") == 2
    assert await tokens.get("salon", "tracker", "client") is None
    assert await tokens.get("other", "tracker", "tokens") == b"another bot's"


async def test_one_kind_is_forgotten_alone(store: SQLStore) -> None:
    """A person's tokens (per_user) go without the bot's or another person's."""
    tokens = store.tokens
    for kind in ("tokens", "tokens@discord:1", "tokens@discord:2"):
        await tokens.put("salon", "tracker", kind, kind.encode())
    assert await tokens.forget("salon", "tracker", "tokens@discord:2") == 1
    assert await tokens.get("salon", "tracker", "tokens@discord:2") is None
    assert await tokens.get("salon", "tracker", "tokens@discord:1") == b"tokens@discord:1"
    assert await tokens.get("salon", "tracker", "tokens") == b"tokens"
