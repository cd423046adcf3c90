"""``salon memory``: what the bots keep about a person, exported or deleted on their request.

``export --user ID`` prints, as JSON, every note about the person (their person notes) or
said by them (any scope), with its provenance, and their choice about notes outside DMs;
``forget --user ID`` deletes all of it and says how many notes went. Both reach every bot
of the config directory (or ``--bot``), in every store they use; a store several bots
share holds notes of bots no longer configured too, and a request by person covers those.
"""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from salon.app import store_for
from salon.config import ConfigSet, load_config_dir
from salon.notes import Note
from salon.printable import printable, printable_json
from salon.store.sql import SQLStore

__all__ = ["add_memory_parser", "run_memory"]


def add_memory_parser(sub: Any) -> None:
    memory = sub.add_parser("memory", help="export or delete what the bots keep about a person")
    memory_sub = memory.add_subparsers(dest="memory_command", required=True)
    for name, text in (
        ("export", "print every note about or by a person, with its provenance, as JSON"),
        ("forget", "delete every note about or by a person, and their choices"),
    ):
        command = memory_sub.add_parser(name, help=text)
        command.add_argument("dir", nargs="?", default=".", type=Path)
        command.add_argument(
            "--user", required=True, help="the person's id (a Discord user id, irc:nick, …)"
        )
        command.add_argument("--bot", help="only this bot's notes (default: every bot's)")


def _stores(configs: ConfigSet, bot: str | None) -> list[tuple[SQLStore, str | None]]:
    """(store, the bot to keep to or None for all) once per database the bots use."""
    keys = [configs.bot(bot)[0]] if bot is not None else sorted(configs.bots)
    stores: dict[str, tuple[SQLStore, str | None]] = {}
    for key in keys:
        store = store_for(configs.root, configs.bots[key])
        stores.setdefault(store.url, (store, bot and key))
    return list(stores.values())


async def _each_store(
    configs: ConfigSet, bot: str | None, work: Callable[[SQLStore, str | None], Awaitable[None]]
) -> None:
    for store, only in _stores(configs, bot):
        await store.open()
        try:
            await work(store, only)
        finally:
            await store.close()


def _stamp(note: Note, field: str) -> str:
    value = note.provenance.at if field == "said_at" else getattr(note, field)
    return str(value.isoformat())


def _exported(note: Note) -> dict[str, Any]:
    said = note.provenance
    return {
        "id": note.id,
        "bot": note.bot,
        "scope": note.scope.kind.value,
        "scope_key": note.scope.key,
        "text": note.text,
        "said_by": {"id": said.author_id, "name": said.author_name},
        "channel": said.channel_key,
        "channel_name": said.channel_name,
        "message_id": said.message_id,
        "said_at": _stamp(note, "said_at"),
        "created_at": _stamp(note, "created_at"),
        "updated_at": _stamp(note, "updated_at"),
    }


async def _export(configs: ConfigSet, user: str, bot: str | None) -> int:
    notes: list[Note] = []
    choices: dict[str, dict[str, bool]] = {}

    async def collect(store: SQLStore, only: str | None) -> None:
        notes.extend(await store.notes.notes_of_person(user, bot=only))
        for key, allowed in (await store.notes.choices_of(user)).items():
            if only is None or key == only:
                choices[key] = {"person_notes_outside_dm": allowed}

    await _each_store(configs, bot, collect)
    exported = {"user": user, "notes": [_exported(n) for n in notes], "choices": choices}
    print(printable_json(exported))  # prints safely, parses to the same text
    return 0


async def _forget(configs: ConfigSet, user: str, bot: str | None) -> int:
    """The person's notes, and the traces of their activations (which quote what the bot
    saw, their notes in view among it)."""
    gone = traced = 0

    async def delete(store: SQLStore, only: str | None) -> None:
        nonlocal gone, traced
        gone += await store.notes.forget_person(user, bot=only)
        traced += await store.traces.forget_requester(user, bot=only)

    await _each_store(configs, bot, delete)
    notes = f"{gone} note{'' if gone == 1 else 's'}"
    traces = f"{traced} trace{'' if traced == 1 else 's'}"
    print(printable(f"forgot {notes} about or by {user}, and {traces} of their activations"))
    return 0


async def run_memory(args: argparse.Namespace) -> int:
    configs = load_config_dir(args.dir)
    if args.memory_command == "export":
        return await _export(configs, args.user, args.bot)
    return await _forget(configs, args.user, args.bot)
