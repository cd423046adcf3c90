"""The store's part for notes (salon.notes): written by the memory tools, searched ranked
(SQLite FTS5's bm25, PostgreSQL's ts_rank over the ``simple`` configuration, as the chat
log's search), read only through a ``Viewpoint``, deleted by note, by person and by age.

A deletion leaves nothing searchable behind: on SQLite the FTS5 index is merged after it
(``optimize``), so the deleted words are gone from the index's own pages too, not only
marked deleted.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from salon.errors import StoreError
from salon.notes import (
    MAX_NOTE_CHARS,
    Note,
    NoteScope,
    Provenance,
    Scope,
    Viewpoint,
    scopes_in_view,
)
from salon.store._db import Connection, Database, DatabaseError
from salon.store._dialects import insert_sql, upsert
from salon.store._part import Part

__all__ = ["MAX_QUERY_TERMS", "NotePart", "scope_tag"]

MAX_QUERY_TERMS = 16  # words of a recall query that are searched; the rest are ignored
_MAX_LIMIT = 1000
_COLUMNS = (
    "id, bot, scope, scope_key, text, author_id, author_name, channel, channel_name,"
    " message_id, said_at, created_at, updated_at, trusted"
)
_WORD = re.compile(r"\w+")


class NotePart(Part):
    def __init__(self, database: Callable[[], Database]) -> None:
        super().__init__(database)
        self.changes = 0  # edits, approvals, deletions, choices by this process (memory blocks)
        self.additions = 0  # notes this process added

    # -- writing -------------------------------------------------------------------------

    async def add_note(
        self,
        bot: str,
        scope: NoteScope,
        text: str,
        provenance: Provenance,
        *,
        trusted: bool = False,
    ) -> Note:
        """Keep a note; its text is stripped and must be 1 to ``MAX_NOTE_CHARS`` long.
        ``trusted``: the writer was the operator, an authorized role or the bot itself."""
        text = _checked_text(text)
        now = time.time()
        row = {
            "bot": bot,
            "scope": scope.kind.value,
            "scope_key": scope.key,
            "text": text,
            "author_id": provenance.author_id,
            "author_name": provenance.author_name,
            "channel": provenance.channel_key,
            "channel_name": provenance.channel_name,
            "message_id": provenance.message_id,
            "said_at": provenance.at.timestamp(),
            "created_at": now,
            "updated_at": now,
            "trusted": trusted,
            "tag": scope_tag(scope),
        }
        statement = insert_sql("notes", tuple(row), " RETURNING id")
        try:
            async with self.db.begin() as conn:
                key = await conn.fetchval(statement, row)
        except DatabaseError as exc:
            raise StoreError(f"cannot keep the note: {exc}") from exc
        self.additions += 1
        stamp = datetime.fromtimestamp(now, UTC)
        return Note(int(key or 0), bot, scope, text, provenance, stamp, stamp, trusted)

    async def update_note(self, bot: str, note_id: int, text: str) -> bool:
        """The operator's edit (the configurator): a new text, the provenance kept."""
        text = _checked_text(text)
        params = {"text": text, "now": time.time(), "bot": bot, "id": note_id}
        statement = "UPDATE notes SET text = :text, updated_at = :now WHERE bot = :bot AND id = :id"
        async with self.db.begin() as conn:
            changed = await conn.execute(statement, params)
        self.changes += 1
        return bool(changed)

    async def approve_note(self, bot: str, note_id: int, *, approved: bool = True) -> bool:
        """An authorized person's (or the operator's) approval: the note may shape answers
        to everyone in its scope, not only to its author."""
        params = {"trusted": approved, "bot": bot, "id": note_id}
        statement = "UPDATE notes SET trusted = :trusted WHERE bot = :bot AND id = :id"
        async with self.db.begin() as conn:
            changed = await conn.execute(statement, params)
        self.changes += 1
        return bool(changed)

    async def note_stamps(self, bot: str, ids: Sequence[int]) -> dict[int, datetime]:
        """When each of these notes (those still kept) last changed: how a memory block
        tells, cheaply, that a note it shows was edited or forgotten."""
        if not ids:
            return {}
        params: dict[str, Any] = {"bot": bot}
        names = []
        for n, note_id in enumerate(ids[:_MAX_LIMIT]):
            params[f"i{n}"] = int(note_id)
            names.append(f":i{n}")
        sql = f"SELECT id, updated_at FROM notes WHERE bot = :bot AND id IN ({', '.join(names)})"
        async with self.db.connect() as conn:
            rows = await conn.fetch(sql, params)
        return {int(r[0]): _stamp(float(r[1])) for r in rows}

    async def count_notes(self, bot: str, scope: NoteScope) -> int:
        query = (
            "SELECT count(*) FROM notes WHERE bot = :bot AND scope = :scope AND scope_key = :key"
        )
        params = {"bot": bot, "scope": scope.kind.value, "key": scope.key}
        async with self.db.connect() as conn:
            return int(await conn.fetchval(query, params) or 0)

    # -- reading through a viewpoint -----------------------------------------------------

    async def search_notes(
        self, bot: str, view: Viewpoint, query: str, *, limit: int = 10
    ) -> list[Note]:
        """The notes in view matching any word of ``query``, best first (more of its words,
        rarer words, shorter notes rank higher; the newest first among equals)."""
        terms = _WORD.findall(query)[:MAX_QUERY_TERMS]
        if not terms:
            return []
        params: dict[str, Any] = {"bot": bot, "limit": _bounded(limit)}
        where = _scoped(view, params)
        if self.db.dialect == "sqlite":
            words = " OR ".join(f'"{t}"' for t in terms)  # \w+ holds no quote
            tags = " OR ".join(scope_tag(scope) for scope in scopes_in_view(view))
            params["match"] = f"text : ({words}) AND tag : ({tags})"
            sql = (
                f"SELECT {_prefixed('n')} FROM notes_fts CROSS JOIN notes AS n"
                " ON n.id = notes_fts.rowid WHERE notes_fts MATCH :match AND n.bot = :bot"
                f" AND {where} ORDER BY bm25(notes_fts, 1.0, 0.0), n.id DESC LIMIT :limit"
            )
        else:
            queries = []
            for n, term in enumerate(terms):
                params[f"t{n}"] = term
                queries.append(f"plainto_tsquery('simple', :t{n})")
            sql = (
                f"SELECT {_prefixed('n')} FROM notes AS n,"
                f" (SELECT {' || '.join(queries)} AS q) AS w"
                f" WHERE n.search @@ w.q AND n.bot = :bot AND {where}"
                " ORDER BY ts_rank(n.search, w.q) DESC, n.id DESC LIMIT :limit"
            )
        return await self._notes(sql, params)

    async def notes_in_view(self, bot: str, view: Viewpoint, *, limit: int = 100) -> list[Note]:
        """The newest ``limit`` notes in view, oldest first (a memory block's order)."""
        params: dict[str, Any] = {"bot": bot, "limit": _bounded(limit)}
        where = _scoped(view, params)
        sql = (
            f"SELECT {_COLUMNS} FROM notes AS n WHERE n.bot = :bot AND {where}"
            " ORDER BY n.id DESC LIMIT :limit"
        )
        return (await self._notes(sql, params))[::-1]

    async def note_in_view(self, bot: str, view: Viewpoint, note_id: int) -> Note | None:
        """One note, if it is in view from ``view``."""
        params: dict[str, Any] = {"bot": bot, "id": note_id}
        where = _scoped(view, params)
        sql = f"SELECT {_COLUMNS} FROM notes AS n WHERE n.bot = :bot AND n.id = :id AND {where}"
        found = await self._notes(sql, params)
        return found[0] if found else None

    # -- the operator's (and a person's own) reads and deletions -------------------------

    async def list_notes(
        self,
        bot: str,
        *,
        limit: int = 100,
        before_id: int | None = None,
        scope: Scope | None = None,
        person: str | None = None,
    ) -> list[Note]:
        """Every note of the bot, newest first, whatever its scope (or of one ``scope``;
        about or by one ``person``): for the operator only (the configurator), never for
        a prompt."""
        params: dict[str, Any] = {"bot": bot, "limit": _bounded(limit)}
        where = "n.bot = :bot"
        if before_id is not None:
            where += " AND n.id < :before"
            params["before"] = before_id
        if scope is not None:
            where += " AND n.scope = :scope"
            params["scope"] = scope.value
        if person is not None:
            params |= {"person": person, "kind": Scope.PERSON.value}
            where += f" AND {_of_person(None, params)}"
        sql = f"SELECT {_COLUMNS} FROM notes AS n WHERE {where} ORDER BY n.id DESC LIMIT :limit"
        return await self._notes(sql, params)

    async def notes_of_person(self, person_id: str, *, bot: str | None = None) -> list[Note]:
        """Every note about ``person_id`` (their person notes) or said by them, of every
        bot (or one), oldest first: what an export by person holds."""
        params: dict[str, Any] = {"person": person_id, "kind": Scope.PERSON.value}
        sql = f"SELECT {_COLUMNS} FROM notes AS n WHERE {_of_person(bot, params)} ORDER BY n.id"
        return await self._notes(sql, params)

    async def delete_note(self, bot: str, note_id: int) -> bool:
        """Delete one note (the caller checked it may: see ``note_in_view``)."""
        params = {"bot": bot, "id": note_id}
        return bool(await self._delete(("DELETE FROM notes WHERE bot = :bot AND id = :id", params)))

    async def forget_person(self, person_id: str, *, bot: str | None = None) -> int:
        """Delete every note about or by ``person_id`` and their choice about notes outside
        DMs (of every bot, or one); returns how many notes went."""
        params: dict[str, Any] = {"person": person_id, "kind": Scope.PERSON.value}
        where = _of_person(bot, params)
        consent: dict[str, Any] = {"person": person_id}
        consent_sql = "DELETE FROM memory_consent WHERE person_id = :person"
        if bot is not None:
            consent_sql += " AND bot = :bot"
            consent["bot"] = bot
        return await self._delete(
            (f"DELETE FROM notes AS n WHERE {where}", params), (consent_sql, consent)
        )

    async def prune_notes(self, bot: str, *, max_age: float, now: float | None = None) -> int:
        """Delete the bot's notes not changed for ``max_age`` seconds; returns how many."""
        cutoff = (now if now is not None else time.time()) - max_age
        sql = "DELETE FROM notes WHERE bot = :bot AND updated_at < :cutoff"
        return await self._delete((sql, {"bot": bot, "cutoff": cutoff}))

    # -- people's choice -----------------------------------------------------------------

    async def set_consent(self, bot: str, person_id: str, outside_dm: bool) -> None:
        """A person's choice: their notes may (or may not) be in view outside DMs where they
        are the one answered."""
        row = {
            "bot": bot,
            "person_id": person_id,
            "outside_dm": outside_dm,
            "updated_at": time.time(),
        }
        statement = upsert("memory_consent", tuple(row), ["bot", "person_id"])
        async with self.db.begin() as conn:
            await conn.many([(statement, row)])
        self.changes += 1

    async def consent(self, bot: str, person_id: str) -> bool | None:
        """A person's choice, or None when they made none (the config's default applies)."""
        query = "SELECT outside_dm FROM memory_consent WHERE bot = :bot AND person_id = :person"
        async with self.db.connect() as conn:
            value = await conn.fetchval(query, {"bot": bot, "person": person_id})
        return None if value is None else bool(value)

    async def choices_of(self, person_id: str) -> dict[str, bool]:
        """A person's choices, by bot: for an export by person."""
        query = "SELECT bot, outside_dm FROM memory_consent WHERE person_id = :person ORDER BY bot"
        async with self.db.connect() as conn:
            rows = await conn.fetch(query, {"person": person_id})
        return {str(r[0]): bool(r[1]) for r in rows}

    # -- helpers -------------------------------------------------------------------------

    async def _notes(self, sql: str, params: dict[str, Any]) -> list[Note]:
        try:
            async with self.db.connect() as conn:
                rows = await conn.fetch(sql, params)
        except DatabaseError as exc:
            raise StoreError(f"cannot read the notes: {exc}") from exc
        return [_row_to_note(row) for row in rows]

    async def _delete(self, *statements: tuple[str, dict[str, Any]]) -> int:
        """Run deletions in one transaction; returns the rows the first deleted. On SQLite
        the search index is merged after it, so no trace of the deleted words stays."""
        try:
            async with self.db.begin() as conn:
                gone = 0
                for n, (sql, params) in enumerate(statements):
                    deleted = await conn.execute(sql, params)
                    gone = deleted if n == 0 else gone
                if gone:
                    await _purge_index(conn)
        except DatabaseError as exc:
            raise StoreError(f"cannot delete the notes: {exc}") from exc
        finally:
            self.changes += 1
        return gone


async def _purge_index(conn: Connection) -> None:
    """FTS5 marks a deleted row's words as deleted and drops them only when it merges its
    segments; ``optimize`` merges them all now. PostgreSQL's index entries go with the row."""
    if conn.dialect == "sqlite":
        await conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('optimize')")


def scope_tag(scope: NoteScope) -> str:
    """A scope as one word of the search index (letters and digits only), so the search
    asks FTS5 for the notes in view alone (migration 18 computes the same in SQL)."""
    return "k" + f"{scope.kind.value}:{scope.key}".encode().hex()


def _checked_text(text: str) -> str:
    text = text.strip()
    if not text:
        raise StoreError("a note needs some text")
    if len(text) > MAX_NOTE_CHARS:
        raise StoreError(f"a note may be at most {MAX_NOTE_CHARS} characters")
    return text


def _bounded(limit: int) -> int:
    return max(1, min(int(limit), _MAX_LIMIT))


def _prefixed(alias: str) -> str:
    return ", ".join(f"{alias}.{c.strip()}" for c in _COLUMNS.split(","))


def _scoped(view: Viewpoint, params: dict[str, Any]) -> str:
    """SQL matching the notes ``view`` may read (``salon.notes.note_in_view``): of the
    scopes in view, and trusted or written by the person answered (their parameters added
    to ``params``)."""
    clauses = []
    for n, scope in enumerate(scopes_in_view(view)):
        params[f"sk{n}"], params[f"sv{n}"] = scope.kind.value, scope.key
        clauses.append(f"(n.scope = :sk{n} AND n.scope_key = :sv{n})")
    if not clauses:
        return "(1 = 0)"
    trust = "n.trusted = TRUE"
    if view.person_id:
        params["answered"] = view.person_id
        trust = f"({trust} OR n.author_id = :answered)"
    return f"({' OR '.join(clauses)}) AND {trust}"


def _of_person(bot: str | None, params: dict[str, Any]) -> str:
    where = "((n.scope = :kind AND n.scope_key = :person) OR n.author_id = :person)"
    if bot is not None:
        where += " AND n.bot = :bot"
        params["bot"] = bot
    return where


def _stamp(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


def _row_to_note(row: Any) -> Note:
    provenance = Provenance(
        author_id=row["author_id"],
        author_name=row["author_name"],
        channel_key=row["channel"],
        channel_name=row["channel_name"],
        message_id=row["message_id"],
        at=_stamp(row["said_at"]),
    )
    scope = NoteScope(Scope(row["scope"]), row["scope_key"])
    return Note(
        id=int(row["id"]),
        bot=row["bot"],
        scope=scope,
        text=row["text"],
        provenance=provenance,
        created_at=_stamp(row["created_at"]),
        updated_at=_stamp(row["updated_at"]),
        trusted=bool(row["trusted"]),
    )
