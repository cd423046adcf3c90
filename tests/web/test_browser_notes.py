"""The configurator's notes in Debian's Chromium: listed after signing in with a link,
edited and deleted through the page's own forms (their CSRF token and Origin)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from playwright.async_api import Browser, expect

from salon.notes import NoteScope, Provenance, Scope
from salon.store.sql import SQLStore, sqlite_url
from tests.web.conftest import serving, write_fleet
from tests.web.test_browser import browser, pytestmark, sign_in_with_a_link  # noqa: F401

SAID = datetime(2026, 11, 20, 18, 30, tzinfo=UTC)


async def test_the_notes_are_listed_edited_and_deleted_in_the_page(
    tmp_path: Path,
    browser: Browser,  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_fleet(tmp_path)
    monkeypatch.chdir(tmp_path)
    root = Path("config")
    (tmp_path / "data").mkdir(exist_ok=True)
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    try:
        said = Provenance("1001", "Alice", "discord:10", "#general", "m-1", SAID)
        kept = await store.notes.add_note(
            "salon", NoteScope(Scope.PERSON, "1001"), "alice likes quokkas", said
        )
        gone = await store.notes.add_note(
            "salon", NoteScope(Scope.CHANNEL, "discord:10"), "standup at nine", said
        )
        async with serving(root, store) as (server, url):
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{url}/config/notes")
            await expect(page.locator(".login")).to_be_visible()
            await expect(page.locator("body")).not_to_contain_text("quokkas")
            await sign_in_with_a_link(page, server.port, capsys, monkeypatch)
            await page.click("a[href='/config/notes']")
            rows = page.locator("table.notes tr")
            await expect(rows).to_have_count(3)  # the heading and two notes
            row = rows.filter(has_text="#general").filter(has=page.locator("textarea"))
            await expect(row.first).to_be_visible()
            editor = page.locator(f"tr:has(input[name=id][value='{kept.id}']) textarea")
            await editor.fill("alice likes wombats")
            await (
                page.locator(f"tr:has(input[name=id][value='{kept.id}'])")
                .get_by_role("button", name="save")
                .click()
            )
            await expect(page.locator(".saved")).to_have_text(f"Saved note {kept.id}.")
            await (
                page.locator(f"tr:has(input[name=id][value='{gone.id}'])")
                .get_by_role("button", name="delete")
                .click()
            )
            await expect(page.locator(".saved")).to_have_text(f"Deleted note {gone.id}.")
            await expect(page.locator("table.notes tr")).to_have_count(2)
        (note,) = await store.notes.list_notes("salon")
        assert note.text == "alice likes wombats"
        assert note.provenance == said
    finally:
        await store.close()
