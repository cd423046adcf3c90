"""Salon's own tools seen from outside: ``salon tools serve`` wraps the native sets into MCP
servers whose listing is what the MCPServer-based servers published before them
(``mcp_view.json`` was taken from those servers), and the native schemas are the same."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp import Client

from salon.config import BotConfig
from salon.integrations import INTEGRATIONS, build_integration_server
from salon.store.sql import SQLStore
from salon.tools.builtin import ScheduleBook, build_builtin_server
from salon.tools.mcp_serve import to_mcp_server
from salon.tools.native import ToolSet

ROOT = Path(__file__).resolve().parents[2]
VIEW = json.loads((Path(__file__).parent / "mcp_view.json").read_text(encoding="utf-8"))


def _sets() -> dict[str, ToolSet]:
    async def nobody(_channel: str) -> list[str]:
        return []

    store = SQLStore("sqlite+aiosqlite:///:memory:")
    book = ScheduleBook(
        store.schedules, timezone="UTC", now=lambda: datetime.now(UTC), changed=lambda: None
    )
    sets = {"salon": build_builtin_server("k", store.chatlog, nobody, book)}
    config = BotConfig.model_validate(
        {
            "name": "S",
            "provider": "p",
            "providers": {"p": {"type": "openai", "model": "m"}},
            "integrations": {
                name: {"workflow": str(ROOT / "tests/integrations/workflow.json")}
                if name == "comfyui"
                else {}
                for name in INTEGRATIONS
            },
        }
    )
    for name, settings in config.integrations.configured().items():
        sets[name] = build_integration_server(name, settings, lookup=lambda _n: "key", root=ROOT)
    return sets


async def _listed(tools: ToolSet) -> list[dict[str, Any]]:
    async with Client(to_mcp_server(tools), cache=None) as client:
        listed = await client.list_tools()
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]


async def test_served_sets_list_what_the_mcp_servers_listed() -> None:
    sets = _sets()
    assert set(sets) == set(VIEW)
    for name, tools in sets.items():
        assert await _listed(tools) == VIEW[name]["tools"], name


def test_native_schemas_and_annotations_are_the_published_ones() -> None:
    hints = {
        "readOnlyHint": "read_only",
        "destructiveHint": "destructive",
        "idempotentHint": "idempotent",
        "openWorldHint": "open_world",
    }
    for name, tools in _sets().items():
        published = {t["name"]: t for t in VIEW[name]["tools"]}
        assert set(tools.tools) == set(published)
        for tool in tools.tools.values():
            assert tool.input_schema == published[tool.name]["inputSchema"]
            assert tool.description == published[tool.name]["description"]
            notes = published[tool.name].get("annotations", {})
            mine = tool.annotations
            for key, field in hints.items():
                assert (getattr(mine, field) if mine else None) == notes.get(key)
