"""The configurator's bot controls and live log: debug logging toggled by an edit a running
bot applies at once, the provider test, start/stop/restart only where a supervisor runs the
bots, and today's log followed as it grows; all behind sign-in, loopback, CSRF and Host."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx2
import pytest

from fakes.llm_server import LLMServer, Scripted
from salon.config import load_config_dir
from salon.sockets import bind
from salon.web.app import build_app
from salon.web.logtail import read_chunk
from salon.web.server import WebServer
from tests.web.conftest import ENVIRON, PROVIDER_KEY, Site
from tests.web.test_configurator import csrf_of, sign_in


async def bots_page(site: Site) -> str:
    page = await site.client.get("/config/bots")
    assert page.status_code == 200
    return csrf_of(page.text)


def log_file(site: Site) -> Path:
    logs = site.root.parent / "data" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    return logs / f"salon-{datetime.now(UTC):%Y-%m-%d}.log"


async def test_debug_logging_is_toggled_in_the_bot_s_file(site: Site) -> None:
    await sign_in(site)
    token = await bots_page(site)
    answer = await site.client.post(
        "/config/bots/level", data={"bot": "salon", "level": "DEBUG", "csrf": token}
    )
    assert answer.status_code == 200
    assert "log_level DEBUG saved" in answer.text
    assert "debug logging: on" in answer.text
    text = (site.root / "bots" / "salon.yaml").read_text()
    assert "log_level: DEBUG" in text
    assert "You are calm." in text  # the rest of the file as it was
    answer = await site.client.post(
        "/config/bots/level", data={"bot": "salon", "level": "INFO", "csrf": token}
    )
    assert "debug logging: off" in answer.text
    text = (site.root / "bots" / "salon.yaml").read_text()
    assert re.findall(r"^log_level:.*$", text, re.M) == ["log_level: INFO"]


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("/config/bots/level", {"bot": "salon", "level": "DEBUG"}),
        ("/config/bots/act", {"bot": "salon", "action": "stop"}),
        ("/config/bots/probe", {"bot": "salon"}),
    ],
)
async def test_every_control_wants_the_csrf_token_and_this_site(
    site: Site, path: str, fields: dict[str, str]
) -> None:
    before = (site.root / "bots" / "salon.yaml").read_text()
    assert (await site.client.post(path, data=fields)).status_code == 401  # not signed in
    await sign_in(site)
    token = await bots_page(site)
    assert (await site.client.post(path, data={**fields, "csrf": "x" * 43})).status_code == 403
    other = {"Origin": "http://evil.example"}
    answer = await site.client.post(path, data={**fields, "csrf": token}, headers=other)
    assert answer.status_code == 403
    foreign = {"Host": "evil.example:8787"}
    answer = await site.client.post(path, data={**fields, "csrf": token}, headers=foreign)
    assert answer.status_code == 403
    assert (site.root / "bots" / "salon.yaml").read_text() == before


async def test_without_a_supervisor_start_stop_restart_say_where_they_work(site: Site) -> None:
    await sign_in(site)
    token = await bots_page(site)
    answer = await site.client.post(
        "/config/bots/act", data={"bot": "salon", "action": "restart", "csrf": token}
    )
    assert answer.status_code == 409
    assert "does not run the bots" in answer.text


async def test_the_log_of_today_is_followed_as_it_grows(site: Site) -> None:
    path = log_file(site)
    path.write_text("first line\nsecond line\n", encoding="utf-8")
    await sign_in(site)
    page = await site.client.get("/config/log")
    assert page.status_code == 200
    found = re.search(r'data-file="([^"]+)" data-offset="(\d+)"', page.text)
    assert found is not None
    assert found[1] == path.name
    assert "second line" in page.text
    offset = int(found[2])
    assert offset == path.stat().st_size
    with path.open("a", encoding="utf-8") as log:
        log.write("third line\nhalf a li")
    tail = await site.client.get("/config/log/tail", params={"file": path.name, "offset": offset})
    data = tail.json()
    assert data["text"] == "third line\n"  # the half-written line waits
    with path.open("a", encoding="utf-8") as log:
        log.write(f"ne with {PROVIDER_KEY}\n")
    tail = await site.client.get(
        "/config/log/tail", params={"file": path.name, "offset": data["offset"]}
    )
    assert tail.json()["text"] == "half a line with ***\n"  # redacted once more


@pytest.mark.parametrize(
    "name", ["../salon.db", "salon-2000-01-01.log", "/etc/passwd", "..%2fsalon.db", ""]
)
async def test_only_today_s_log_files_can_be_read(site: Site, name: str) -> None:
    log_file(site).write_text("x\n", encoding="utf-8")
    await sign_in(site)
    tail = await site.client.get("/config/log/tail", params={"file": name, "offset": 0})
    assert tail.status_code == 404


async def test_the_log_wants_a_session(site: Site) -> None:
    log_file(site).write_text("secret stuff\n", encoding="utf-8")
    page = await site.client.get("/config/log")
    assert page.status_code == 401
    assert "secret stuff" not in page.text
    tail = await site.client.get(
        "/config/log/tail", params={"file": log_file(site).name, "offset": 0}
    )
    assert tail.status_code == 401
    assert "secret stuff" not in tail.text


@pytest.fixture
async def probing(site: Site, llm_server: LLMServer) -> AsyncIterator[httpx2.AsyncClient]:
    """The site again, with a provider test (as ``salon web`` has it) on the fake LLM."""
    from salon.web_cli import FleetControl  # the web server's packages, as the CLI loads them

    shared = site.root / "shared.yaml"
    base = f"{llm_server.base_url}/v1"
    shared.write_text(
        shared.read_text().replace("model: test-model,", f"model: test-model, base_url: '{base}',")
    )
    configs = load_config_dir(site.root)
    app = build_app(
        store=site.store,
        configs=configs,
        settings=configs.bots["salon"].web,
        environ=ENVIRON,
        control=FleetControl(configs, None, ENVIRON),
    )
    server = WebServer(app, bind("127.0.0.1", 0))
    task = asyncio.create_task(server.run())
    try:
        await asyncio.wait_for(server.started.wait(), 10)
        async with httpx2.AsyncClient(base_url=server.url, timeout=30) as client:
            yield client
    finally:
        server.stop()
        await asyncio.wait_for(task, 10)
        server.close()


async def test_the_provider_test_asks_the_bot_s_provider(
    site: Site, probing: httpx2.AsyncClient, llm_server: LLMServer
) -> None:
    site.client = probing
    await sign_in(site)
    token = await bots_page(site)
    llm_server.queue("ok", Scripted(status=401, error_message="invalid api key"))
    answer = await probing.post("/config/bots/probe", data={"bot": "salon", "csrf": token})
    assert answer.status_code == 200
    assert re.search(
        r"live: provider test \(model test-model\): \d+ ms: &#x27;ok&#x27;", answer.text
    )
    assert llm_server.requests[0].headers.get("authorization") == f"Bearer {PROVIDER_KEY}"
    answer = await probing.post("/config/bots/probe", data={"bot": "salon", "csrf": token})
    assert "FAILED" in answer.text
    assert "401" in answer.text


async def test_a_log_named_file_that_is_a_symlink_is_not_followed(site: Site) -> None:
    secret = site.root.parent / "secret.txt"
    secret.write_text("not a log: private\n", encoding="utf-8")
    link = log_file(site).with_name(f"other-{datetime.now(UTC):%Y-%m-%d}.log")
    link.symlink_to(secret)
    log_file(site).write_text("a real line\n", encoding="utf-8")
    await sign_in(site)
    page = await site.client.get("/config/log", params={"file": link.name})
    assert page.status_code == 404
    assert "private" not in page.text
    assert link.name not in (await site.client.get("/config/log")).text
    tail = await site.client.get("/config/log/tail", params={"file": link.name, "offset": 0})
    assert tail.status_code == 404
    assert "private" not in tail.text


def test_a_log_swapped_for_a_symlink_after_listing_is_not_opened(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private\n", encoding="utf-8")
    link = tmp_path / "salon-2000-01-01.log"
    link.symlink_to(secret)
    with pytest.raises(OSError, match="symbolic links"):
        read_chunk(link, 0)
