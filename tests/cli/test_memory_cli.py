"""``salon memory export|forget --user ID``: the operator's answer to a person asking what
the bots keep about them, and to have it deleted (every bot sharing the store)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from salon.app import store_for
from salon.cli import main
from salon.config import load_config_dir
from salon.notes import NoteScope, Provenance, Scope
from salon.trace import Trace
from tests.conftest import WriteConfig

SAID = datetime(2026, 11, 20, 18, 30, tzinfo=UTC)
BOT = """\
    name: {name}
    provider: p
    providers: {{p: {{type: openai, model: m, api_key_env: NONE_NEEDED}}}}
"""


def said_by(who: str, name: str) -> Provenance:
    return Provenance(who, name, "discord:100", "#general", f"m-{who}", SAID)


async def seed(root: Path) -> None:
    configs = load_config_dir(root)
    store = store_for(root, configs.bots["ann"])
    await store.open()
    try:
        notes = store.notes
        await notes.add_note(
            "ann", NoteScope(Scope.PERSON, "1001"), "plays cello", said_by("1001", "Alice")
        )
        await notes.add_note(
            "ann", NoteScope(Scope.PERSON, "1001"), "told by bob", said_by("1002", "Bob")
        )
        await notes.add_note(
            "ben",
            NoteScope(Scope.CHANNEL, "discord:100"),
            "alice said so",
            said_by("1001", "Alice"),
        )
        await notes.add_note(
            "ben", NoteScope(Scope.CHANNEL, "discord:100"), "bob alone", said_by("1002", "Bob")
        )
        await notes.set_consent("ann", "1001", True)
    finally:
        await store.close()


async def remaining(root: Path) -> list[str]:
    configs = load_config_dir(root)
    store = store_for(root, configs.bots["ann"])
    await store.open()
    try:
        return [n.text for bot in ("ann", "ben") for n in await store.notes.list_notes(bot)]
    finally:
        await store.close()


@pytest.fixture
def root(write_config: WriteConfig) -> Path:
    root = write_config(ann=BOT.format(name="Ann"), ben=BOT.format(name="Ben"))
    asyncio.run(seed(root))
    return root


def test_export_gives_every_note_about_or_by_the_person(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "export", str(root), "--user", "1001"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["user"] == "1001"
    assert [n["text"] for n in exported["notes"]] == ["plays cello", "told by bob", "alice said so"]
    first = exported["notes"][0]
    assert first == {
        "id": first["id"],
        "bot": "ann",
        "scope": "person",
        "scope_key": "1001",
        "text": "plays cello",
        "said_by": {"id": "1001", "name": "Alice"},
        "channel": "discord:100",
        "channel_name": "#general",
        "message_id": "m-1001",
        "said_at": "2026-11-20T18:30:00+00:00",
        "created_at": first["created_at"],
        "updated_at": first["updated_at"],
    }
    assert exported["notes"][1]["said_by"] == {"id": "1002", "name": "Bob"}  # about her
    assert exported["choices"] == {"ann": {"person_notes_outside_dm": True}}


def test_export_of_one_bot(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "export", str(root), "--user", "1001", "--bot", "ben"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert [n["text"] for n in exported["notes"]] == ["alice said so"]


def test_forget_deletes_them_and_says_how_many(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "forget", str(root), "--user", "1001"]) == 0
    said = "forgot 3 notes about or by 1001, and 0 traces of their activations"
    assert capsys.readouterr().out.strip() == said
    assert asyncio.run(remaining(root)) == ["bob alone"]
    assert main(["memory", "export", str(root), "--user", "1001"]) == 0
    assert json.loads(capsys.readouterr().out) == {"user": "1001", "notes": [], "choices": {}}
    assert main(["memory", "forget", str(root), "--user", "1001"]) == 0
    said = "forgot 0 notes about or by 1001, and 0 traces of their activations"
    assert capsys.readouterr().out.strip() == said


async def traced(root: Path, *people: tuple[str, str]) -> list[str]:
    """Store a trace of an activation asked by each (person, channel); the requesters of
    the traces left afterwards when nothing is given."""
    configs = load_config_dir(root)
    store = store_for(root, configs.bots["ann"])
    await store.open()
    try:
        await store.traces.write_traces(
            [
                Trace("ann", "discord", channel, "#x", 1.0, 2.0, requester={"id": who, "name": who})
                for who, channel in people
            ]
        )
        rows = await store.traces.list_traces(limit=50)
        return sorted(r.requester for r in rows)
    finally:
        await store.close()


def test_forget_also_deletes_the_traces_of_their_activations(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Traces quote what the bot saw and said, notes in view included: the person's own
    activations' traces go with their notes (whole groups: a trace may be stored as a
    difference from an earlier one of its channel)."""
    before = asyncio.run(traced(root, ("1001", "discord:100"), ("1002", "discord:200")))
    assert before == ["1001", "1002"]
    assert main(["memory", "forget", str(root), "--user", "1001"]) == 0
    assert "and 1 trace of their activations" in capsys.readouterr().out
    assert asyncio.run(traced(root)) == ["1002"]


def test_an_unknown_bot_is_an_error(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "forget", str(root), "--user", "1001", "--bot", "zed"]) == 2
    assert "zed" in capsys.readouterr().err
    assert len(asyncio.run(remaining(root))) == 4
