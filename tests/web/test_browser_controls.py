"""The configurator's live log and debug toggle in Debian's Chromium: the page follows
today's log file as lines are written, under the page's CSP, and the toggle's form works."""

from __future__ import annotations

from datetime import UTC, datetime

from playwright.async_api import Browser, expect

from tests.web.conftest import Site
from tests.web.test_browser import browser, pytestmark, sign_in  # noqa: F401


async def test_the_log_page_follows_the_file_as_it_grows(
    site: Site,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    logs = site.root.parent / "data" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    path = logs / f"salon-{datetime.now(UTC):%Y-%m-%d}.log"
    path.write_text("INFO salon: first line\n", encoding="utf-8")
    page = await browser.new_page()
    problems: list[str] = []
    await sign_in(page, site.url)
    # From here on: a script blocked by the CSP or a failed poll shows as a console error.
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    # A load a navigation cut short (ERR_ABORTED) is no problem of the page's.
    page.on(
        "requestfailed",
        lambda r: problems.append(r.url) if r.failure != "net::ERR_ABORTED" else None,
    )
    page.on(
        "response",
        lambda r: problems.append(r.url) if "/config/log/tail" in r.url and not r.ok else None,
    )
    await page.goto(f"{site.url}/config/log")
    tail = page.locator("#log-tail")
    await expect(tail).to_contain_text("first line")
    with path.open("a", encoding="utf-8") as log:
        log.write("DEBUG salon.agent: written while the page was open\n")
    await expect(tail).to_contain_text("written while the page was open", timeout=10_000)
    with path.open("a", encoding="utf-8") as log:
        log.write("INFO salon: and one more\n")
    await expect(tail).to_contain_text("and one more", timeout=10_000)
    assert (await tail.inner_text()).count("first line") == 1  # appended, never repeated

    await page.goto(f"{site.url}/config/bots")
    await page.click("#bot-salon button[name=debug]")
    await expect(page.locator("p.saved")).to_contain_text("log_level DEBUG saved")
    await expect(page.locator("#bot-salon button[name=debug]")).to_contain_text("on")
    assert "log_level: DEBUG" in (site.root / "bots" / "salon.yaml").read_text()
    assert problems == []
