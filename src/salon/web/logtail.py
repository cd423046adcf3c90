"""The configurator's live log (``/config/log``): today's log files of the fleet's data
directory (``<data_dir>/logs/<stem>-YYYY-MM-DD.log``, UTC, as ``salon.logsetup`` writes
them), the chosen one followed as it grows.

The page asks ``/config/log/tail?file=…&offset=…`` every second (polling: one short request,
no connection held open per tab); each answer carries at most ``MAX_CHUNK`` bytes, whole
lines only, passed through the redactor once more. Only today's files can be named, and
a symlink is no log file (as for outputs and the config editor): it could lead anywhere.
"""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from html import escape
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

from salon.web.configurator import gate, header
from salon.web.context import HEADERS, Web
from salon.web.pages import layout

__all__ = ["MAX_CHUNK", "log_page", "read_chunk", "script", "tail"]

MAX_CHUNK = 64 * 1024  # per answer: a burst of DEBUG lines arrives over a few polls
FIRST = 16 * 1024  # what the page shows at once: the end of the file
POLL_MS = 1000

JS = f"""
(function () {{
  'use strict';
  var pre = document.getElementById('log-tail');
  if (!pre) return;
  var busy = false;
  function poll() {{
    if (busy) return;
    busy = true;
    var query = new URLSearchParams({{file: pre.dataset.file, offset: pre.dataset.offset}});
    fetch('/config/log/tail?' + query.toString(), {{credentials: 'same-origin'}})
      .then(function (r) {{ if (!r.ok) throw new Error(r.status); return r.json(); }})
      .then(function (data) {{
        if (data.reset) pre.textContent = '';
        pre.dataset.offset = String(data.offset);
        if (!data.text) return;
        var follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
        pre.appendChild(document.createTextNode(data.text));
        if (follow) pre.scrollTop = pre.scrollHeight;
      }})
      .catch(function () {{}})
      .then(function () {{ busy = false; }});
  }}
  setInterval(poll, {POLL_MS});
}})();
"""


def _today_files(logs: Path | None) -> dict[str, Path]:
    if logs is None:
        return {}
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    found = sorted(logs.glob(f"*-{day}.log"))
    return {p.name: p for p in found if p.is_file() and not p.is_symlink()}


def read_chunk(path: Path, offset: int) -> tuple[int, str, bool]:
    """(new offset, whole lines from ``offset``, whether the file started over: a new file
    of that name). ``offset`` -1: the last ``FIRST`` bytes' whole lines. Blocking."""
    # O_NOFOLLOW: a file swapped for a symlink after it was listed is not opened either.
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as file:
        size = file.seek(0, 2)
        reset = offset > size
        start = max(0, size - FIRST) if offset < 0 else 0 if reset else offset
        file.seek(start)
        data = file.read(MAX_CHUNK)
    skip = data.find(b"\n") + 1 if offset < 0 and start > 0 else 0  # from a line's start
    end = data.rfind(b"\n") + 1  # a line still being written waits for the next poll
    if end <= skip:
        if len(data) < MAX_CHUNK:
            return start + skip, "", reset
        end = len(data)  # a line longer than a whole chunk goes as it is
    return start + end, data[skip:end].decode("utf-8", "replace"), reset


async def _read(path: Path, offset: int) -> tuple[int, str, bool] | None:
    """``read_chunk`` off the event loop; None when the file went away or became a link."""
    try:
        return await asyncio.to_thread(read_chunk, path, offset)
    except OSError:
        return None


async def log_page(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return refused
    files = _today_files(request.app.state.logs)
    if not files:
        body = '<h1>Log</h1><p class="empty">No log file today yet.</p>'
        return web.html(layout("Salon log", body, header=header()))
    name = request.query_params.get("file") or next(iter(files))
    path = files.get(name)
    read = None if path is None else await _read(path, -1)
    if read is None:
        return web.html(layout("Salon", f"<p>No log file {escape(name)!r} today.</p>"), 404)
    offset, text, _ = read
    links = "".join(f'<a href="/config/log?file={escape(n)}">{escape(n)}</a>' for n in files)
    body = (
        f'<h1>Log</h1><div class="panel files">Today: {links}</div>'
        f'<pre id="log-tail" class="log" data-file="{escape(name)}" data-offset="{offset}">'
        f"{escape(web.redact(text))}</pre>"
    )
    head = '<script src="/static/logtail.js" defer></script>'
    return web.html(layout(f"Salon log: {name}", body, header=header(), head=head))


async def tail(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return web.text("sign in first", 401) if refused.status_code == 401 else refused
    path = _today_files(request.app.state.logs).get(request.query_params.get("file", ""))
    try:
        offset = int(request.query_params.get("offset", "-1"))
    except ValueError:
        offset = -1
    read = None if path is None else await _read(path, offset)
    if read is None:
        return web.json({"error": "no such log file today"}, 404)
    new, text, reset = read
    return web.json({"offset": new, "text": web.redact(text), "reset": reset})


async def script(request: Request) -> Response:
    return Response(JS, media_type="text/javascript; charset=utf-8", headers=HEADERS)
