"""The configurator's OAuth page: each bot's OAuth MCP servers with their state
(authorized until when, or not), and a button that starts ``salon tools auth``'s flow and
answers with the authorization link. The authorization server redirects to this server's
``/config/oauth/callback`` (or ``oauth.callback_url``); the tokens are sealed and stored
as the CLI stores them.

The configurator's rules apply to the page and its POST (loopback only, signed in, CSRF).
The callback is the one route of the configurator that answers any client (a person
connecting their own account with ``oauth.per_user`` opens their link on their own
machine, through ``oauth.callback_url``): it needs no session (the session cookie is
``SameSite=Strict``, so a redirect from the authorization server's site does not carry
it), shows nothing but the outcome of one flow, and does nothing without the ``state`` of
a flow that is waiting (one the operator started here, or a person's started in a bot's
process and handed over through the store): random, single-use, and good for five
minutes. The ``Host`` check of every route still applies (``web.public_url``,
``web.allowed_hosts``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from html import escape
from typing import Protocol

from starlette.requests import Request
from starlette.responses import Response

from salon.config import BotConfig, McpServerConfig
from salon.web.configurator import gate, header, posted
from salon.web.context import Web
from salon.web.guard import csrf_token, keep_csrf
from salon.web.pages import layout

__all__ = ["CALLBACK_PATH", "OAuthDesk", "callback", "listing", "start"]

CALLBACK_PATH = "/config/oauth/callback"
_TITLE = "Salon configurator: OAuth"


class OAuthDesk(Protocol):
    """The authorizations, as the web server's process runs them
    (``salon.tools.oauth_desk``: this package never speaks MCP)."""

    async def state(self, bot: str, server: str) -> str: ...

    async def start(
        self, bot: str, server: str, settings: McpServerConfig, redirect: str
    ) -> tuple[str | None, str]: ...

    async def finish(self, query: Mapping[str, str]) -> tuple[bool, str]: ...


def _desk(request: Request) -> OAuthDesk | None:
    desk: OAuthDesk | None = getattr(request.app.state, "oauth_desk", None)
    return desk


def _oauth_servers(config: BotConfig) -> list[tuple[str, McpServerConfig]]:
    return [
        (name, s)
        for name, s in sorted(config.mcp_servers.items())
        if s.oauth is not None and s.url is not None
    ]


def _redirect(request: Request, settings: McpServerConfig) -> str:
    """Where the authorization answers: the configured URL, or this server as the
    operator's browser reaches it (the configurator is loopback only)."""
    assert settings.oauth is not None
    if settings.oauth.callback_url:
        return settings.oauth.callback_url
    return str(request.base_url).rstrip("/") + CALLBACK_PATH


async def listing(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return refused
    return await _page(web, request)


async def _page(web: Web, request: Request, note: str = "", status: int = 200) -> Response:
    token, new = csrf_token(request)
    configs, desk = await web.fleet.current(), _desk(request)
    rows = []
    for bot in sorted(configs.bots):
        for server, _ in _oauth_servers(configs.bots[bot]):
            hidden = (
                f'<input type="hidden" name="bot" value="{escape(bot)}">'
                f'<input type="hidden" name="server" value="{escape(server)}">'
                f'<input type="hidden" name="csrf" value="{escape(token)}">'
            )
            rows.append(
                f"<tr><td>{escape(bot)}</td><td>{escape(server)}</td>"
                f"<td>{escape(await _state(desk, bot, server))}</td>"
                f'<td><form method="post" action="/config/oauth/start">{hidden}'
                '<button type="submit">authorization link</button></form></td></tr>'
            )
    table = (
        '<table class="keys"><tr><th>bot</th><th>server</th><th>state</th><th></th></tr>'
        f"{''.join(rows)}</table>"
        if rows
        else '<p class="meta">No bot has an MCP server with oauth.</p>'
    )
    body = f"<h1>OAuth MCP servers</h1>{note}{table}"
    response = web.html(layout(_TITLE, body, header=header()), status)
    if new:
        keep_csrf(web, request, response, token)
    return response


async def start(request: Request) -> Response:
    web: Web = request.app.state.web
    fields = await posted(web, request, partial(_refused, web), too_large="the form is too large")
    if isinstance(fields, Response):
        return fields
    bot, server = fields.get("bot", ""), fields.get("server", "")
    configs = await web.fleet.current()
    found = dict(_oauth_servers(configs.bots[bot])) if bot in configs.bots else {}
    settings = found.get(server)
    if settings is None:
        return _refused(web, f"{bot} has no MCP server {server} with oauth", 404)
    desk = _desk(request)
    if desk is None:
        return await _page(web, request, _problem(_NO_DESK), 503)
    link, problem = await desk.start(bot, server, settings, _redirect(request, settings))
    if link is None:
        return await _page(web, request, _problem(problem), 502)
    shown = (
        f'<div class="saved">Open this link to authorize {escape(bot)} at {escape(server)} '
        f'(good for 5 minutes): <a href="{escape(link)}" '
        f'rel="noreferrer">{escape(link)}</a></div>'
    )
    return await _page(web, request, shown)


async def callback(request: Request) -> Response:
    """The authorization server's redirect: the code goes to the flow of its ``state``.
    From any client (see the module's note): the state is the guard."""
    web: Web = request.app.state.web
    desk = _desk(request)
    if desk is None:
        return _refused(web, _NO_DESK, 503)
    done, said = await desk.finish(dict(request.query_params))
    if not done:
        return _refused(web, said, 400)
    body = f'<div class="saved">{escape(said)}</div><p><a href="/config/oauth">back</a></p>'
    return web.html(layout(_TITLE, body, header=header()))


_NO_DESK = "Authorizations are started where salon web or salon run serves this page."


async def _state(desk: OAuthDesk | None, bot: str, server: str) -> str:
    return "unknown here" if desk is None else await desk.state(bot, server)


def _problem(text: str) -> str:
    return f'<div class="problems">{escape(text)}</div>'


def _refused(web: Web, reason: str, status: int = 403) -> Response:
    body = f'<p class="problems">{escape(reason)}</p>'
    return web.html(layout(_TITLE, body, header=header()), status)
