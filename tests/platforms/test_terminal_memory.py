"""``/memory`` and ``/forget`` in the terminal: its person's notes, shown and deleted; the
terminal is the operator's, so a note of anyone's may be forgotten by its number."""

from __future__ import annotations

import asyncio
import io
from datetime import UTC, datetime
from pathlib import Path

from salon.app import BotApp
from salon.config import Secrets
from salon.llm import FakeProvider
from salon.notes import NoteScope, Provenance, Scope
from salon.platforms.terminal import terminal_for
from tests.conftest import bot_config
from tests.platforms.test_terminal import lines_from

SAID = datetime(2026, 11, 20, 18, 30, tzinfo=UTC)


async def test_memory_and_forget_in_the_terminal(tmp_path: Path) -> None:
    out = io.StringIO()
    queue: asyncio.Queue[str | None] = asyncio.Queue()
    config = bot_config(data_dir=str(tmp_path / "data"), memory={"enabled": True})
    provider = FakeProvider()
    app = BotApp(key="salon", config=config, root=tmp_path, secrets=Secrets({}), provider=provider)
    async with app:
        notes = app.store.notes
        mine = Provenance("user", "you", "terminal:local", "a DM", "m1", SAID)
        theirs = Provenance("1002", "Bob", "discord:10", "#general", "m2", SAID)
        await notes.add_note("salon", NoteScope(Scope.PERSON, "user"), "I like tea", mine)
        bobs = await notes.add_note("salon", NoteScope(Scope.PERSON, "1002"), "Bob: coffee", theirs)
        typed = ["/memory", f"/forget {bobs.id}", "/forget all", "/forget all confirm", "/memory"]
        for text in [*typed, None]:
            queue.put_nowait(None if text is None else text + "\n")
        terminal = terminal_for(app.build_context(), lines=lines_from(queue), out=out)
        await asyncio.wait_for(app.serve(terminal.closed, [terminal]), 10)
        assert await notes.notes_of_person("user") == []
        assert await notes.notes_of_person("1002") == []  # the operator forgot it
    shown = out.getvalue()
    first, forgot, asked, done, after = shown.strip().split("\n\n")
    assert first.startswith("I keep 1 note about you or from you")
    assert '"I like tea"' in first
    assert "coffee" not in first
    assert forgot == f"Forgot note {bobs.id}."
    assert asked.endswith("To go ahead: /forget all confirm")
    assert done == "Forgot 1 note about you or from you."
    assert after.startswith("I keep no notes about you or from you.")
    assert provider.requests == []  # the commands never reached the model
