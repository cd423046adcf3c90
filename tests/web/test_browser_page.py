"""What an operator reads on the activity page and the configurator, in Debian's Chromium:
costs of cheap models, the plot's labels, the cards as rows stream in, long names, a cache
miss in words, and a configurator overview that shows what is set."""

from __future__ import annotations

import time
from pathlib import Path

from playwright.async_api import Browser, Locator, Page, expect

from salon.config import load_config_dir
from salon.store.sql import SQLStore, sqlite_url
from tests.web.conftest import Site, serving
from tests.web.data import activation, llm_call, sample_traces, write_sample
from tests.web.test_browser import browser, pytestmark, sign_in  # noqa: F401

LONG_NAME = "Maximilian_Alexander_Konstantin_von_Hohenzollern_Sigmaringen_the_Third"  # no break


def shot(tmp_path: Path, name: str) -> str:
    """Where a check's screenshot goes (look at them: pytest --basetemp=DIR keeps them)."""
    return str(tmp_path / name)


async def box(locator: Locator) -> dict[str, float]:
    found = await locator.bounding_box()
    assert found is not None, "the element is not shown"
    return found


async def text_box(locator: Locator) -> dict[str, float]:
    """Where an element's text is drawn, overflow included (its own box is its grid cell)."""
    found: dict[str, float] = await locator.evaluate(
        "el => { const r = document.createRange(); r.selectNodeContents(el);"
        " const b = r.getBoundingClientRect();"
        " return {x: b.x, y: b.y, width: b.width, height: b.height}; }"
    )
    return found


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["x"] >= outer["x"] - 0.5
        and inner["y"] >= outer["y"] - 0.5
        and inner["x"] + inner["width"] <= outer["x"] + outer["width"] + 0.5
        and inner["y"] + inner["height"] <= outer["y"] + outer["height"] + 0.5
    )


async def opened(site: Site, browser: Browser) -> Page:  # noqa: F811 - the fixture
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    await sign_in(page, site.url)
    return page


async def test_a_cheap_models_row_shows_its_cost_in_significant_digits(
    site: Site,
    browser: Browser,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    now = time.time()
    cheap = activation(now - 60, "hi", llm_call("hi", read=0, write=0, cost=0.0000234))
    free = activation(now - 30, "and you?", llm_call("and you?", read=0, write=0, cost=0.0))
    await site.store.write_traces([cheap, free])
    page = await opened(site, browser)
    rows = page.locator("#timeline details.trace")
    await expect(rows).to_have_count(2)
    await expect(rows.nth(1).locator(".cost")).to_have_text("$0.0000234")
    await expect(rows.nth(0).locator(".cost")).to_have_text("$0")
    await page.screenshot(path=shot(tmp_path, "cheap-costs.png"), full_page=True)


async def test_every_label_of_the_plot_is_inside_the_plot(
    site: Site,
    browser: Browser,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    now = time.time()
    cheap = [
        activation(now - day * 86400, "hi", llm_call("hi", read=10, write=0, cost=0.00001234 * day))
        for day in range(1, 4)
    ]
    await site.store.write_traces(cheap)
    page = await opened(site, browser)
    plot = page.locator("svg.plot")
    await expect(plot.locator("text").first).to_have_text("$0.000037")
    # The plot and its labels measured in one go: the page may still be moving under it
    # (rows streaming in above), and boxes read one call apart would be of two layouts.
    boxes: list[tuple[str, dict[str, float]]] = await plot.evaluate(
        "svg => [['', svg.getBoundingClientRect()], ...Array.from(svg.querySelectorAll('text'),"
        " t => [t.textContent, t.getBoundingClientRect()])].map(([n, b]) =>"
        " [n, {x: b.x, y: b.y, width: b.width, height: b.height}])"
    )
    (_, whole), *labels = boxes
    assert len(labels) >= 4
    for text, found in labels:
        assert inside(found, whole), (text, found, whole)
    await plot.screenshot(path=shot(tmp_path, "plot.png"))


async def test_the_cards_count_the_rows_that_stream_in(
    site: Site,
    browser: Browser,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    await write_sample(site.store)
    page = await opened(site, browser)
    activations = page.locator(".card", has_text="activations").locator("b")
    await expect(activations).to_have_text("16")
    newest = sample_traces()[-1]
    newest.requester = {"id": "dana", "name": "Dana"}
    await site.store.write_traces([newest])
    await expect(page.locator("#timeline details.trace")).to_have_count(17, timeout=15_000)
    await expect(activations).to_have_text("17")
    await page.screenshot(path=shot(tmp_path, "streamed.png"))


async def test_a_long_author_name_stays_out_of_the_outcome_column(
    site: Site,
    browser: Browser,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    trace = activation(time.time() - 60, "hi", llm_call("hi", read=0, write=0, cost=0.001))
    trace.requester = {"id": "max", "name": LONG_NAME}
    await site.store.write_traces([trace])
    page = await opened(site, browser)
    row = page.locator("#timeline details.trace").first
    await row.screenshot(path=shot(tmp_path, "long-name.png"))
    name = await text_box(row.locator(".who"))
    outcome = await box(row.locator(".outcome"))
    right = name["x"] + name["width"]
    assert right <= outcome["x"], f"the name runs to {right}, the outcome starts at {outcome['x']}"
    await expect(row.locator(".who")).to_contain_text("Maximilian")
    await expect(row.locator(".who")).to_have_attribute(
        "title", f"salon in discord:1001 · {LONG_NAME}"
    )
    await row.screenshot(path=shot(tmp_path, "long-name.png"))


async def test_a_cache_miss_says_its_shares_and_its_cause_in_words(
    site: Site,
    browser: Browser,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    await write_sample(site.store)
    page = await opened(site, browser)
    broken = page.locator("#timeline details.broken")
    await expect(broken.locator(".read")).to_have_text("read 0% · expected 2%")
    await expect(broken.locator(".break")).to_have_text(
        "cache break: edited message: a message already in the prompt was edited since the"
        " previous call"
    )
    kept = page.locator("#timeline details.trace").nth(3)  # a prefix kept: no break
    await expect(kept.locator(".read")).to_have_text("read 97% · expected 95%")
    await expect(kept.locator(".break")).to_have_count(0)
    await broken.screenshot(path=shot(tmp_path, "cache-miss.png"))
    rows = page.locator("#timeline details.trace")
    for n in range(await rows.count()):  # the numbers stay in their column, bar and all
        cell = await box(rows.nth(n).locator(".cache"))
        assert inside(await text_box(rows.nth(n).locator(".read")), cell)
        assert inside(await box(rows.nth(n).locator("svg.share")), cell)


async def test_a_miss_without_a_break_says_the_cache_was_not_kept(
    site: Site,
    browser: Browser,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    missed = llm_call("hi", read=0, write=5000, cost=0.02, expected_read_share=0.9)
    await site.store.write_traces([activation(time.time() - 60, "hi", missed)])
    page = await opened(site, browser)
    row = page.locator("#timeline details.trace").first
    await expect(row.locator(".read")).to_have_text("read 0% · expected 90%")
    await expect(row.locator(".break")).to_contain_text(
        "cache miss: the provider read less than expected"
    )
    await row.screenshot(path=shot(tmp_path, "cache-miss-unbroken.png"))


# -- the configurator --------------------------------------------------------------------

SHARED = """\
providers:
  main: {type: anthropic, model: claude-sonnet-5-5, api_key_env: TEST_API_KEY}
  local: {type: openai, model: llama3.2, base_url: "http://127.0.0.1:11434/v1"}
provider: main
prices:
  claude-sonnet-5-5: {input: 2.0, output: 10.0}
web: {port: 8787, public_url: "http://127.0.0.1:8787"}
authorized_roles: ["ops"]
"""
FLEET_BOT = """\
name: {name}
system_prompt: You are {name}, a calm helper.
max_tokens: 800
platforms:
  irc: {{server: 127.0.0.1, nick: {nick}, channels: ["#salon"]}}
  discord: {{token_env: DISCORD_TOKEN_{nick}}}
"""


def write_three_bots(tmp_path: Path) -> Path:
    root = tmp_path / "config"
    (root / "bots").mkdir(parents=True)
    shared = SHARED + f"data_dir: {tmp_path / 'data'}\n"
    (root / "shared.yaml").write_text(shared, encoding="utf-8")
    for name in ("Ada", "Bea", "Cy"):
        text = FLEET_BOT.format(name=name, nick=name.lower())
        (root / "bots" / f"{name.lower()}.yaml").write_text(text, encoding="utf-8")
    return root


async def test_the_overview_of_three_bots_shows_what_is_set_and_defaults_on_demand(
    tmp_path: Path,
    browser: Browser,  # noqa: F811 - the fixture
) -> None:
    from tests.web.test_browser import sign_in as activity_sign_in

    root = write_three_bots(tmp_path)
    (tmp_path / "data").mkdir()
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    try:
        settings = load_config_dir(root).bots["ada"].web
        async with serving(root, store, settings=settings) as (_, url):
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await activity_sign_in(page, url)
            await page.goto(f"{url}/config")
            await expect(page.locator("section.bot h2")).to_have_count(3)
            height = await page.evaluate("document.documentElement.scrollHeight")
            await page.screenshot(path=shot(tmp_path, "config-three-bots.png"), full_page=True)
            assert height < 2200, f"the overview is {height} px tall"  # 9 005 px before
            ada = page.locator("section.bot", has=page.locator("h2", has_text="ada"))
            platforms = ada.locator("tr", has=page.locator("th", has_text="platforms"))
            written = platforms.locator("td.set > pre")
            await expect(written).to_contain_text("nick: ada")
            await expect(written).not_to_contain_text("port:")  # a default
            await expect(platforms.locator("details.defaults pre")).not_to_be_visible()
            shared = page.locator("section.shared")
            await expect(shared.locator("th", has_text="providers")).to_have_count(1)
            await expect(ada.locator("th", has_text="providers")).to_have_count(0)
            defaults = platforms.locator("details.defaults")
            await defaults.locator("summary").click()
            await expect(defaults.locator("pre")).to_contain_text("port:")
            await page.screenshot(path=shot(tmp_path, "config-defaults-open.png"), full_page=True)
    finally:
        await store.close()
