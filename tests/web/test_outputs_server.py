"""The outputs file server (``web.serve_outputs``): ``GET /outputs/<path>`` serves the files
under ``<data_dir>/outputs/`` read-only, with no directory listing, and nothing outside it
whatever the path says (``..``, encoded dots and slashes, absolute paths, symlinks, NUL)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from salon.store.sql import SQLStore, sqlite_url
from tests.web.conftest import serving, write_fleet

SECRET = b"TOPSECRET-not-for-the-public"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


@dataclass
class Outputs:
    url: str
    data: Path
    client: httpx2.AsyncClient


async def _fleet(tmp_path: Path, serve: bool) -> AsyncIterator[Outputs]:
    root = write_fleet(tmp_path)
    shared = root / "shared.yaml"
    text = shared.read_text(encoding="utf-8")
    switch = "true" if serve else "false"
    shared.write_text(text.replace("web: {", f"web: {{serve_outputs: {switch}, "), "utf-8")
    data = tmp_path / "data"
    minute = data / "outputs" / "2026" / "01" / "02T03:04"
    minute.mkdir(parents=True)
    (minute / "alice-cat.png").write_bytes(PNG)
    (minute / "alice-answer.txt").write_text("a cat, as asked", encoding="utf-8")
    (minute / "page.html").write_text("<script>alert(1)</script>", encoding="utf-8")
    (data / "secret.txt").write_bytes(SECRET)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_bytes(SECRET)
    (data / "outputs" / "link.txt").symlink_to(data / "secret.txt")
    (data / "outputs" / "away").symlink_to(tmp_path / "outside", target_is_directory=True)
    (data / "outputs" / "inside.png").symlink_to(minute / "alice-cat.png")
    store = SQLStore(sqlite_url(data / "salon.db"))
    await store.open()
    try:
        async with (
            serving(root, store) as (_, url),
            httpx2.AsyncClient(base_url=url, timeout=10) as client,
        ):
            yield Outputs(url, data, client)
    finally:
        await store.close()


@pytest.fixture
async def outputs(tmp_path: Path) -> AsyncIterator[Outputs]:
    async for site in _fleet(tmp_path, serve=True):
        yield site


async def _raw(url: str, target: bytes, method: bytes = b"GET") -> tuple[int, bytes]:
    """One request with the target sent byte for byte (no client normalises it)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(
            method
            + b" "
            + target
            + b" HTTP/1.1\r\nHost: 127.0.0.1:"
            + port.encode()
            + b"\r\nConnection: close\r\n\r\n"
        )
        await writer.drain()
        async with asyncio.timeout(10):
            answer = await reader.read()
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, answer


async def test_a_file_is_served_as_it_is(outputs: Outputs) -> None:
    answer = await outputs.client.get("/outputs/2026/01/02T03:04/alice-cat.png")
    assert answer.status_code == 200
    assert answer.content == PNG
    assert answer.headers["content-type"] == "image/png"
    assert answer.headers["x-content-type-options"] == "nosniff"
    text = await outputs.client.get("/outputs/2026/01/02T03:04/alice-answer.txt")
    assert text.status_code == 200
    assert text.text == "a cat, as asked"
    assert text.headers["content-type"].startswith("text/plain")
    inside = await outputs.client.get("/outputs/inside.png")  # a link that stays inside
    assert inside.content == PNG


async def test_html_is_never_a_page_of_this_site(outputs: Outputs) -> None:
    answer = await outputs.client.get("/outputs/2026/01/02T03:04/page.html")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/octet-stream"
    assert answer.headers["content-disposition"].startswith("attachment")
    assert "sandbox" in answer.headers["content-security-policy"]


@pytest.mark.parametrize(
    "target",
    [
        b"/outputs/",
        b"/outputs",
        b"/outputs/2026",
        b"/outputs/2026/01/",
        b"/outputs/2026/01/02T03:04/",
        b"/outputs/nothing.png",
    ],
)
async def test_no_directory_is_listed(outputs: Outputs, target: bytes) -> None:
    status, answer = await _raw(outputs.url, target)
    assert status in (307, 404)  # 307: Starlette's redirect of /outputs to /outputs/
    assert b"alice-cat" not in answer


@pytest.mark.parametrize(
    "target",
    [
        b"/outputs/../secret.txt",
        b"/outputs/2026/../../secret.txt",
        b"/outputs/%2e%2e/secret.txt",
        b"/outputs/%2E%2E%2Fsecret.txt",
        b"/outputs/..%2fsecret.txt",
        b"/outputs/..%5csecret.txt",
        b"/outputs/" + b"%2e%2e/" * 8 + b"etc/passwd",
        b"/outputs//etc/passwd",
        b"/outputs/%2fetc%2fpasswd",
        b"/outputs/" + str(Path("/etc/passwd")).encode(),
        b"/outputs/link.txt",
        b"/outputs/away/secret.txt",
        b"/outputs/2026/01/02T03:04/alice-cat.png%00.txt",
        b"/outputs/%00",
        b"/outputs/./link.txt",
    ],
)
async def test_a_hostile_path_gets_nothing_outside(outputs: Outputs, target: bytes) -> None:
    status, answer = await _raw(outputs.url, target)
    assert status in (400, 404), answer[:200]
    assert SECRET not in answer
    assert b"root:" not in answer


async def test_an_absolute_path_in_the_request_line_gets_nothing(outputs: Outputs) -> None:
    status, answer = await _raw(outputs.url, str(outputs.data / "secret.txt").encode())
    assert status in (400, 404)
    assert SECRET not in answer


async def test_it_is_read_only(outputs: Outputs) -> None:
    for method in (b"POST", b"PUT", b"DELETE"):
        status, _ = await _raw(outputs.url, b"/outputs/2026/01/02T03:04/alice-cat.png", method)
        assert status == 405
    assert (outputs.data / "outputs/2026/01/02T03:04/alice-cat.png").read_bytes() == PNG


async def test_off_unless_configured(tmp_path: Path) -> None:
    async for site in _fleet(tmp_path, serve=False):
        answer = await site.client.get("/outputs/2026/01/02T03:04/alice-cat.png")
        assert answer.status_code == 404


@pytest.mark.parametrize(
    "path", ["/outputs/later.png", "/outputs/link.txt", "/outputs/2026/01/", "/outputs/%00"]
)
async def test_a_missing_or_refused_file_is_not_cached(outputs: Outputs, path: str) -> None:
    answer = await outputs.client.get(path)
    assert answer.status_code == 404
    assert answer.headers["cache-control"] == "no-store"


async def test_a_file_that_appears_after_a_404_is_served(outputs: Outputs) -> None:
    assert (await outputs.client.get("/outputs/later.png")).status_code == 404
    (outputs.data / "outputs" / "later.png").write_bytes(PNG)
    answer = await outputs.client.get("/outputs/later.png")
    assert answer.status_code == 200
    assert "max-age" in answer.headers["cache-control"]  # a saved file never changes


async def test_off_is_not_cached_either(tmp_path: Path) -> None:
    async for site in _fleet(tmp_path, serve=False):
        answer = await site.client.get("/outputs/2026/01/02T03:04/alice-cat.png")
        assert answer.headers["cache-control"] == "no-store"


@pytest.mark.parametrize(("method", "path"), [("GET", "/nothing"), ("POST", "/outputs/x.png")])
async def test_the_server_s_own_404_and_405_are_not_cached(
    outputs: Outputs, method: str, path: str
) -> None:
    answer = await outputs.client.request(method, path)
    assert answer.status_code in (404, 405)
    assert answer.headers.get("cache-control") == "no-store"
