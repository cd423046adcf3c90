"""``GET /activity/replays``: the replays ``salon replay`` kept beside each bot's data
(``<data_dir>/replays/*.json``, see docs/REPLAY.md), newest first: per arm what it decided
and cost, and the judge's verdicts. Read from the files as they are; one that cannot be
read is left out."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from salon.config import ConfigSet
from salon.trace import money
from salon.web.activity import login_page
from salon.web.context import Web
from salon.web.guard import signed_in
from salon.web.outputs import data_dir_of
from salon.web.pages import layout, share

__all__ = ["MAX_FILE_BYTES", "SHOWN", "read_replays", "replays"]

SHOWN = 20  # replays on the page, newest first
MAX_FILE_BYTES = 1_000_000  # a summary is a few kilobytes: a larger file is not one
_BACK = '<nav><a class="chip" href="/activity">activity</a></nav>'


async def replays(request: Request) -> Response:
    web: Web = request.app.state.web
    if not await signed_in(web, request):
        return login_page(web, request, 401)
    configs = await web.fleet.current()
    found = await asyncio.to_thread(read_replays, configs)  # files: off the event loop
    shown = "".join(_replay(r) for r in found) or (
        '<p class="empty">No replays yet: <code>salon replay</code> keeps a summary of each '
        "beside the bot's data.</p>"
    )
    return web.html(layout("Salon replays", f"<h1>Replays</h1>{shown}", header=_BACK))


def read_replays(configs: ConfigSet, limit: int = SHOWN) -> list[dict[str, Any]]:
    """The newest summaries of every bot, newest first."""
    paths: list[tuple[str, Path]] = []
    for key in sorted(configs.bots):
        directory = data_dir_of(configs, key) / "replays"
        if directory.is_dir():
            paths += [(key, p) for p in sorted(directory.glob("*.json"))[-limit:]]
    found = [r for key, path in paths if (r := _read(key, path)) is not None]
    found.sort(key=lambda r: r.get("finished_at") or 0, reverse=True)
    return found[:limit]


def _read(key: str, path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("arms"), list):
        return None
    return {**data, "bot": str(data.get("bot") or key)}


def _replay(found: dict[str, Any]) -> str:
    finished = found.get("finished_at")
    when = (
        datetime.fromtimestamp(finished, UTC).strftime("%Y-%m-%d %H:%M UTC")
        if isinstance(finished, int | float)
        else "-"
    )
    how = f"{found.get('mode', '')}{', dry run' if found.get('dry_run') else ''}"
    head = (
        f"<h3>{escape(when)} · <b>{escape(str(found['bot']))}</b> as "
        f"{escape(str(found.get('as', '')))} · {escape(str(found.get('source', '')))} "
        f"({escape(how)}, {int(found.get('lines') or 0):,} lines)</h3>"
    )
    judged = "".join(f"<p>{escape(_judge_words(v))}</p>" for v in found.get("judge") or [])
    return f'<div class="panel replay">{head}{_arms(found["arms"])}{judged}</div>'


def _arms(arms: list[Any]) -> str:
    labelled = any(isinstance(a, dict) and "balanced_accuracy" in a for a in arms)
    head = ["arm", "messages", "spoke", "flips", "cost", "cache read"]
    head += ["precision", "recall", "bal. acc."] if labelled else []
    rows = []
    for arm in (a for a in arms if isinstance(a, dict)):
        cells = [
            escape(str(arm.get("arm", ""))),
            *(f"{int(arm.get(k) or 0):,}" for k in ("messages", "spoke", "flips")),
            "no price" if arm.get("cost_usd") is None else money(float(arm["cost_usd"])),
            share(arm.get("cache_read_share")),
        ]
        if labelled:
            cells += [share(arm.get(k)) for k in ("precision", "recall", "balanced_accuracy")]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    heads = "".join(f"<th>{h}</th>" for h in head)
    return f"<table><tr>{heads}</tr>{''.join(rows)}</table>"


def _judge_words(verdict: Any) -> str:
    if not isinstance(verdict, dict):
        return ""
    arms = [str(a) for a in verdict.get("arms") or []][:2]
    wins = verdict.get("wins") or {}
    preferred = ", ".join(f"{a} {wins.get(a, 0)}" for a in arms)
    return (
        f"judge: {' vs '.join(arms)} on {verdict.get('compared', 0)} messages: preferred "
        f"{preferred}, split {verdict.get('split', 0)}; agreement "
        f"{share(verdict.get('agreement'))}"
    )
