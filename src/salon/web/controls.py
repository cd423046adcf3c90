"""The configurator's bot controls (``/config/bots``): per bot, debug logging on or off,
a provider test, and start, stop or restart.

Debug logging is an edit of ``log_level`` in the bot's own file, checked like any edit;
the running bot applies it within a second (``salon.upkeep``), no restart. The web server
never builds or runs a bot itself (import-linter): the provider test and the processes go
through a ``FleetControl`` that ``salon run`` hands in (``salon.web_cli.FleetControl``
over the supervisor, which runs the bots in that same process). Under ``salon web`` alone
no supervisor is there, and start/stop/restart say so.
"""

from __future__ import annotations

import asyncio
import re
from html import escape
from typing import Literal, Protocol, cast

from starlette.requests import Request
from starlette.responses import Response

from salon.web.configurator import config_files_by_name, gate, header, validate_edit, write_file
from salon.web.context import Web
from salon.web.guard import csrf_token, form, keep_csrf, post_refusal
from salon.web.pages import layout

__all__ = [
    "ACTIONS",
    "Action",
    "FleetControl",
    "act",
    "bots",
    "level",
    "page_with",
    "probe",
]

ACTIONS = ("start", "stop", "restart")
Action = Literal["start", "stop", "restart"]
_LEVEL_LINE = re.compile(r"^log_level:.*$", re.M)


class FleetControl(Protocol):
    """What the configurator may ask of the process that runs the bots."""

    def runs_bots(self) -> bool:
        """Whether start/stop/restart work here (a supervisor in this process)."""
        ...

    def state(self, bot: str) -> str:
        """One line: running (pid), stopped, starting…"""
        ...

    async def act(self, bot: str, action: Action) -> str:
        """Do it; one line saying what happened."""
        ...

    async def probe(self, bot: str) -> str:
        """One tiny request through the bot's provider; one line, its reply or failure."""
        ...


def _control(request: Request) -> FleetControl | None:
    control: FleetControl | None = getattr(request.app.state, "control", None)
    return control


async def _page(web: Web, request: Request, note: str = "", status: int = 200) -> Response:
    configs = await web.fleet.current()
    control = _control(request)
    token, new = csrf_token(request)
    hidden = f'<input type="hidden" name="csrf" value="{escape(token)}">'
    sections = [
        _bot(b, configs.bots[b].log_level, control, hidden)
        + _workflow_form(b, hidden, configs.bots[b].integrations.comfyui is not None)
        for b in sorted(configs.bots)
    ]
    runs = control is not None and control.runs_bots()
    where = (
        ""
        if runs
        else '<p class="meta">Start, stop and restart work where <code>salon run</code> '
        "serves this page (its supervisor runs the bots); this server does not run them.</p>"
    )
    body = f"<h1>Bots</h1>{note}{where}{''.join(sections)}"
    response = web.html(layout("Salon bots", body, header=header()), status)
    if new:
        keep_csrf(web, request, response, token)
    return response


async def page_with(
    web: Web, request: Request, text: str, *, ok: bool, status: int = 200
) -> Response:
    """The page with one line on top: what was done, or why not."""
    return await _page(web, request, _line(text, ok=ok), status)


def _workflow_form(bot: str, hidden: str, comfyui: bool) -> str:
    if not comfyui:
        return ""
    return (
        f'<form method="post" action="/config/bots/workflow" enctype="multipart/form-data" '
        f'class="panel workflow">{hidden}<input type="hidden" name="bot" value="{escape(bot)}">'
        f"<label>ComfyUI workflow of {escape(bot)} (API format JSON): "
        '<input type="file" name="workflow" accept=".json,application/json"></label> '
        '<button type="submit">check and replace</button></form>'
    )


def _bot(bot: str, log_level: str, control: FleetControl | None, hidden: str) -> str:
    name = escape(bot)
    debug = log_level == "DEBUG"
    state = escape(control.state(bot)) if control is not None else "unknown"
    target = "INFO" if debug else "DEBUG"
    toggle = (
        f'<form method="post" action="/config/bots/level" class="inline">{hidden}'
        f'<input type="hidden" name="bot" value="{name}">'
        f'<input type="hidden" name="level" value="{target}">'
        f'<button type="submit" name="debug">debug logging: {"on" if debug else "off"}'
        f" (turn {'off' if debug else 'on'})</button></form>"
    )
    buttons = "".join(
        f'<button type="submit" name="action" value="{a}">{a}</button>' for a in ACTIONS
    )
    process = (
        f'<form method="post" action="/config/bots/act" class="inline">{hidden}'
        f'<input type="hidden" name="bot" value="{name}">{buttons}</form>'
    )
    test = (
        f'<form method="post" action="/config/bots/probe" class="inline">{hidden}'
        f'<input type="hidden" name="bot" value="{name}">'
        '<button type="submit">test the provider</button></form>'
    )
    return (
        f'<section class="panel bot" id="bot-{name}"><h2>{name}</h2>'
        f'<p class="state">{state} · log level {escape(log_level)}</p>'
        f"{toggle} {process} {test}</section>"
    )


async def _posted(web: Web, request: Request) -> tuple[dict[str, str], str] | Response:
    """The form's fields and its bot, or the refusal (sign-in, loopback, CSRF, Host)."""
    refused = await gate(web, request)
    if refused:
        return refused
    fields = await form(request)
    if fields is None:
        return await _page(web, request, _line("the form is too large", ok=False), 413)
    refusal = post_refusal(request, fields)
    if refusal:
        return await _page(web, request, _line(refusal, ok=False), 403)
    configs = await web.fleet.current()
    bot = fields.get("bot", "")
    if bot not in configs.bots:
        return await _page(web, request, _line(f"no bot {bot!r}", ok=False), 404)
    return fields, bot


def _line(text: str, *, ok: bool) -> str:
    return f'<p class="{"saved" if ok else "problems"}">{escape(text)}</p>'


async def bots(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return refused
    return await _page(web, request)


async def level(request: Request) -> Response:
    """Debug logging on or off: ``log_level`` in ``bots/<bot>.yaml``, checked, then written."""
    web: Web = request.app.state.web
    posted = await _posted(web, request)
    if isinstance(posted, Response):
        return posted
    fields, bot = posted
    wanted = fields.get("level", "")
    if wanted not in ("DEBUG", "INFO"):
        return await _page(web, request, _line("the level is DEBUG or INFO", ok=False), 422)
    name = f"bots/{bot}.yaml"
    path = config_files_by_name(web).get(name)
    if path is None:
        why = f"{name} is not a config file of this directory: set log_level by hand"
        return await _page(web, request, _line(why, ok=False), 404)
    text = await asyncio.to_thread(path.read_text, encoding="utf-8")
    line = f"log_level: {wanted}"
    edited = _LEVEL_LINE.sub(line, text) if _LEVEL_LINE.search(text) else _appended(text, line)
    problems, _ = await asyncio.to_thread(validate_edit, web.root, name, edited, dict(web.environ))
    if problems:
        return await _page(web, request, _line("; ".join(problems), ok=False), 422)
    await asyncio.to_thread(write_file, path.resolve(), edited)
    said = f"{bot}: log_level {wanted} saved; the running bot applies it within a second"
    return await _page(web, request, _line(said, ok=True))


def _appended(text: str, line: str) -> str:
    return f"{text}{'' if not text or text.endswith(chr(10)) else chr(10)}{line}\n"


async def act(request: Request) -> Response:
    web: Web = request.app.state.web
    posted = await _posted(web, request)
    if isinstance(posted, Response):
        return posted
    fields, bot = posted
    action = fields.get("action", "")
    control = _control(request)
    if action not in ACTIONS:
        return await _page(
            web, request, _line("the action is start, stop or restart", ok=False), 422
        )
    if control is None or not control.runs_bots():
        why = "this web server does not run the bots: use salon run (or your service manager)"
        return await _page(web, request, _line(why, ok=False), 409)
    said = await control.act(bot, cast(Action, action))
    return await _page(web, request, _line(said, ok=True))


async def probe(request: Request) -> Response:
    web: Web = request.app.state.web
    posted = await _posted(web, request)
    if isinstance(posted, Response):
        return posted
    _, bot = posted
    control = _control(request)
    if control is None:
        return await _page(web, request, _line("no provider test here", ok=False), 409)
    said = await control.probe(bot)
    ok = "FAILED" not in said
    return await _page(web, request, _line(said, ok=ok))
