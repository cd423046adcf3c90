"""The configurator's notes: listed (by scope, by person, a page at a time), edited and
deleted by the signed-in operator on loopback, with the configurator's CSRF rules; nothing
of them without a session."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from salon.notes import NoteScope, Provenance, Scope
from tests.web.conftest import Site
from tests.web.test_configurator import csrf_of, sign_in

SAID = datetime(2026, 11, 20, 18, 30, tzinfo=UTC)
ALICE, BOB = "1001", "1002"


def _said(who: str, name: str) -> Provenance:
    return Provenance(who, name, "discord:10", "#general", f"m-{who}", SAID)


async def _notes(site: Site) -> tuple[int, int, int]:
    notes = site.store.notes
    hers = await notes.add_note(
        "salon", NoteScope(Scope.PERSON, ALICE), "alice likes quokkas", _said(ALICE, "Alice")
    )
    his = await notes.add_note(
        "salon", NoteScope(Scope.PERSON, BOB), "bob likes zebrafish", _said(BOB, "Bob")
    )
    channel = await notes.add_note(
        "salon", NoteScope(Scope.CHANNEL, "discord:10"), "standup at nine", _said(ALICE, "Alice")
    )
    return hers.id, his.id, channel.id


async def test_without_a_session_nothing_of_the_notes_is_shown_or_changed(site: Site) -> None:
    hers, _, _ = await _notes(site)
    page = await site.client.get("/config/notes", params={"bot": "salon"})
    assert page.status_code == 401
    assert "quokkas" not in page.text
    for path, data in (
        ("/config/notes/edit", {"bot": "salon", "id": str(hers), "text": "changed"}),
        ("/config/notes/delete", {"bot": "salon", "id": str(hers)}),
    ):
        refused = await site.client.post(path, data={**data, "csrf": "x" * 43})
        assert refused.status_code == 401
    found = await site.store.notes.notes_of_person(ALICE, bot="salon")
    assert [n.text for n in found] == ["alice likes quokkas", "standup at nine"]


async def test_the_notes_are_listed_with_their_provenance_and_filtered(site: Site) -> None:
    hers, his, channel = await _notes(site)
    await sign_in(site)
    page = await site.client.get("/config/notes", params={"bot": "salon"})
    assert page.status_code == 200
    for text in ("alice likes quokkas", "bob likes zebrafish", "standup at nine"):
        assert text in page.text
    assert "Alice" in page.text
    assert "#general" in page.text
    assert "2026-11-20 18:30" in page.text
    people = await site.client.get("/config/notes", params={"bot": "salon", "scope": "person"})
    assert "standup" not in people.text
    assert "zebrafish" in people.text
    alice = await site.client.get("/config/notes", params={"bot": "salon", "person": ALICE})
    assert "quokkas" in alice.text
    assert "standup" in alice.text  # she said it
    assert "zebrafish" not in alice.text
    assert {hers, his, channel} == {
        int(x) for x in re.findall(r'name="id" value="(\d+)"', page.text)
    }


async def test_the_notes_come_a_page_at_a_time(site: Site) -> None:
    for n in range(60):
        await site.store.notes.add_note(
            "salon", NoteScope(Scope.BOT), f"fact number {n:02d}", _said(ALICE, "Alice")
        )
    await sign_in(site)
    first = await site.client.get("/config/notes", params={"bot": "salon"})
    assert "fact number 59" in first.text
    assert "fact number 09" not in first.text
    older = re.search(r'href="(/config/notes\?[^"]*before=\d+[^"]*)"', first.text)
    assert older is not None
    second = await site.client.get(older[1].replace("&amp;", "&"))
    assert "fact number 09" in second.text
    assert "fact number 59" not in second.text


async def test_a_note_is_edited_and_deleted_with_the_csrf_token_only(site: Site) -> None:
    hers, his, _ = await _notes(site)
    await sign_in(site)
    page = await site.client.get("/config/notes", params={"bot": "salon"})
    token = csrf_of(page.text)
    edit = {"bot": "salon", "id": str(hers), "text": "alice likes wombats"}
    refused = await site.client.post("/config/notes/edit", data={**edit, "csrf": "x" * 43})
    assert refused.status_code == 403
    saved = await site.client.post("/config/notes/edit", data={**edit, "csrf": token})
    assert saved.status_code == 200
    assert "Saved note" in saved.text
    texts = [n.text for n in await site.store.notes.notes_of_person(ALICE)]
    assert "alice likes wombats" in texts
    note = (await site.store.notes.notes_of_person(ALICE))[0]
    assert note.provenance == _said(ALICE, "Alice")  # the provenance stays
    gone = {"bot": "salon", "id": str(his)}
    refused = await site.client.post(
        "/config/notes/delete",
        data={**gone, "csrf": token},
        headers={"Origin": "http://evil.example"},
    )
    assert refused.status_code == 403
    deleted = await site.client.post("/config/notes/delete", data={**gone, "csrf": token})
    assert deleted.status_code == 200
    assert "Deleted note" in deleted.text
    assert await site.store.notes.notes_of_person(BOB) == []
    empty = await site.client.post("/config/notes/edit", data={**edit, "text": "  ", "csrf": token})
    assert empty.status_code == 422
    assert "alice likes wombats" in [n.text for n in await site.store.notes.notes_of_person(ALICE)]


async def test_the_operator_approves_a_note_and_takes_the_approval_back(site: Site) -> None:
    _, _, channel = await _notes(site)  # a person's note in a channel: untrusted
    await sign_in(site)
    page = await site.client.get("/config/notes", params={"bot": "salon"})
    token = csrf_of(page.text)
    assert 'action="/config/notes/approve"' in page.text
    form = {"bot": "salon", "id": str(channel), "csrf": token}
    refused = await site.client.post("/config/notes/approve", data={**form, "csrf": "x" * 43})
    assert refused.status_code == 403
    approved = await site.client.post("/config/notes/approve", data={**form, "approved": "yes"})
    assert approved.status_code == 200
    assert f"Approved note {channel}." in approved.text
    (note,) = [n for n in await site.store.notes.notes_of_person(ALICE) if n.id == channel]
    assert note.trusted
    back = await site.client.post("/config/notes/approve", data={**form, "approved": "no"})
    assert "Took back the approval" in back.text
    (note,) = [n for n in await site.store.notes.notes_of_person(ALICE) if n.id == channel]
    assert not note.trusted
