"""What ``salon tools serve`` lists over stdio is what the hub offers the model natively:
for the built-ins and every integration, the same tools with the same descriptions, input
schemas (pydantic's, from each tool's signature) and annotations. Served, a tool also takes
its caller as arguments (``caller_arguments``), which the model never sees."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

from salon.app import load_bot
from salon.config import load_config_dir
from salon.integrations import INTEGRATIONS, server_for
from salon.store.sql import SQLStore
from salon.tools.builtin import build_builtin_server
from salon.tools.hub import ServerSpec, ToolHub, without_hidden
from salon.tools.native import NativeTool, ToolSet

REPO = Path(__file__).resolve().parents[2]
KEYS = {"SERPAPI_API_KEY": "serp-k", "PIXELLAB_API_KEY": "pix-k", "TEST_KEY": "k"}
HINTS = {
    "read_only": "readOnlyHint",
    "destructive": "destructiveHint",
    "idempotent": "idempotentHint",
    "open_world": "openWorldHint",
}


def _config_dir(tmp_path: Path) -> Path:
    root = tmp_path / "config"
    (root / "bots").mkdir(parents=True)
    shutil.copy(REPO / "tests/integrations/workflow.json", root / "workflow.json")
    integrations = "".join(
        f"  {name}: {{workflow: workflow.json}}\n" if name == "comfyui" else f"  {name}: {{}}\n"
        for name in INTEGRATIONS
    )
    (root / "bots" / "s.yaml").write_text(
        "name: S\n"
        "providers:\n  p: {type: openai, model: m, api_key_env: TEST_KEY}\n"
        "provider: p\n"
        f"data_dir: {tmp_path / 'data'}\n"
        f"integrations:\n{integrations}",
        encoding="utf-8",
    )
    return root


def _native_sets(root: Path) -> dict[str, ToolSet]:
    """The sets as ``salon tools serve`` builds them, built here instead."""
    configs = load_config_dir(root)
    key, config, secrets = load_bot(configs, None, KEYS, tools_only=True)

    async def nobody(_channel: str) -> list[str]:
        return []

    store = SQLStore("sqlite+aiosqlite:///:memory:")
    sets = {"salon": build_builtin_server(key, store.chatlog, nobody)}
    for name in INTEGRATIONS:
        sets[name] = server_for(config, name, secrets, root)
    return sets


def _as_listed(tool: NativeTool) -> dict[str, Any]:
    """A native tool in the shape of an MCP listing's entry."""
    entry: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    }
    notes = tool.annotations
    hints = {HINTS[f]: getattr(notes, f) for f in HINTS if notes and getattr(notes, f) is not None}
    if hints:
        entry["annotations"] = hints
    return entry


async def _served(root: Path, only: str) -> list[dict[str, Any]]:
    env = {**os.environ, **KEYS}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "salon", "tools", "serve", str(root), "--only", only],
        cwd=str(REPO),
        env=env,
    )
    async with Client(params, cache=None) as client:
        listed = await client.list_tools()
    # The output schema describes results, which the hub hands on as text: not offered.
    return [
        t.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"output_schema"})
        for t in listed.tools
    ]


async def test_salon_tools_serve_lists_what_the_hub_offers_natively(tmp_path: Path) -> None:
    root = _config_dir(tmp_path)
    (tmp_path / "data").mkdir()
    sets = _native_sets(root)
    assert set(sets) == {"salon", *INTEGRATIONS}
    specs = [ServerSpec(name=name, tools=tools) for name, tools in sets.items()]
    async with ToolHub(specs) as hub:
        offered = {(s.server, s.name): s for s in hub.specs()}
    listings = await asyncio.gather(*(_served(root, name) for name in sets))
    for (name, tools), served in zip(sets.items(), listings, strict=True):
        assert served == [_as_listed(t) for t in tools.tools.values()], name
        for entry in served:
            spec = offered[(name, entry["name"])]
            caller = frozenset(tools.tools[entry["name"]].caller_arguments)
            assert spec.input_schema == without_hidden(entry["inputSchema"], caller)
            assert spec.description == entry["description"]
            notes = entry.get("annotations", {})
            assert spec.read_only == notes.get("readOnlyHint")
            assert spec.destructive == notes.get("destructiveHint")
