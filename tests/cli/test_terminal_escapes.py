"""What the commands print from people, models, tools and errors: control characters shown
as ``\\xNN``, never obeyed by the operator's terminal; JSON still parses to the same text."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from salon.app import store_for
from salon.cli import main
from salon.config import Redactor, load_config_dir
from salon.logsetup import configure_logging
from salon.model import ChannelRef
from salon.notes import NoteScope, Provenance, Scope
from salon.printable import printable, printable_json
from salon.trace import Trace
from tests.cli.test_tools_cli import IRC, SHARED, log_line
from tests.conftest import WriteConfig

EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m"
BOT = """\
    name: Ann
    provider: p
    providers: {p: {type: openai, model: m, api_key_env: NONE_NEEDED}}
"""


def test_printable_shows_control_characters_and_keeps_lines() -> None:
    assert printable("a\x1b[2Jb\n\tc\r\n\x7f\x9b") == "a\\x1b[2Jb\n\tc\n\\x7f\\x9b"
    assert printable("a\nb\tc", one_line=True) == "a\\x0ab\\x09c"
    assert printable("café ☕ 你好") == "café ☕ 你好"
    shown = printable_json({"t": EVIL})
    assert json.loads(shown) == {"t": EVIL}
    assert not any(c in shown for c in "\x1b\x07\x9b")


async def seed_trace(root: Path) -> None:
    store = store_for(root, load_config_dir(root).bots["ann"])
    await store.open()
    try:
        trace = Trace(
            "ann",
            "irc",
            f"irc:#x{EVIL}",
            "#x",
            1.0,
            2.0,
            outcome="error",
            error=f"boom {EVIL}",
            triggers=[{"id": "m1", "author": f"mallory{EVIL}", "text": f"hi {EVIL}"}],
            answer=f"answer {EVIL}",
            notes=[f"note {EVIL}"],
        )
        await store.traces.write_traces([trace])
    finally:
        await store.close()


def test_trace_show_and_list_print_no_escape(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_config(ann=BOT)
    asyncio.run(seed_trace(root))
    assert main(["trace", "show", str(root), "1"]) == 0
    shown = capsys.readouterr().out
    assert "mallory\\x1b]0;pwned\\x07" in shown
    assert main(["trace", "list", str(root)]) == 0
    listed = capsys.readouterr().out
    for out in (shown, listed):
        assert not any(c in out for c in "\x1b\x07\x9b"), out
    assert "irc:#x\\x1b]0;pwned" in listed


def test_tools_call_prints_no_escape(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_config(SHARED, bot=IRC)
    asyncio.run(log_line(root, ChannelRef("irc", "#salon"), f"hello {EVIL}"))
    args = ["tools", "call", str(root), "get_recent_messages", "{}", "--channel", "irc:#salon"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "hello \\x1b]0;pwned" in out
    assert not any(c in out for c in "\x1b\x07\x9b"), out


async def seed_note(root: Path) -> None:
    store = store_for(root, load_config_dir(root).bots["ann"])
    await store.open()
    try:
        said = Provenance("1001", f"Alice{EVIL}", "discord:1", "#g", "m1", datetime.now(UTC))
        await store.notes.add_note("ann", NoteScope(Scope.PERSON, "1001"), f"x {EVIL}", said)
    finally:
        await store.close()


def test_memory_export_prints_no_escape_and_parses_to_the_same_text(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    root = write_config(ann=BOT)
    asyncio.run(seed_note(root))
    assert main(["memory", "export", str(root), "--user", "1001"]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x9b"), out
    assert json.loads(out)["notes"][0]["text"] == f"x {EVIL}"


def test_a_log_line_on_the_console_prints_no_escape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    configure_logging(Redactor(), level="INFO", log_dir=tmp_path / "logs", stem="t")
    try:
        logging.getLogger("salon.test").warning("from irc: %s", EVIL)
        err = capsys.readouterr().err
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
            handler.close()
        root.handlers[:], root.level = saved
    assert "from irc: \\x1b]0;pwned" in err
    assert not any(c in err for c in "\x1b\x07\x9b"), err
    written = next((tmp_path / "logs").glob("t-*.log")).read_text()
    assert "\x1b" not in written
