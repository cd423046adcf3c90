"""Authorizations that finish on the web server's callback route
(``salon.web.oauth``), which reaches them only through the ``OAuthDesk`` the web server's
process hands it (the web package never speaks MCP): ``salon tools auth``'s flow, with the
redirect taken by that route instead of a one-shot listener, and the tokens sealed and
stored as the CLI stores them.

Two kinds of flow:

- the operator's, started from the configurator's OAuth page: the flow waits in the web
  server's process, by the ``state`` of its link, for the redirect;
- a person's (``oauth.per_user``, the consent flow in a direct message): started in the
  bot's process when the person's call finds no usable tokens (``PersonConsent``), its
  link sent to them privately. The redirect lands in the web server, another process
  (``salon run``'s supervisor or ``salon web``), so it is handed over through the store,
  where processes meet: the bot's process keeps the flow (its PKCE verifier never leaves
  that process) and puts a sealed marker under a digest of the state; the callback takes
  the marker (single use: the first to delete it), puts the sealed code beside it, and
  waits for the bot's process to exchange it and put the outcome. The person the tokens
  are stored for is the flow's, never anything in the redirect's query.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from salon.config import McpServerConfig, Secrets
from salon.config.tools import TOKEN_KEY_ENV as KEY_ENV
from salon.config.tools import McpOAuthConfig
from salon.errors import StoreError, ToolError
from salon.tools.link import describe, not_authorized

if TYPE_CHECKING:  # the MCP SDK loads with the first authorization or state asked
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull

    from salon.tools.mcp_auth import Sealer, TokenKeeper

__all__ = ["FLOW_SECONDS", "HANDOFF", "MAX_FLOWS", "OAuthDesk", "PersonConsent", "client_info"]

logger = logging.getLogger(__name__)

MAX_FLOWS = 16  # authorizations waiting for their redirect at once
FLOW_SECONDS = 300.0  # how long a link stays good
LINK_SECONDS = 30.0  # for discovery and registration until the link, and the token exchange
HANDOFF = ""  # the bot and server columns of the store rows of a flow between processes
_UNKNOWN = "This authorization is unknown or over: start it again."


def client_info(
    settings: McpOAuthConfig, secrets: Secrets, redirect: str | None = None
) -> OAuthClientInformationFull | None:
    """A configured client id (and its secret) as the SDK's client information (no
    registration); ``redirect``: where the authorization answers (the CLI's listener)."""
    if settings.client_id is None:
        return None
    from mcp.shared.auth import OAuthClientInformationFull

    redirect = redirect or f"http://127.0.0.1:{settings.callback_port}/callback"
    secret = secrets.get(settings.client_secret_env) if settings.client_secret_env else None
    return OAuthClientInformationFull(
        client_id=settings.client_id,
        redirect_uris=[redirect],  # type: ignore[list-item]
        client_secret=secret,
        token_endpoint_auth_method="client_secret_basic" if secret else "none",
        scope=settings.scope,
    )


@dataclass
class _Flow:
    bot: str
    server: str
    started: float
    code: asyncio.Future[AuthorizationCodeResult]
    task: asyncio.Task[None] | None = None
    link: str = ""
    digest: str = ""  # of the state: a person's flow, handed over through the store
    failure: str = ""  # why a person's flow ended without tokens


def _digest(state: str) -> str:
    """What the store knows a flow by: the state itself stays out of it."""
    return hashlib.sha256(state.encode()).hexdigest()


@dataclass
class OAuthDesk:
    """The authorizations waiting for their redirect: the operator's by the ``state`` of
    their link (random, single-use), people's by bot, server and person. ``poll``: seconds
    between looks at the store for a redirect (or its outcome) handed over."""

    tokens: TokenKeeper
    environ: Mapping[str, str]
    pending: dict[str, _Flow] = field(default_factory=dict)
    people: dict[tuple[str, str, str], _Flow] = field(default_factory=dict)
    poll: float = 1.0
    _outcomes: deque[tuple[float, str]] = field(default_factory=lambda: deque(maxlen=4 * MAX_FLOWS))

    async def state(self, bot: str, server: str) -> str:
        """One line: authorized until when, or not."""
        from salon.tools.mcp_auth import SealedStorage, Sealer

        secret = self.environ.get(KEY_ENV)
        if not secret:
            return f"unknown: {KEY_ENV} is not set here"
        storage = SealedStorage(self.tokens, bot, server, Sealer(secret))
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

    async def start(
        self,
        bot: str,
        server: str,
        settings: McpServerConfig,
        redirect: str,
        *,
        person: str | None = None,
    ) -> tuple[str | None, str]:
        """Start the flow in the background: (the link, ""), or (None, why not).
        ``person``: their own tokens (per_user), the redirect handed over by the store; a
        flow of theirs still waiting gives its link again."""
        from salon.tools.mcp_auth import SealedStorage, Sealer, run_authorization, tokens_kind

        self._drop_stale()
        await self._sweep()
        secret = self.environ.get(KEY_ENV)
        if not secret:
            return (
                None,
                f"set {KEY_ENV} where the web server runs (the key the tokens are kept under)",
            )
        waiting = self.people.get((bot, server, person)) if person is not None else None
        if waiting is not None and waiting.link:
            return waiting.link, ""
        if len(self.pending) + len(self.people) >= MAX_FLOWS:
            return None, "Too many authorizations wait: retry later."
        assert settings.oauth is not None
        client = client_info(settings.oauth, Secrets(dict(self.environ)), redirect)
        sealer = Sealer(secret)
        storage = SealedStorage(self.tokens, bot, server, sealer, client, person=person)
        loop = asyncio.get_running_loop()
        shown: asyncio.Future[str] = loop.create_future()
        flow = _Flow(bot, server, time.monotonic(), loop.create_future())

        async def show(link: str) -> None:
            state = parse_qs(urlsplit(link).query).get("state", [""])[0]
            flow.link = link
            if person is None:
                self.pending[state] = flow
            else:
                flow.digest = _digest(state)
                marker = {"bot": bot, "server": server, "started": time.time()}
                await self._put(sealer, f"flow@{flow.digest}", marker)
            if not shown.done():  # one link per flow
                shown.set_result(link)

        async def answer() -> AuthorizationCodeResult:
            waited = self._handed(flow, sealer) if person is not None else asyncio.shield(flow.code)
            return await asyncio.wait_for(waited, FLOW_SECONDS)

        async def authorize() -> None:
            # A new authorization replaces the old (a person's: only theirs).
            if person is None:
                await self.tokens.forget(bot, server)
            else:
                await self.tokens.forget(bot, server, tokens_kind(person))
                await self.tokens.forget(bot, server, f"client@{person}")
            await run_authorization(
                server,
                str(settings.url),
                storage,
                scope=settings.oauth.scope if settings.oauth else None,
                redirect_uri=redirect,
                show=show,
                answer=answer,
            )

        if person is None:
            flow.task = asyncio.create_task(authorize(), name=f"oauth {bot}/{server}")
        else:
            self.people[(bot, server, person)] = flow
            run = self._for_person(flow, sealer, authorize)
            flow.task = asyncio.create_task(run, name=f"oauth {bot}/{server} for a person")
        link, problem = await self._link_of(flow, shown)
        if link is None and person is not None:
            self.people.pop((bot, server, person), None)
        return link, problem

    async def _link_of(self, flow: _Flow, shown: asyncio.Future[str]) -> tuple[str | None, str]:
        """The flow's link once discovery and registration gave it, or why none came."""
        assert flow.task is not None
        waited: set[asyncio.Future[Any]] = {shown, flow.task}
        done, _ = await asyncio.wait(waited, timeout=LINK_SECONDS, return_when="FIRST_COMPLETED")
        if shown in done:
            return shown.result(), ""
        flow.task.cancel()
        server = flow.server
        if flow.task in done and (exc := flow.task.exception()) is not None:
            logger.debug("authorizing %s for %s failed", server, flow.bot, exc_info=exc)
            return None, f"{server} gave no authorization link: {describe(exc)}"
        if flow.failure:
            return None, f"{server} gave no authorization link: {flow.failure}"
        return None, f"{server} gave no authorization link within {LINK_SECONDS:g}s"

    async def _for_person(
        self, flow: _Flow, sealer: Sealer, authorize: Callable[[], Awaitable[None]]
    ) -> None:
        """A person's flow to its end, and its outcome put for the callback that waits for
        it (which takes it; one nobody took is swept by a later ``start``)."""
        try:
            await authorize()
        except Exception as exc:  # the person reads one line; the details go to the log
            logger.debug("connecting a person at %s failed", flow.server, exc_info=True)
            lacking = not_authorized(exc)  # the SDK may wrap it
            flow.failure = flow.failure or (str(lacking) if lacking else describe(exc))
        finally:
            for person in [p for p, f in self.people.items() if f is flow]:
                del self.people[person]
            if flow.digest:  # a marker never taken, a code never read (a stop)
                with contextlib.suppress(StoreError):
                    await self.tokens.forget(HANDOFF, HANDOFF, f"flow@{flow.digest}")
                    await self.tokens.forget(HANDOFF, HANDOFF, f"code@{flow.digest}")
        if not flow.digest:
            return
        said = (
            f"{flow.server} was not connected: {flow.failure}"
            if flow.failure
            else f"Your {flow.server} account is connected: ask again in the chat."
        )
        await self._put(sealer, f"done@{flow.digest}", {"said": said, "ok": not flow.failure})
        self._outcomes.append((time.monotonic(), flow.digest))

    async def _sweep(self) -> None:
        """Outcomes no callback took within its wait are dropped from the store."""
        while self._outcomes and time.monotonic() - self._outcomes[0][0] > 2 * LINK_SECONDS:
            _, digest = self._outcomes.popleft()
            await self.tokens.forget(HANDOFF, HANDOFF, f"done@{digest}")

    async def _handed(self, flow: _Flow, sealer: Sealer) -> AuthorizationCodeResult:
        """The redirect's code as the web server's callback put it in the store."""
        from mcp.shared.auth import AuthorizationCodeResult

        kind = f"code@{flow.digest}"
        while True:
            sealed = await self.tokens.get(HANDOFF, HANDOFF, kind)
            if sealed is not None:
                await self.tokens.forget(HANDOFF, HANDOFF, kind)
                got = json.loads(sealer.open(sealed))
                if not got.get("code"):
                    # Not NotAuthorized, which the provider turns into a request without
                    # a token (the SDK would start another authorization on its 401).
                    flow.failure = str(got.get("error") or "no code came back")
                    raise ToolError(flow.failure)
                return AuthorizationCodeResult(
                    code=got["code"], state=got.get("state"), iss=got.get("iss")
                )
            await asyncio.sleep(self.poll)

    async def _put(self, sealer: Sealer, kind: str, value: Mapping[str, Any]) -> None:
        await self.tokens.put(HANDOFF, HANDOFF, kind, sealer.seal(json.dumps(value).encode()))

    async def finish(self, query: Mapping[str, str]) -> tuple[bool, str]:
        """The redirect's query to the flow of its ``state``: (authorized, one line)."""
        from mcp.shared.auth import AuthorizationCodeResult

        self._drop_stale()
        flow = self.pending.pop(query.get("state", ""), None)
        if flow is None:
            return await self._hand_over(query)
        if flow.task is None:
            return False, _UNKNOWN
        code = query.get("code", "")
        if not code:
            flow.task.cancel()
            why = query.get("error", "no code came back")
            return False, f"{flow.server} was not authorized: {why}"
        result = AuthorizationCodeResult(code=code, state=query.get("state"), iss=query.get("iss"))
        flow.code.set_result(result)
        try:
            await asyncio.wait_for(asyncio.shield(flow.task), LINK_SECONDS)
        except TimeoutError:
            flow.task.cancel()
            return False, f"{flow.server} did not answer in time: start again."
        except Exception as exc:  # one line for the operator; the details in the log
            logger.debug("authorizing %s for %s failed", flow.server, flow.bot, exc_info=True)
            return False, f"{flow.server} was not authorized: {describe(exc)}"
        return True, f"{flow.bot} is authorized at {flow.server}; the tokens are kept (sealed)."

    async def _hand_over(self, query: Mapping[str, str]) -> tuple[bool, str]:
        """A person's flow, waiting in a bot's process: its marker taken (once), the code
        put beside it, and the outcome that process puts read back."""
        from salon.tools.mcp_auth import Sealer

        state, secret = query.get("state", ""), self.environ.get(KEY_ENV)
        if not state:
            return False, _UNKNOWN
        if not secret:
            return False, f"set {KEY_ENV} where the web server runs (the bots' value)"
        sealer, digest = Sealer(secret), _digest(state)
        sealed = await self.tokens.get(HANDOFF, HANDOFF, f"flow@{digest}")
        if sealed is None or not await self.tokens.forget(HANDOFF, HANDOFF, f"flow@{digest}"):
            return False, _UNKNOWN  # never started, or another request took it first
        try:
            marker = json.loads(sealer.open(sealed))
        except ToolError:
            return False, _UNKNOWN
        if time.time() - float(marker["started"]) > FLOW_SECONDS:
            return False, _UNKNOWN
        server, code = str(marker["server"]), query.get("code", "")
        error = query.get("error", "") or "no code came back"
        handed = {"code": code, "state": state, "iss": query.get("iss"), "error": error}
        await self._put(sealer, f"code@{digest}", handed)  # a refusal too: the flow ends
        deadline = time.monotonic() + LINK_SECONDS
        while time.monotonic() < deadline:
            outcome = await self.tokens.get(HANDOFF, HANDOFF, f"done@{digest}")
            if outcome is not None:
                await self.tokens.forget(HANDOFF, HANDOFF, f"done@{digest}")
                told = json.loads(sealer.open(outcome))
                return bool(told["ok"]), str(told["said"])
            await asyncio.sleep(self.poll)
        return False, f"{server} did not finish in time: ask again in the chat for a new link."

    def close(self) -> None:
        """Every flow still waiting ends (the hub or the web server stops)."""
        for flow in [*self.pending.values(), *self.people.values()]:
            if flow.task is not None and not flow.task.done():
                flow.task.cancel()
        self.pending.clear()
        self.people.clear()

    def _drop_stale(self) -> None:
        now = time.monotonic()
        for state, flow in list(self.pending.items()):
            if now - flow.started > FLOW_SECONDS or (flow.task and flow.task.done()):
                del self.pending[state]
                if flow.task is not None and not flow.task.done():
                    flow.task.cancel()
        for key, flow in list(self.people.items()):
            if now - flow.started > FLOW_SECONDS + LINK_SECONDS:
                del self.people[key]
                if flow.task is not None and not flow.task.done():
                    flow.task.cancel()


@dataclass(frozen=True)
class PersonConsent:
    """A per_user server's ``ConsentDesk`` in the bot's process: a person's flow on the
    bot's desk, redirected to ``oauth.callback_url``."""

    desk: OAuthDesk
    bot: str
    server: str
    settings: McpServerConfig

    async def start_for(self, person: str) -> tuple[str | None, str]:
        oauth = self.settings.oauth
        assert oauth is not None
        assert oauth.callback_url is not None
        return await self.desk.start(
            self.bot, self.server, self.settings, oauth.callback_url, person=person
        )

    def close(self) -> None:
        with contextlib.suppress(RuntimeError):  # no loop left: nothing runs
            self.desk.close()
