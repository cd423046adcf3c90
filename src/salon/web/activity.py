"""The activity page: what the bots did, what it cost, where the prompt cache broke.

``GET /activity`` wants a session: typing the activity key (``POST /activity/login``) or
opening a signed link from Discord's ``/activity`` (``GET /activity?token=…``) gives one.
The link is answered by a page of this site that sets the cookie and moves on to
``/activity``: a ``SameSite=Strict`` cookie set during a navigation from another site
would not be sent on a redirect, and the token never leaves in a ``Referer``.
"""

from __future__ import annotations

import hmac
import logging
import time
from html import escape
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from salon.errors import StoreError
from salon.trace import CostRow
from salon.web.cache_alarm import alarm_banner, judged_channels
from salon.web.context import Web
from salon.web.guard import (
    SESSION_COOKIE,
    client_address,
    csrf_token,
    end_session,
    form,
    keep_csrf,
    post_refusal,
    set_session,
    signed_in,
)
from salon.web.health import bot_states
from salon.web.links import LINK, token_valid
from salon.web.pages import layout, money, share, timeline_rows, trace_detail
from salon.web.plot import cost_plot

__all__ = ["activity", "login", "login_page", "logout", "rows", "signed_in_page", "trace"]

logger = logging.getLogger(__name__)

TIMELINE = 100
PLOT_DAYS = 30
_WASTE_ROWS = 10  # channels and days listed under wasted cache writes
FILTERS = ("bot", "channel", "outcome")
MAX_ID_DIGITS = 18  # ids are 64-bit integers in the store


def _row_id(text: str) -> int | None:
    """A row id as the address gives it, or None when it is none (``²``, 5000 digits…)."""
    if not text.isascii() or not text.isdigit() or len(text) > MAX_ID_DIGITS:
        return None
    return int(text)


def _off(web: Web) -> Response:
    name = escape(web.settings.activity_key_env)
    body = (
        '<div class="login panel"><h1>The activity page is off</h1>'
        f"<p>Set the environment variable <code>{name}</code> to a long random key where "
        "the web server runs, then restart it.</p></div>"
    )
    return web.html(layout("Salon activity", body), 503)


STORE_DOWN = "The store cannot be reached, so no session can be kept: try again in a moment."
# Where a sign-in may go on to: the page that asked for it (never a URL from the form).
NEXT_PAGES = {"/activity": "Salon activity", "/config": "Salon configurator"}
CONFIG_HINT = (
    "<p class=meta>Or run <code>salon config-link DIR</code> on this machine and open the "
    "link it prints.</p>"
)


def login_page(
    web: Web, request: Request, status: int, message: str = "", next_page: str = "/activity"
) -> Response:
    """The sign-in form; after it, ``next_page`` (one of ``NEXT_PAGES``)."""
    token, new = csrf_token(request)
    note = f'<p class="problems">{escape(message)}</p>' if message else ""
    title = NEXT_PAGES.get(next_page, NEXT_PAGES["/activity"])
    hint = (
        CONFIG_HINT
        if next_page == "/config"
        else "<p class=meta>Or ask for a link with <code>/activity</code> in Discord.</p>"
    )
    body = (
        '<form class="login panel" method="post" action="/activity/login">'
        f"<h1>{escape(title)}</h1>{note}"
        '<label for="key">Activity key</label>'
        '<input id="key" name="key" type="password" autocomplete="current-password" autofocus>'
        f'<input type="hidden" name="csrf" value="{escape(token)}">'
        f'<input type="hidden" name="next" value="{escape(next_page)}">'
        f"<button type=submit>Sign in</button>{hint}</form>"
    )
    response = web.html(layout(f"{title}: sign in", body), status)
    if new:
        keep_csrf(web, request, response, token)
    return response


async def signed_in_page(web: Web, request: Request, next_page: str) -> Response:
    """Answer to a link: a page of this site that sets the session and goes on to
    ``next_page`` (a ``SameSite=Strict`` cookie set on a redirect from elsewhere would
    not be sent)."""
    body = f'<p class="login">Signed in. <a href="{next_page}">Go on</a>.</p>'
    refresh = f'<meta http-equiv="refresh" content="0; url={next_page}">'
    # The token must not travel on in a Referer, not even to this site.
    no_referrer = {"Referrer-Policy": "no-referrer"}
    response = web.html(layout(NEXT_PAGES[next_page], body, head=refresh), headers=no_referrer)
    return await _with_session(web, request, response, next_page)


async def _with_session(web: Web, request: Request, response: Response, next_page: str) -> Response:
    """``response`` with a new session's cookie, or the sign-in form saying why not."""
    try:
        await set_session(web, request, response)
    except StoreError as exc:
        logger.warning("web server: cannot keep a session in the store: %s", exc)
        return login_page(web, request, 503, STORE_DOWN, next_page)
    return response


async def activity(request: Request) -> Response:
    web: Web = request.app.state.web
    key = web.activity_key()
    if key is None:
        return _off(web)
    token = request.query_params.get("token")
    if token is not None:
        if not token_valid(key, LINK, token, now=web.now()):
            message = "This link is not valid or has expired: ask for a new one, or use the key."
            return login_page(web, request, 401, message)
        return await signed_in_page(web, request, "/activity")
    if not await signed_in(web, request):
        return login_page(web, request, 401)
    return await _page(web, request)


async def login(request: Request) -> Response:
    web: Web = request.app.state.web
    key = web.activity_key()
    if key is None:
        return _off(web)
    fields = await form(request)
    if fields is None:
        return web.html(layout("Salon", "<p>That form is too large.</p>"), 413)
    next_page = fields.get("next", "/activity")
    next_page = next_page if next_page in NEXT_PAGES else "/activity"
    refusal = post_refusal(request, fields)
    if refusal:
        return login_page(web, request, 403, refusal, next_page)
    client = client_address(request)
    if web.logins.paused(client):
        paused = "Too many wrong keys lately: try again in a minute."
        return login_page(web, request, 429, paused, next_page)
    given = fields.get("key", "")
    if not hmac.compare_digest(given.encode("utf-8"), key.encode("utf-8")):
        web.logins.failed(client)
        logger.warning("activity page: a sign-in with a wrong key")
        return login_page(web, request, 401, "That is not the activity key.", next_page)
    return await _with_session(web, request, RedirectResponse(next_page, 303), next_page)


async def logout(request: Request) -> Response:
    """End this browser's session (``everywhere``: every session, on every server)."""
    web: Web = request.app.state.web
    fields = await form(request) or {}
    if post_refusal(request, fields):
        return login_page(web, request, 403, "Sign out again from the page.")
    try:
        await end_session(web, request, everywhere=bool(fields.get("everywhere")))
    except StoreError as exc:
        logger.warning("web server: cannot end a session in the store: %s", exc)
        return login_page(web, request, 503, "The store cannot be reached: sign out again.")
    response = RedirectResponse("/activity", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


def _filters(request: Request) -> dict[str, str]:
    return {k: v[:200] for k in FILTERS if (v := request.query_params.get(k, "").strip())}


async def rows(request: Request) -> Response:
    """Timeline rows newer than ``after`` (the page asks every few seconds); with ``seen``
    (the newest activation its cards count), new cards first when there is a newer one."""
    web: Web = request.app.state.web
    if not await signed_in(web, request):
        return web.text("sign in first", 401)
    newest = _row_id(request.query_params.get("after", "0"))
    if newest is None:
        return web.text("after must be the id of a timeline row", 422)
    seen = _row_id(request.query_params.get("seen", "0"))
    if seen is None:
        return web.text("seen must be the id of a timeline row", 422)
    found = await web.store.traces.list_traces(limit=TIMELINE, **_filters(request))  # type: ignore[arg-type]
    shown = timeline_rows([t for t in found if t.id > newest])
    if "seen" in request.query_params and (counted := await _newest_id(web)) > seen:
        days = await web.store.traces.daily(days=PLOT_DAYS)  # read after the newest id
        shown = _cards(days, counted, web.now()) + shown  # the page swaps its cards for these
    return web.html(shown)


async def _newest_id(web: Web) -> int:
    """The id of the newest activation of every bot (the cards count them all)."""
    newest = await web.store.traces.list_traces(limit=1)
    return newest[0].id if newest else 0


async def trace(request: Request) -> Response:
    web: Web = request.app.state.web
    if not await signed_in(web, request):
        if request.query_params.get("fragment"):
            return web.text("sign in first", 401)
        return login_page(web, request, 401)
    trace_id = _row_id(request.path_params["trace_id"])
    found = None if trace_id is None else await web.store.traces.get_trace(trace_id)
    if found is None:
        return web.html(layout("Salon", '<p class="empty">No such trace.</p>'), 404)
    detail = trace_detail(*found)
    if request.query_params.get("fragment"):
        return web.html(detail)
    return web.html(layout(f"Salon trace #{found[0].id}", detail, header=_nav(request)))


def _nav(request: Request, bots: list[dict[str, Any]] | None = None) -> str:
    token = request.cookies.get("salon_csrf", "")
    chips = "".join(
        f'<span class="chip {"up" if b["state"] == "up" else "down"}" '
        f'title="{escape(b["state"])}">{escape(b["bot"])}: {escape(b["state"])}</span>'
        for b in bots or []
    )
    return (
        f'<nav>{chips}</nav><a class="chip" href="/activity/replays">replays</a>'
        '<a class="chip" href="/config">configurator</a>'
        '<form method="post" action="/activity/logout">'
        f'<input type="hidden" name="csrf" value="{escape(token)}">'
        '<button class="quiet" type="submit">sign out</button> '
        '<button class="quiet" type="submit" name="everywhere" value="1">'
        "sign out everywhere</button></form>"
    )


async def _page(web: Web, request: Request) -> Response:
    filters = _filters(request)
    found = await web.store.traces.list_traces(limit=TIMELINE, **filters)  # type: ignore[arg-type]
    counted = await _newest_id(web)
    days = await web.store.traces.daily(days=PLOT_DAYS)  # read after the newest id
    since = web.now() - PLOT_DAYS * 86400
    channels = await web.store.traces.cost_by("channel", since=since)
    configs = await web.fleet.current()
    bots = bot_states(await web.store.health.health_reports(), set(configs.bots), web.now())
    timeline = timeline_rows(found) or '<p class="empty">No activations yet.</p>'
    body = (
        "<h1>Activity</h1>"
        + alarm_banner(await judged_channels(web))
        + _cards(days, counted, web.now())
        + '<h2>Cost per day</h2><div class="panel">'
        + cost_plot(days, days=PLOT_DAYS, now=web.now())
        + '<div class="legend"><i class="l-bar"></i>cost <i class="l-billed"></i>cache read '
        "share billed <i class=l-expected></i>expected</div></div>"
        + _waste(days, channels)
        + "<h2>Timeline</h2>"
        + _filter_form(filters, sorted(configs.bots))
        + f'<div id="timeline">{timeline}</div>'
    )
    token, new = csrf_token(request)
    response = web.html(layout("Salon activity", body, header=_nav(request, bots)))
    if new:
        keep_csrf(web, request, response, token)
    return response


def _cards(days: list[dict[str, Any]], seen: int, now: float) -> str:
    """The totals above the timeline; ``data-seen`` is the newest activation they count
    (the page asks for new cards when a newer one exists)."""
    cost = sum(d["cost"] for d in days)
    activations = sum(d["activations"] for d in days)
    today = time.strftime("%Y-%m-%d", time.gmtime(now))
    cost_today = sum(d["cost"] for d in days if d["day"] == today)
    billed = [d["read_share"] for d in days if d["read_share"] is not None]
    expected = [d["expected_read_share"] for d in days if d["expected_read_share"] is not None]
    cards = [
        (money(cost), f"cost, last {PLOT_DAYS} days"),
        (f"{activations:,}", "activations"),
        (money(cost_today), "cost today (UTC)"),
        (share(sum(billed) / len(billed)) if billed else "-", "cache read share, billed"),
        (share(sum(expected) / len(expected)) if expected else "-", "cache read share, expected"),
    ]
    return (
        f'<div class="cards" id="cards" data-seen="{seen}">'
        + "".join(
            f'<div class="card"><b>{value}</b><span>{label}</span></div>' for value, label in cards
        )
        + "</div>"
    )


def _waste(days: list[dict[str, Any]], channels: list[CostRow]) -> str:
    """Cache writes the next call showed unread, per channel and per UTC day."""
    by_day = [d for d in reversed(days) if d.get("wasted")]
    by_channel = sorted(
        (c for c in channels if c.cache_write_wasted_tokens),
        key=lambda c: c.cache_write_wasted_tokens,
        reverse=True,
    )
    if not by_day and not by_channel:
        return ""
    rows = "".join(
        f"<tr><td>{escape(c.key)}</td><td>{c.cache_write_wasted_tokens:,}</td></tr>"
        for c in by_channel[:_WASTE_ROWS]
    )
    daily = "".join(
        f"<li>{escape(d['day'])}: {d['wasted']:,} tokens</li>" for d in by_day[:_WASTE_ROWS]
    )
    return (
        '<h2>Wasted cache writes</h2><div class="panel">'
        "<table><tr><th>channel</th><th>tokens written, never read</th></tr>"
        f"{rows}</table><ul>{daily}</ul></div>"
    )


def _filter_form(filters: dict[str, str], bots: list[str]) -> str:
    def options(name: str, values: list[str]) -> str:
        chosen = filters.get(name, "")
        shown = "".join(
            f'<option value="{escape(v)}"{" selected" if v == chosen else ""}>{escape(v)}</option>'
            for v in values
        )
        return f'<select name="{name}"><option value="">every {name}</option>{shown}</select>'

    outcomes = ["answered", "error", "cancelled", "stopped"]
    channel = escape(filters.get("channel", ""))
    return (
        '<form class="filters" method="get" action="/activity">'
        + options("bot", bots)
        + options("outcome", outcomes)
        + f'<input name="channel" placeholder="channel key" value="{channel}">'
        + '<button type="submit">filter</button></form>'
    )
