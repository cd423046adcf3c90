"""Native tool sets behind the hub: schemas, annotations, the caller, errors the model
reads, progress, images as files, timeouts, and the same set served over MCP."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Literal

import pytest
from mcp import Client
from mcp.types import ImageContent, TextContent
from pydantic import Field

from fakes.vendors.images import tiny_png
from salon.config import OutputsConfig
from salon.errors import ToolError
from salon.model import ChannelRef, Participant, ToolCall
from salon.tools.base import Progress
from salon.tools.caller import Caller
from salon.tools.hub import ServerSpec, ToolHub
from salon.tools.mcp_serve import to_mcp_server
from salon.tools.native import Annotations, Image, Result, ToolSet
from salon.tools.outputs import OutputDir

PNG = tiny_png(4, 4, 90)
LOOKUP = Annotations(read_only=True, destructive=False, idempotent=True, open_world=True)


class Opened:
    """A resource the set keeps open while it serves (as the integrations' HTTP clients)."""

    def __init__(self) -> None:
        self.open = False

    async def __aenter__(self) -> Opened:
        self.open = True
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.open = False


def kit(opened: Opened | None = None, release: asyncio.Event | None = None) -> ToolSet:
    tools = ToolSet("kit", instructions="test tools", resources=[opened] if opened else [])

    @tools.tool(annotations=LOOKUP, structured_output=False, caller_arguments=("channel",))
    async def lookup(
        place: Annotated[str, Field(min_length=2, description="a city")],
        units: Literal["metric", "imperial"] = "metric",
        *,
        caller: Caller,
    ) -> Result:
        """Look a place up."""
        return Result.text(f"{place} in {units} for {caller.channel_key or 'nobody'}")

    @tools.tool(caller_arguments=("channel", "requester_id", "requester_roles"))
    async def whoami(caller: Caller) -> dict[str, object]:
        """Who asks, with which roles, and where."""
        who = caller.requester
        return {"id": who.id, "roles": list(who.roles), "where": caller.channel_key}

    @tools.tool()
    def refuse(reason: str) -> str:
        """Always refuses."""
        raise ToolError(f"no: {reason}")

    @tools.tool()
    async def crash() -> str:
        """Always crashes."""
        raise RuntimeError("secret internals")

    @tools.tool(structured_output=False)
    async def draw(progress: Progress, steps: int = 2) -> Result:
        """Draw a picture, reporting progress."""
        for step in range(1, steps + 1):
            await progress(step, steps, f"step {step}")
        return Result(("drawn", Image(PNG, "image/png", name="south", url="https://x/s.png")))

    @tools.tool()
    async def wait() -> str:
        """Waits until released."""
        assert release is not None
        await release.wait()
        return "released"

    @tools.tool()
    async def stats() -> dict[str, object]:
        """Some numbers."""
        return {"messages": 3, "people": ["a", "b"]}

    return tools


def spec(tools: ToolSet, **options: object) -> ServerSpec:
    return ServerSpec(name="kit", tools=tools, hidden_arguments=frozenset({"channel"}), **options)  # type: ignore[arg-type]


async def test_the_hub_offers_a_native_set_with_its_schemas_and_annotations() -> None:
    opened = Opened()
    async with ToolHub([spec(kit(opened))]) as hub:
        assert opened.open
        lookup = hub.get("lookup")
        assert lookup is not None
        assert lookup.read_only is True
        assert lookup.destructive is False
        assert lookup.description == "Look a place up."
        assert set(lookup.input_schema["properties"]) == {"place", "units"}  # channel hidden
        assert lookup.input_schema["required"] == ["place"]
        refuse = hub.get("refuse")
        assert refuse is not None
        assert refuse.read_only is None
        draw = hub.get("draw")
        assert draw is not None
        assert "progress" not in draw.input_schema["properties"]
    assert not opened.open


async def test_the_caller_is_salons_and_bad_arguments_are_refused() -> None:
    async with ToolHub([spec(kit())]) as hub:
        call = ToolCall("1", "lookup", {"place": "Lyon", "channel": "irc:#evil"})
        result = await hub.call(call, caller=Caller(ChannelRef("irc", "#salon")))
        assert result.content == "Lyon in metric for irc:#salon"
        assert not result.is_error
        bad = await hub.call(ToolCall("2", "lookup", {"place": "L", "units": "kelvin"}))
        assert bad.is_error
        assert bad.content.startswith("invalid arguments for lookup: ")
        assert "place" in bad.content
        assert "units" in bad.content


async def test_a_native_tool_sees_the_callers_roles_exactly() -> None:
    roles = ("Mods, Team", "admin")
    caller = Caller(ChannelRef("discord", "100"), Participant("alice", "Alice", roles=roles))
    async with ToolHub([spec(kit())]) as hub:
        forged = {"requester_roles": "owner", "requester_id": "root"}
        result = await hub.call(ToolCall("1", "whoami", forged), caller=caller)
        whoami = hub.get("whoami")
    assert not result.is_error, result.content
    assert '"roles": [\n    "Mods, Team",\n    "admin"\n  ]' in result.content
    assert '"id": "alice"' in result.content
    assert whoami is not None
    assert whoami.input_schema["properties"] == {}  # the served caller is not the model's


async def test_failures_are_error_results_worded_as_over_mcp(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with ToolHub([spec(kit())]) as hub:
        refused = await hub.call(ToolCall("1", "refuse", {"reason": "because"}))
        assert refused.is_error
        assert refused.content == "Error executing tool refuse: no: because"
        with caplog.at_level(logging.ERROR):
            crashed = await hub.call(ToolCall("2", "crash", {}))
        assert crashed.is_error
        assert crashed.content == "Error executing tool crash"
        assert "secret internals" in caplog.text  # the log has it, the model does not
        stats = await hub.call(ToolCall("3", "stats", {}))
        assert '"messages": 3' in stats.content


async def test_progress_reaches_the_caller_and_images_become_files(tmp_path: Path) -> None:
    moment = datetime(2026, 3, 7, 14, 30, tzinfo=UTC)
    outputs = OutputDir(tmp_path, OutputsConfig(), now=lambda: moment)
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    async with ToolHub([spec(kit())], outputs=outputs) as hub:
        result = await hub.call(
            ToolCall("1", "draw", {"steps": 3}),
            caller=Caller(requester=Participant("ann", "ann")),
            progress=progress,
        )
    assert reports == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert not result.is_error
    (image,) = result.attachments
    assert image.label == "south"
    assert image.url == "https://x/s.png"
    assert image.path is not None
    assert await asyncio.to_thread(Path(image.path).read_bytes) == PNG
    assert re.search(r"\[image south \(image/png, \d+ bytes\) saved as outputs/", result.content)


async def test_a_call_past_the_servers_timeout_is_an_error_result() -> None:
    release = asyncio.Event()
    async with ToolHub([spec(kit(release=release), timeout=0.05)]) as hub:
        result = await asyncio.wait_for(hub.call(ToolCall("1", "wait", {})), 10)
    assert result.is_error
    assert result.content == "wait timed out after 0.05s"


async def test_two_sets_with_one_tool_name_are_told_apart() -> None:
    other = ServerSpec(name="other", tools=kit())
    async with ToolHub([spec(kit()), other]) as hub:
        names = {s.name for s in hub.specs()}
        assert {"kit_lookup", "other_lookup"} <= names
        result = await hub.call(ToolCall("1", "other_lookup", {"place": "Oslo"}))
        assert result.content == "Oslo in metric for nobody"


async def test_the_same_set_served_over_mcp_gives_the_same_results() -> None:
    async with Client(to_mcp_server(kit()), cache=None) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert listed["lookup"].annotations is not None
        assert listed["lookup"].annotations.read_only_hint is True
        assert "progress" not in listed["draw"].input_schema["properties"]
        refused = await client.call_tool("refuse", {"reason": "because"})
        assert refused.is_error
        assert isinstance(refused.content[0], TextContent)
        assert refused.content[0].text == "Error executing tool refuse: no: because"
        seen: list[float] = []

        async def progress(done: float, total: float | None, message: str | None) -> None:
            seen.append(done)

        asked = {"requester_id": "bob", "requester_roles": "mods,ops", "channel": "irc:#salon"}
        who = await client.call_tool("whoami", asked)
        assert who.structured_content == {
            "id": "bob",
            "roles": ["mods", "ops"],
            "where": "irc:#salon",
        }
        drawn = await client.call_tool("draw", {"steps": 2}, progress_callback=progress)
        image = drawn.content[1]
        assert isinstance(image, ImageContent)
        assert image.meta == {"salon/name": "south", "salon/url": "https://x/s.png"}
        assert seen == [1, 2]
