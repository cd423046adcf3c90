"""Files in tool results: saved under outputs/YYYY/MM/DDTHH:MM/, within their caps, and never
in what the model reads (no data URI, no base64)."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer
from mcp.types import (
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from fakes.vendors.images import tiny_png
from salon.config import OutputsConfig
from salon.model import Participant, ToolCall
from salon.tools.caller import Caller
from salon.tools.hub import ToolHub
from salon.tools.inline import scrub, split_inline
from salon.tools.outputs import OutputDir, file_name
from tests.tools.conftest import in_process

PNG = tiny_png(4, 4, 90)
B64 = base64.b64encode(PNG).decode()
MOMENT = datetime(2026, 3, 7, 14, 30, 12, tzinfo=UTC)
NO_BASE64 = re.compile(r"[A-Za-z0-9+/]{40,}")


def outputs_in(data_dir: Path, **limits: int) -> OutputDir:
    return OutputDir(data_dir, OutputsConfig(**limits), now=lambda: MOMENT)


def image_server() -> MCPServer:
    server = MCPServer("pics")

    @server.tool(structured_output=False)
    def sprite() -> CallToolResult:
        """Two directions, named, one with its public link."""
        south = ImageContent(
            type="image",
            data=B64,
            mime_type="image/png",
            _meta={"salon/name": "south", "salon/url": "https://cdn.example/s.png"},
        )
        west = ImageContent(
            type="image", data=B64, mime_type="image/png", _meta={"salon/name": "west"}
        )
        return CallToolResult(content=[TextContent(type="text", text="a knight"), south, west])

    @server.tool(structured_output=False)
    def inline() -> CallToolResult:
        """Images written into text, as some servers do."""
        text = f"here: data:image/png;base64,{B64} and raw {base64.b64encode(PNG * 8).decode()}"
        return CallToolResult(content=[TextContent(type="text", text=text)])

    @server.tool(structured_output=False)
    def junk() -> CallToolResult:
        """A long base64 run that is no image."""
        text = "token " + base64.b64encode(bytes(range(256)) * 2).decode() + " end"
        return CallToolResult(content=[TextContent(type="text", text=text)])

    @server.tool(structured_output=False)
    def links() -> CallToolResult:
        """An image only by link, and a file embedded as a blob."""
        link = ResourceLink(
            type="resource_link",
            name="map",
            uri="https://maps.example/m.png",
            mime_type="image/png",
        )
        blob = EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri="file:///tmp/chart.png", mime_type="image/png", blob=B64
            ),
        )
        return CallToolResult(content=[link, blob])

    return server


async def call(hub: ToolHub, tool: str) -> tuple[str, list[tuple[str, str, str, str]]]:
    alice = Caller(requester=Participant("alice", "Alice Q"))
    result = await hub.call(ToolCall("c1", tool, {}), caller=alice)
    files = [(a.filename, a.label, a.url, a.path) for a in result.attachments]
    return result.content, files


async def test_named_images_are_saved_under_the_minute_and_the_model_reads_their_paths(
    tmp_path: Path,
) -> None:
    async with ToolHub([in_process(image_server())], outputs=outputs_in(tmp_path)) as hub:
        text, files = await call(hub, "sprite")
    folder = tmp_path / "outputs" / "2026" / "03" / "07T14:30"
    assert files == [
        (
            "Alice-Q-south.png",
            "south",
            "https://cdn.example/s.png",
            str(folder / "Alice-Q-south.png"),
        ),
        ("Alice-Q-west.png", "west", "", str(folder / "Alice-Q-west.png")),
    ]
    assert (folder / "Alice-Q-south.png").read_bytes() == PNG
    assert text == (
        "a knight\n"
        "[image south (image/png, 73 bytes) saved as "
        "outputs/2026/03/07T14:30/Alice-Q-south.png, shown in the channel]\n"
        "[image west (image/png, 73 bytes) saved as "
        "outputs/2026/03/07T14:30/Alice-Q-west.png, shown in the channel]"
    )


async def test_data_uris_and_base64_runs_in_text_become_files_and_placeholders(
    tmp_path: Path,
) -> None:
    async with ToolHub([in_process(image_server())], outputs=outputs_in(tmp_path)) as hub:
        text, files = await call(hub, "inline")
        junk, junk_files = await call(hub, "junk")
    assert [f[0] for f in files] == ["Alice-Q-inline-image.png", "Alice-Q-inline-image-2.png"]
    assert not NO_BASE64.search(text), text
    assert text.startswith("here: [image inline image (image/png, 73 bytes) saved as outputs/")
    assert junk_files == []
    assert junk == "token [encoded data: 684 base64 characters left out] end"


async def test_image_links_and_embedded_files(tmp_path: Path) -> None:
    async with ToolHub([in_process(image_server())], outputs=outputs_in(tmp_path)) as hub:
        text, files = await call(hub, "links")
    assert files[0] == ("map", "map", "https://maps.example/m.png", "")
    assert files[1][:2] == ("Alice-Q-chart.png", "chart.png")
    assert text.splitlines()[0] == "[image map: https://maps.example/m.png, shown in the channel]"
    assert not NO_BASE64.search(text)


async def test_a_file_over_its_cap_is_neither_kept_nor_shown(tmp_path: Path) -> None:
    outputs = outputs_in(tmp_path, max_file_bytes=50)
    async with ToolHub([in_process(image_server())], outputs=outputs) as hub:
        text, files = await call(hub, "sprite")
    assert files == []
    assert "[south (73 bytes): over the 50 bytes limit, not kept]" in text
    assert not (tmp_path / "outputs").exists() or not any((tmp_path / "outputs").rglob("*.png"))


async def test_without_an_outputs_dir_images_are_shown_but_not_saved() -> None:
    async with ToolHub([in_process(image_server())]) as hub:
        text, files = await call(hub, "sprite")
    assert [(f[0], f[3]) for f in files] == [("south.png", ""), ("west.png", "")]
    assert "[image south (image/png, 73 bytes), shown in the channel]" in text


def test_the_oldest_files_go_first_when_the_total_is_over(tmp_path: Path) -> None:
    moments = iter(datetime(2026, 3, 7, 14, minute, tzinfo=UTC) for minute in (1, 2, 2, 3, 4))
    outputs = OutputDir(
        tmp_path, OutputsConfig(max_file_bytes=100, max_total_bytes=250), now=lambda: next(moments)
    )
    old = tmp_path / "outputs" / "2025" / "12" / "31T23:59"
    old.mkdir(parents=True)
    (old / "ancient.png").write_bytes(b"x" * 100)  # from an earlier run: counted too
    paths = [outputs.save("a.png", b"y" * 60) for _ in range(5)]
    assert all(p is not None for p in paths)
    root = tmp_path / "outputs"
    left = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.png"))
    assert left == [
        "2026/03/07T14:02/a-2.png",
        "2026/03/07T14:02/a.png",
        "2026/03/07T14:03/a.png",
        "2026/03/07T14:04/a.png",
    ]
    assert not old.exists()  # emptied folders go too
    assert outputs.save("big.png", b"z" * 101) is None


def test_folders_follow_the_bots_timezone(tmp_path: Path) -> None:
    outputs = OutputDir(tmp_path, OutputsConfig(), timezone="Asia/Tokyo", now=lambda: MOMENT)
    path = outputs.save("x.png", PNG)
    assert path is not None
    assert outputs.relative(path) == "outputs/2026/03/07T23:30/x.png"


def test_outputs_url_makes_public_links(tmp_path: Path) -> None:
    config = OutputsConfig(url="https://files.example/out/")
    outputs = OutputDir(tmp_path, config, now=lambda: MOMENT)
    path = outputs.save("x.png", PNG)
    assert path is not None
    assert outputs.public_url(path) == "https://files.example/out/2026/03/07T14:30/x.png"


@pytest.mark.parametrize(
    ("label", "mime", "owner", "name"),
    [
        ("south", "image/png", "", "south.png"),
        ("frame 2", "image/png", "Bob", "Bob-frame-2.png"),
        ("castle.jpeg", "image/jpeg", "", "castle.jpeg"),
        ("../../etc/passwd", "image/png", "", "etc-passwd.png"),
        ("", "audio/mpeg", "", "file.mp3"),
        ("x" * 200, "image/png", "", "x" * 76 + ".png"),
    ],
)
def test_file_names_are_safe(label: str, mime: str, owner: str, name: str) -> None:
    assert file_name(label, mime, owner) == name


def test_scrub_leaves_ordinary_text_and_short_tokens_alone() -> None:
    text = "sha256 " + "ab12" * 16 + " https://example.com/a/b?c=d"
    assert scrub(text) == text
    assert split_inline(text) == [text]
    assert scrub(f"x data:image/png;base64,{B64} y") == (
        "x [image/png: 100 base64 characters left out] y"
    )
