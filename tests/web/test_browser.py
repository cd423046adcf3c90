"""The pages in a real browser: Debian's Chromium driven by Playwright, against the real
server on 127.0.0.1. Screenshots of both pages are kept in docs/."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from fakes.billing import CacheBilling
from fakes.llm_server import LLMServer
from salon.app import BotApp
from salon.config import Secrets, load_config_dir
from salon.llm import FakeProvider
from salon.llm.factory import build_provider
from salon.model import Participant
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore, sqlite_url
from tests.web.conftest import ACTIVITY_KEY, Site, serving
from tests.web.data import sample_traces, write_sample
from tests.web.test_health_metrics_events import beat

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS = Path(__file__).resolve().parents[2] / "docs"
# The screenshots in docs/ are taken again only on request: SALON_SCREENSHOTS=1 pytest …
SHOTS = DOCS if os.environ.get("SALON_SCREENSHOTS") else None
ALICE = Participant("alice", "Alice")

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None, reason="needs Debian's chromium (scripts/test installs it)"
)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        chromium = await playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            yield chromium
        finally:
            await chromium.close()


async def sign_in(page: Page, url: str) -> None:
    await page.goto(f"{url}/activity")
    await page.fill("#key", ACTIVITY_KEY)
    await page.click("button[type=submit]")
    await expect(page.locator("#timeline")).to_be_visible()


async def test_the_activity_page_shows_the_timeline_plot_and_a_cache_break(
    site: Site, browser: Browser, tmp_path: Path
) -> None:
    await write_sample(site.store)
    await site.store.health.beat(beat())
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(site.url) else outside.append(r.url))
    await page.goto(f"{site.url}/activity")
    await page.fill("#key", "not the key")
    await page.click("button[type=submit]")
    await expect(page.locator(".problems")).to_contain_text("not the activity key")
    await sign_in(page, site.url)
    rows = page.locator("#timeline details.trace")
    await expect(rows).to_have_count(16)
    await expect(page.locator("svg.plot rect.bar")).to_have_count(30)
    await expect(page.locator("#timeline details.outcome-error")).to_have_count(1)
    broken = page.locator("#timeline details.broken")
    await expect(broken).to_have_count(1)
    await expect(broken.locator(".break")).to_contain_text("cache break: edited message: ")
    await broken.locator("summary").click()
    detail = broken.locator(".trace-detail")
    await expect(detail.locator(".cache-break")).to_contain_text(
        "cache break: edited message at message 0 (m-old-1)"
    )
    await expect(detail.locator(".transcript")).to_contain_text("Bob: the deploy moved to monday")
    await expect(detail.locator(".flag")).to_contain_text("cache write larger than expected")
    await page.screenshot(path=str((SHOTS or tmp_path) / "web-activity.png"), full_page=True)
    assert outside == []


async def test_a_new_activation_appears_at_the_top_without_a_reload(
    site: Site, browser: Browser
) -> None:
    await write_sample(site.store)
    page = await browser.new_page()
    await sign_in(page, site.url)
    rows = page.locator("#timeline details.trace")
    await expect(rows).to_have_count(16)
    newest = sample_traces()[-1]
    newest.triggers = [{"id": "late", "author": "Dana", "text": "late question", "link": None}]
    newest.requester = {"id": "dana", "name": "Dana"}
    await site.store.write_traces([newest])
    await expect(rows).to_have_count(17, timeout=15_000)  # the page asks every 5 s
    await expect(rows.first).to_contain_text("Dana")


async def test_an_activation_of_a_running_bot_opens_into_its_exact_request(
    tmp_path: Path, llm_server: LLMServer, browser: Browser
) -> None:
    """Through the memory platform and the loopback Anthropic server: an edited old message
    breaks the cache, and the page says so."""
    from tests.conftest import bot_config
    from tests.web.conftest import write_fleet

    llm_server.billing = CacheBilling()
    providers = {
        "test": {
            "type": "anthropic",
            "model": "claude-sonnet-5-5",
            "base_url": llm_server.base_url,
            "api_key_env": "SOME_KEY",
            "backoff_initial": 0,
        }
    }
    config = bot_config(providers=providers, builtin_tools=False, data_dir=str(tmp_path / "data"))
    secrets = Secrets({"SOME_KEY": "sk-b4rowser-key"})
    app = BotApp(
        key="salon",
        config=config,
        root=tmp_path,
        secrets=secrets,
        provider=build_provider(config, secrets),
    )
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    for i in range(30):
        # Long enough that the prefix passes the model's minimum cacheable length.
        platform.add(dm, ALICE, f"an earlier message, number {i}, with more words in it " * 3)
    stop = asyncio.Event()
    async with app:
        running = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        for n, text in enumerate(("first question", "second question", "third question"), 1):
            if n == 3:
                platform.edit(platform.messages(dm)[3], "this one was edited since")
            await platform.post(dm, ALICE, text)
            await platform.wait_sent(n)
            await app.agent.wait_idle()
        await app.traces.flush()
        stop.set()
        await asyncio.wait_for(running, 15)
    root = write_fleet(tmp_path / "site")
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    try:
        async with serving(root, store) as (_, url):
            page = await browser.new_page()
            await sign_in(page, url)
            rows = page.locator("#timeline details.trace")
            await expect(rows).to_have_count(3)
            newest = rows.first
            await expect(newest.locator(".break")).to_contain_text("cache break: edited message: ")
            await newest.locator("summary").click()
            await expect(newest.locator(".cache-break")).to_contain_text(
                "edited message at message 3"
            )
            await expect(newest.locator(".transcript")).to_contain_text("this one was edited since")
            await newest.locator("details.raw summary").click()
            await expect(newest.locator("details.raw pre")).to_contain_text('"cache_control"')
    finally:
        await store.close()


async def sign_in_with_a_link(
    page: Page, port: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a person does: `salon config-link config`, then open the link it printed."""
    from salon.cli import main
    from tests.web.conftest import ENVIRON

    for name, value in ENVIRON.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    assert main(["config-link", "config", "--port", str(port)]) == 0
    link = capsys.readouterr().out.strip()
    await page.goto(link)
    await expect(page).to_have_url(f"http://127.0.0.1:{port}/config")  # the page moves on
    await expect(page.locator("h1")).to_have_text("Configurator")


async def test_the_configurator_refuses_a_broken_edit_and_applies_a_good_one(
    tmp_path: Path,
    browser: Browser,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tests.web.conftest import write_fleet

    write_fleet(tmp_path)
    monkeypatch.chdir(tmp_path)  # paths as a person types them: `salon web config`
    root = Path("config")
    (tmp_path / "data").mkdir(exist_ok=True)
    configs = load_config_dir(root)
    provider = FakeProvider(["one", "two"])
    app = BotApp(
        key="salon",
        config=configs.bots["salon"],
        root=root,
        secrets=Secrets({}),
        provider=provider,
        channel_configs=configs.channel_configs("salon"),
        watch_config=True,
    )
    platform = MemoryPlatform(bot_name="Salon")
    dm = platform.channel("dm", is_direct=True)
    bot_file = root / "bots" / "salon.yaml"
    before = bot_file.read_text()
    stop = asyncio.Event()
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    async with app:
        running = asyncio.create_task(app.serve(stop, [platform]))
        await asyncio.wait_for(platform.started.wait(), 5)
        await store.open()
        try:
            async with serving(root, store) as (server, url):
                page = await browser.new_page(viewport={"width": 1280, "height": 900})
                await page.goto(f"{url}/config/edit?file=bots/salon.yaml")
                await expect(page.locator(".login")).to_contain_text("salon config-link")
                await sign_in_with_a_link(page, server.port, capsys, monkeypatch)
                await page.click("a[href='/config/edit?file=bots/salon.yaml']")
                await page.fill("textarea", before + "max_tokens: -5\n")
                await page.click("button[type=submit]")
                problems = page.locator(".problems li")
                await expect(problems).to_have_count(1)
                await expect(problems).to_contain_text(
                    "error: config/bots/salon.yaml:5: max_tokens:"
                )
                await expect(page.locator(".problems")).to_contain_text("Not saved")
                assert bot_file.read_text() == before
                shot = (SHOTS or tmp_path) / "web-configurator.png"
                await page.screenshot(path=str(shot), full_page=True)
                await page.fill("textarea", before.replace("You are calm.", "You are cheerful."))
                await page.click("button[type=submit]")
                await expect(page.locator(".saved")).to_contain_text("Saved.")
                assert "You are cheerful." in bot_file.read_text()
                await asyncio.wait_for(app.upkeep.wait_reloads(1), 10)
                await platform.post(dm, ALICE, "hello")
                await platform.wait_sent(1)
        finally:
            await store.close()
            stop.set()
            await asyncio.wait_for(running, 15)
    assert provider.requests[0].system == "You are cheerful."
