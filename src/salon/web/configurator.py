"""The configurator: a bot's YAML files, viewed and edited in the page, for loopback
clients only (see ``salon.web.guard.loopback_refusal``) that are signed in: every local
user reaches loopback, so being local is no credential. The session is the activity
page's; ``salon config-link`` prints a link that signs in once, for a few minutes.
Files that link outside the config directory are neither shown nor written.

An edit is judged exactly as ``salon check`` judges the directory (``load_config_dir``,
each bot's secrets, its integrations), on a copy of the directory with the edit in it;
only an edit with no problem is written (atomically), and the running bots pick it up
within a second (``salon.upkeep``'s config watch). The problems are the lines
``salon check`` prints.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Callable
from functools import partial
from html import escape
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from salon.config import load_config_dir
from salon.config.check import check_bots
from salon.errors import ConfigError
from salon.web.activity import login_page, signed_in_page
from salon.web.context import Web, config_files
from salon.web.guard import (
    csrf_token,
    form,
    keep_csrf,
    loopback_refusal,
    post_refusal,
    signed_in,
)
from salon.web.keys import key_tables
from salon.web.links import one_time_token
from salon.web.pages import layout

__all__ = [
    "config_files_by_name",
    "edit",
    "gate",
    "header",
    "overview",
    "save",
    "validate_edit",
    "write_file",
]

MAX_FILE_BYTES = 1_000_000  # the YAML reader's own limit
_COPIED = ("shared.yaml", "guilds", "bots")


def _refused(web: Web, reason: str) -> Response:
    return web.html(layout("Salon configurator", f'<p class="problems">{escape(reason)}</p>'), 403)


def _inside(root: Path, path: Path) -> bool:
    """Whether ``path``, its links followed, is in the directory ``root``."""
    return path.resolve().is_relative_to(root.resolve())


def config_files_by_name(web: Web) -> dict[str, Path]:
    """The editable files, by their path relative to the config directory: a file that
    links elsewhere (``bots/x.yaml -> ~/.ssh/...``) is not one."""
    found = {str(p.relative_to(web.root)): p for p in config_files(web.root)}
    return {name: path for name, path in found.items() if _inside(web.root, path)}


def _outside(web: Web) -> list[str]:
    return [
        str(p.relative_to(web.root)) for p in config_files(web.root) if not _inside(web.root, p)
    ]


def _off(web: Web) -> Response:
    name = escape(web.settings.activity_key_env)
    body = (
        '<div class="login panel"><h1>The configurator is off</h1>'
        f"<p>It wants the activity page's session: set the environment variable "
        f"<code>{name}</code> to a long random key where the web server runs, then restart "
        "it.</p></div>"
    )
    return web.html(layout("Salon configurator", body), 503)


async def posted(
    web: Web, request: Request, refuse: Callable[[str], Response], *, too_large: str
) -> dict[str, str] | Response:
    """A configurator POST's fields, or the answer refusing it: not signed in or not on
    loopback (``gate``), a form over the size limit (``refuse(too_large)``), a missing CSRF
    token or a foreign Origin (``refuse`` with the reason)."""
    refused = await gate(web, request)
    if refused:
        return refused
    fields = await form(request)
    if fields is None:
        return refuse(too_large)
    refusal = post_refusal(request, fields)
    return refuse(refusal) if refusal else fields


async def gate(web: Web, request: Request) -> Response | None:
    """The answer for a request that may not use the configurator, or None."""
    refusal = loopback_refusal(request)
    if refusal:
        return _refused(web, refusal)
    key = web.activity_key()
    if key is None:
        return _off(web)
    token = request.query_params.get("token")
    if token is not None and request.url.path == "/config" and request.method == "GET":
        return await _take_link(web, request, key, token)
    if not await signed_in(web, request):
        return login_page(web, request, 401, next_page="/config")
    return None


async def _take_link(web: Web, request: Request, key: str, token: str) -> Response:
    """A link from ``salon config-link``: valid, fresh and never used, or refused."""
    taken = one_time_token(key, token, now=web.now())
    why = taken if isinstance(taken, str) else web.take_link(*taken)
    if why is not None:
        return login_page(web, request, 401, f"{why}.", "/config")
    return await signed_in_page(web, request, "/config")


def _copy_dir(root: Path, into: Path) -> None:
    """The YAML files copied (they may change), everything else linked (workflows…)."""
    for entry in root.iterdir():
        if entry.name in _COPIED:
            continue
        (into / entry.name).symlink_to(entry.resolve(), entry.is_dir())
    for path in config_files(root):
        target = into / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())


def validate_edit(
    root: Path, relative: str, text: str, environ: dict[str, str]
) -> tuple[list[str], list[str]]:
    """(problems, other lines) of the directory with ``relative`` holding ``text``, as
    ``salon check`` would print them."""
    with tempfile.TemporaryDirectory(prefix="salon-check-") as scratch:
        copy = Path(scratch) / root.name
        copy.mkdir()
        _copy_dir(root, copy)
        (copy / relative).write_text(text, encoding="utf-8")

        def shown(line: str) -> str:
            return line.replace(str(copy), str(root))

        try:
            configs = load_config_dir(copy, environ)
        except ConfigError as exc:
            return [shown(f"error: {p}") for p in exc.problems], []
        report = check_bots(configs, environ)
        return [shown(f"error: {p}") for p in report.problems], [shown(x) for x in report.lines]


def write_file(path: Path, text: str) -> None:
    """Replace the file at once, so a bot never reads half an edit."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


async def overview(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return refused
    configs = await web.fleet.current()
    reports = {r.bot: r.reload_error for r in await web.store.health.health_reports()}
    links = "".join(
        f'<a href="/config/edit?file={escape(name)}">{escape(name)}</a>'
        for name in config_files_by_name(web)
    )
    # A bot read from a file elsewhere is not shown either: that file is not this page's.
    shown = [
        b
        for b in sorted(configs.bots)
        if all(_inside(web.root, Path(layer.file)) for layer in configs.layers[b])
    ]
    bots = key_tables(configs, shown, reports)
    outside = "".join(
        f'<p class="problems">{escape(name)} links outside the config directory: it cannot be '
        "opened here.</p>"
        for name in _outside(web)
    )
    body = f'<h1>Configurator</h1><div class="panel files">Edit: {links}</div>{outside}{bots}'
    return web.html(layout("Salon configurator", body, header=header()))


def header() -> str:
    return (
        '<nav><a class="chip" href="/config">configurator</a>'
        '<a class="chip" href="/config/notes">notes</a>'
        '<a class="chip" href="/config/bots">bots</a>'
        '<a class="chip" href="/config/log">log</a>'
        '<a class="chip" href="/config/oauth">oauth</a>'
        '<a class="chip" href="/activity">activity</a></nav>'
    )


def _editor(
    web: Web, request: Request, name: str, text: str, *, status: int = 200, note: str = ""
) -> Response:
    token, new = csrf_token(request)
    body = (
        f"<h1>{escape(name)}</h1>{note}"
        '<form method="post" action="/config/edit" class="panel">'
        f'<input type="hidden" name="file" value="{escape(name)}">'
        f'<input type="hidden" name="csrf" value="{escape(token)}">'
        f'<textarea class="yaml" name="text" spellcheck="false">{escape(text)}</textarea>'
        '<p><button type="submit">check and save</button> '
        '<a href="/config">back</a></p></form>'
    )
    response = web.html(layout(f"Salon configurator: {name}", body, header=header()), status)
    if new:
        keep_csrf(web, request, response, token)
    return response


async def edit(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return refused
    name = request.query_params.get("file", "")
    path = config_files_by_name(web).get(name)
    if path is None:
        return web.html(layout("Salon", f"<p>No config file {escape(name)!r}.</p>"), 404)
    return _editor(web, request, name, path.read_text(encoding="utf-8"))


async def save(request: Request) -> Response:
    web: Web = request.app.state.web
    fields = await posted(
        web,
        request,
        partial(_refused, web),
        too_large="the form is larger than a config file may be",
    )
    if isinstance(fields, Response):
        return fields
    name, text = fields.get("file", ""), fields.get("text", "").replace("\r\n", "\n")
    path = config_files_by_name(web).get(name)
    if path is None:
        return web.html(layout("Salon", f"<p>No config file {escape(name)!r}.</p>"), 404)
    if len(text.encode("utf-8")) > MAX_FILE_BYTES:
        return _editor(web, request, name, text, status=413, note=_problems(["error: too large"]))
    problems, lines = await asyncio.to_thread(
        validate_edit, web.root, name, text, dict(web.environ)
    )
    if problems:
        note = _problems(problems) + '<p class="meta">Nothing was saved.</p>'
        return _editor(web, request, name, text, status=422, note=note)
    # Through a link that stays in the directory (checked above), so the link stays.
    await asyncio.to_thread(write_file, path.resolve(), text)
    shown = "".join(f"<li>{escape(line)}</li>" for line in lines)
    note = (
        f'<div class="saved"><b>Saved.</b> Running bots apply it within a second.<ul>{shown}'
        "</ul></div>"
    )
    return _editor(web, request, name, text, note=note)


def _problems(lines: list[str]) -> str:
    shown = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f'<div class="problems"><b>Not saved:</b><ul>{shown}</ul></div>'
