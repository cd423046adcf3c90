"""The configurator's OAuth page: each bot's OAuth MCP servers with their state
(authorized until when, or not), and a button that starts ``salon tools auth``'s flow and
answers with the authorization link. The authorization server redirects to this server's
``/config/oauth/callback`` (or ``oauth.callback_url``); the tokens are sealed and stored
as the CLI stores them.

The configurator's rules apply (loopback only, signed in, CSRF on the POST). The callback
is loopback only but needs no session: the session cookie is ``SameSite=Strict``, so a
redirect from the authorization server's site does not carry it. What guards it is the
``state`` of a flow a signed-in operator started: random, single-use, and short-lived.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.shared.auth import AuthorizationCodeResult
from starlette.requests import Request
from starlette.responses import Response

from salon.config import BotConfig, Secrets
from salon.config.tools import McpServerConfig
from salon.errors import ToolError
from salon.tools.link import describe
from salon.tools.mcp_auth import KEY_ENV, SealedStorage, Sealer, run_authorization
from salon.tools.servers import client_info
from salon.web.configurator import gate, header
from salon.web.context import Web
from salon.web.guard import csrf_token, form, keep_csrf, loopback_refusal, post_refusal
from salon.web.pages import layout

__all__ = ["Flows", "callback", "listing", "start"]

logger = logging.getLogger(__name__)

CALLBACK_PATH = "/config/oauth/callback"
MAX_FLOWS = 16  # authorizations waiting for their redirect at once
FLOW_SECONDS = 300.0  # how long a link stays good
LINK_SECONDS = 30.0  # for discovery and registration, until the link is known
_TITLE = "Salon configurator: OAuth"


@dataclass
class _Flow:
    bot: str
    server: str
    started: float
    code: asyncio.Future[AuthorizationCodeResult]
    task: asyncio.Task[None] | None = None


@dataclass
class Flows:
    """The authorizations started here and waiting for their redirect, by ``state``."""

    pending: dict[str, _Flow] = field(default_factory=dict)

    def drop_stale(self) -> None:
        now = time.monotonic()
        for state, flow in list(self.pending.items()):
            if now - flow.started > FLOW_SECONDS or (flow.task and flow.task.done()):
                self._end(state)

    def _end(self, state: str) -> None:
        flow = self.pending.pop(state, None)
        if flow is not None and flow.task is not None and not flow.task.done():
            flow.task.cancel()

    def take(self, state: str) -> _Flow | None:
        return self.pending.pop(state, None)


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


def _storage(
    web: Web, bot: str, server: str, settings: McpServerConfig, redirect: str
) -> SealedStorage | str:
    secret = web.environ.get(KEY_ENV)
    if not secret:
        return f"set {KEY_ENV} where the web server runs (the key the tokens are kept under)"
    assert settings.oauth is not None
    client = client_info(settings.oauth, Secrets(dict(web.environ)), redirect)
    return SealedStorage(web.store.tokens, bot, server, Sealer(secret), client)


async def _state_of(web: Web, bot: str, server: str) -> str:
    secret = web.environ.get(KEY_ENV)
    if not secret:
        return "unknown: " + KEY_ENV + " is not set here"
    storage = SealedStorage(web.store.tokens, bot, server, Sealer(secret))
    try:
        tokens = await storage.get_tokens()
    except ToolError:
        return "not readable with this key: authorize again"
    if tokens is None:
        return "not authorized"
    if storage.expires_at is None:
        return "authorized"
    at = datetime.fromtimestamp(storage.expires_at, UTC)
    # A refresh token renews an expired access token at the next call.
    renewable = " (renewed when used)" if tokens.refresh_token else ""
    return f"authorized, expires at {at:%Y-%m-%d %H:%M} UTC{renewable}"


async def listing(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = gate(web, request)
    if refused:
        return refused
    return await _page(web, request)


async def _page(web: Web, request: Request, note: str = "", status: int = 200) -> Response:
    token, new = csrf_token(request)
    configs = await web.fleet.current()
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
                f"<td>{escape(await _state_of(web, bot, server))}</td>"
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
    refused = gate(web, request)
    if refused:
        return refused
    fields = await form(request)
    if fields is None:
        return _refused(web, "the form is too large")
    refusal = post_refusal(request, fields)
    if refusal:
        return _refused(web, refusal)
    bot, server = fields.get("bot", ""), fields.get("server", "")
    configs = await web.fleet.current()
    found = dict(_oauth_servers(configs.bots[bot])) if bot in configs.bots else {}
    settings = found.get(server)
    if settings is None:
        return _refused(web, f"{bot} has no MCP server {server} with oauth", 404)
    flows: Flows = request.app.state.oauth_flows
    flows.drop_stale()
    if len(flows.pending) >= MAX_FLOWS:
        return await _page(web, request, _problem("Too many authorizations wait: retry later."))
    redirect = _redirect(request, settings)
    storage = _storage(web, bot, server, settings, redirect)
    if isinstance(storage, str):
        return await _page(web, request, _problem(storage), 503)
    link = await _begin(
        web, flows, bot=bot, server=server, settings=settings, storage=storage, redirect=redirect
    )
    if link.startswith("error: "):
        return await _page(web, request, _problem(link.removeprefix("error: ")), 502)
    shown = (
        f'<div class="saved">Open this link to authorize {escape(bot)} at {escape(server)} '
        f'(good for {FLOW_SECONDS / 60:g} minutes): <a href="{escape(link)}" '
        f'rel="noreferrer">{escape(link)}</a></div>'
    )
    return await _page(web, request, shown)


async def _begin(
    web: Web,
    flows: Flows,
    *,
    bot: str,
    server: str,
    settings: McpServerConfig,
    storage: SealedStorage,
    redirect: str,
) -> str:
    """Start the flow in the background; its link, or ``error: why``."""
    assert settings.oauth is not None
    assert settings.url is not None
    loop = asyncio.get_running_loop()
    shown: asyncio.Future[str] = loop.create_future()
    flow = _Flow(bot, server, time.monotonic(), loop.create_future())

    async def show(link: str) -> None:
        state = parse_qs(urlsplit(link).query).get("state", [""])[0]
        flows.pending[state] = flow
        shown.set_result(link)

    async def answer() -> AuthorizationCodeResult:
        return await asyncio.wait_for(asyncio.shield(flow.code), FLOW_SECONDS)

    async def run() -> None:
        await web.store.tokens.forget(bot, server)  # a new authorization replaces the old
        await run_authorization(
            server,
            str(settings.url),
            storage,
            scope=settings.oauth.scope if settings.oauth else None,
            redirect_uri=redirect,
            show=show,
            answer=answer,
        )

    flow.task = asyncio.create_task(run(), name=f"oauth {bot}/{server}")
    waited: set[asyncio.Future[Any]] = {shown, flow.task}
    done, _ = await asyncio.wait(waited, timeout=LINK_SECONDS, return_when="FIRST_COMPLETED")
    if shown in done:
        return shown.result()
    flow.task.cancel()
    if flow.task in done and (exc := flow.task.exception()) is not None:
        logger.debug("authorizing %s for %s failed", server, bot, exc_info=exc)
        return f"error: {server} gave no authorization link: {describe(exc)}"
    return f"error: {server} gave no authorization link within {LINK_SECONDS:g}s"


async def callback(request: Request) -> Response:
    """The authorization server's redirect: the code goes to the flow of its ``state``."""
    web: Web = request.app.state.web
    refusal = loopback_refusal(request)
    if refusal:
        return _refused(web, refusal)
    query = request.query_params
    flows: Flows = request.app.state.oauth_flows
    flows.drop_stale()
    flow = flows.take(query.get("state", ""))
    if flow is None or flow.task is None:
        return _refused(web, "This authorization is unknown or over: start it again.", 400)
    code = query.get("code", "")
    if not code:
        flow.task.cancel()
        why = query.get("error", "no code came back")
        return _refused(web, f"{flow.server} was not authorized: {why}", 400)
    flow.code.set_result(
        AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))
    )
    try:
        await asyncio.wait_for(asyncio.shield(flow.task), LINK_SECONDS)
    except TimeoutError:
        flow.task.cancel()
        return _refused(web, f"{flow.server} did not answer in time: start again.", 504)
    except Exception as exc:  # one line for the operator; the details in the log
        logger.debug("authorizing %s for %s failed", flow.server, flow.bot, exc_info=True)
        return _refused(web, f"{flow.server} was not authorized: {describe(exc)}", 502)
    said = f"{flow.bot} is authorized at {flow.server}; the tokens are kept (sealed)."
    body = f'<div class="saved">{escape(said)}</div><p><a href="/config/oauth">back</a></p>'
    return web.html(layout(_TITLE, body, header=header()))


def _problem(text: str) -> str:
    return f'<div class="problems">{escape(text)}</div>'


def _refused(web: Web, reason: str, status: int = 403) -> Response:
    body = f'<p class="problems">{escape(reason)}</p>'
    return web.html(layout(_TITLE, body, header=header()), status)
