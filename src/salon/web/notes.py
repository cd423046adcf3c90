"""The configurator's notes (``salon.notes``): a bot's notes listed newest first, filtered
by scope or by person (the notes about them and those they said), a page at a time, each
editable (its text; the provenance stays) and deletable. The configurator's rules apply:
loopback only, signed in, and every POST from this site with its CSRF token.
"""

from __future__ import annotations

from functools import partial
from html import escape
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response

from salon.errors import StoreError
from salon.notes import Note, Scope
from salon.web.configurator import gate, header, posted
from salon.web.context import Web
from salon.web.guard import csrf_token, keep_csrf
from salon.web.pages import layout

__all__ = ["delete", "listing", "update"]

PAGE = 50  # notes a page shows
_TITLE = "Salon configurator: notes"


class _Filters:
    """The listing's filters, from the query or a form's hidden fields."""

    def __init__(self, fields: dict[str, str], bots: list[str]) -> None:
        bot = fields.get("bot", "")
        self.bot = bot if bot in bots else (bots[0] if bots else "")
        scope = fields.get("scope", "")
        self.scope = Scope(scope) if scope in {s.value for s in Scope} else None
        self.person = fields.get("person", "").strip() or None
        before = fields.get("before", "")
        self.before = int(before) if before.isdigit() else None

    def query(self, *, before: int) -> str:
        fields = {"bot": self.bot, "scope": self.scope.value if self.scope else ""}
        fields |= {"person": self.person or "", "before": str(before)}
        return urlencode({k: v for k, v in fields.items() if v})

    def hidden(self) -> str:
        kept = {"bot": self.bot, "scope": self.scope.value if self.scope else ""}
        kept |= {"person": self.person or ""}
        return "".join(
            f'<input type="hidden" name="{k}" value="{escape(v)}">' for k, v in kept.items() if v
        )


async def listing(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return refused
    return await _page(web, request, _Filters(dict(request.query_params), await _bots(web)))


async def update(request: Request) -> Response:
    return await _change(request, edit=True)


async def delete(request: Request) -> Response:
    return await _change(request, edit=False)


async def approve(request: Request) -> Response:
    """The operator approves a note a person wrote: it may shape answers to everyone in
    its scope, not only to its author (``approved=no`` takes that back)."""
    web: Web = request.app.state.web
    fields = await posted(web, request, partial(_refused, web), too_large="the form is too large")
    if isinstance(fields, Response):
        return fields
    filters = _Filters(fields, await _bots(web))
    raw_id = fields.get("id", "")
    if not raw_id.isdigit() or not filters.bot:
        return _refused(web, "which note? reload the page and try again", 422)
    approved = fields.get("approved", "yes") == "yes"
    done = await web.store.notes.approve_note(filters.bot, int(raw_id), approved=approved)
    verb = "Approved" if approved else "Took back the approval of"
    said = f"{verb} note {raw_id}." if done else f"There is no note {raw_id}."
    return await _page(web, request, filters, note=_saved(said))


async def _change(request: Request, *, edit: bool) -> Response:
    web: Web = request.app.state.web
    too_large = "the form is larger than a note may be"
    fields = await posted(web, request, partial(_refused, web), too_large=too_large)
    if isinstance(fields, Response):
        return fields
    filters = _Filters(fields, await _bots(web))
    raw_id = fields.get("id", "")
    if not raw_id.isdigit() or not filters.bot:
        return _refused(web, "which note? reload the page and try again", 422)
    note_id = int(raw_id)
    if not edit:
        done = await web.store.notes.delete_note(filters.bot, note_id)
        said = f"Deleted note {note_id}." if done else f"There is no note {note_id}."
        return await _page(web, request, filters, note=_saved(said))
    try:
        done = await web.store.notes.update_note(filters.bot, note_id, fields.get("text", ""))
    except StoreError as exc:
        return await _page(web, request, filters, note=_problem(str(exc)), status=422)
    said = f"Saved note {note_id}." if done else f"There is no note {note_id}."
    return await _page(web, request, filters, note=_saved(said))


async def _bots(web: Web) -> list[str]:
    return sorted((await web.fleet.current()).bots)


async def _page(
    web: Web, request: Request, filters: _Filters, *, note: str = "", status: int = 200
) -> Response:
    token, new = csrf_token(request)
    found = await web.store.notes.list_notes(
        filters.bot,
        limit=PAGE + 1,
        before_id=filters.before,
        scope=filters.scope,
        person=filters.person,
    )
    shown = found[:PAGE]
    rows = "".join(_row(n, filters, token) for n in shown)
    older = ""
    if len(found) > PAGE:
        link = f"/config/notes?{filters.query(before=shown[-1].id)}"
        older = f'<p><a href="{escape(link)}">older notes</a></p>'
    table = (
        '<table class="keys notes"><tr><th>#</th><th>scope</th><th>note</th><th>said by, where, '
        f"when</th><th></th></tr>{rows}</table>"
        if shown
        else '<p class="meta">No notes.</p>'
    )
    body = f"<h1>Notes of {escape(filters.bot)}</h1>{note}{_filter_form(filters, await _bots(web))}"
    response = web.html(layout(_TITLE, body + table + older, header=header()), status)
    if new:
        keep_csrf(web, request, response, token)
    return response


def _filter_form(filters: _Filters, bots: list[str]) -> str:
    def options(values: list[str], chosen: str) -> str:
        return "".join(
            f'<option value="{escape(v)}"{" selected" if v == chosen else ""}>'
            f"{escape(v or 'any')}</option>"
            for v in values
        )

    scope = filters.scope.value if filters.scope else ""
    return (
        '<form method="get" action="/config/notes" class="panel filters">'
        f'<label>bot <select name="bot">{options(bots, filters.bot)}</select></label> '
        f'<label>scope <select name="scope">{options(["", *(s.value for s in Scope)], scope)}'
        "</select></label> "
        f'<label>person <input name="person" value="{escape(filters.person or "")}" '
        'placeholder="a person\'s id"></label> <button type="submit">show</button></form>'
    )


def _row(note: Note, filters: _Filters, token: str) -> str:
    said = note.provenance
    where = f"{said.author_name} ({said.author_id}), {said.channel_name} ({said.channel_key})"
    message = f", message {said.message_id}" if said.message_id else ""
    hidden = (
        f'{filters.hidden()}<input type="hidden" name="id" value="{note.id}">'
        f'<input type="hidden" name="csrf" value="{escape(token)}">'
    )
    key = f" {note.scope.key}" if note.scope.key else ""
    return (
        f"<tr><td>{note.id}</td><td>{escape(note.scope.kind.value + key)}</td>"
        f'<td><form method="post" action="/config/notes/edit">{hidden}'
        f'<textarea name="text" rows="2">{escape(note.text)}</textarea>'
        '<button type="submit">save</button></form></td>'
        f'<td class="layer">{escape(where)}, {said.at:%Y-%m-%d %H:%M} UTC{escape(message)}</td>'
        f'<td><form method="post" action="/config/notes/delete">{hidden}'
        '<button type="submit" class="quiet">delete</button></form>'
        f"{_approval(note, hidden)}</td></tr>"
    )


def _approval(note: Note, hidden: str) -> str:
    """Approve a note only its author's answers read (a person's, in a channel), or take
    the approval back."""
    if note.trusted:
        return (
            f'<form method="post" action="/config/notes/approve">{hidden}'
            '<input type="hidden" name="approved" value="no">'
            '<button type="submit" class="quiet">unapprove</button></form>'
        )
    return (
        f'<form method="post" action="/config/notes/approve">{hidden}'
        '<input type="hidden" name="approved" value="yes">'
        '<button type="submit">approve</button></form>'
    )


def _saved(text: str) -> str:
    return f'<div class="saved">{escape(text)}</div>'


def _problem(text: str) -> str:
    return f'<div class="problems">Not saved: {escape(text)}</div>'


def _refused(web: Web, reason: str, status: int = 403) -> Response:
    body = f'<p class="problems">{escape(reason)}</p>'
    return web.html(layout(_TITLE, body, header=header()), status)
