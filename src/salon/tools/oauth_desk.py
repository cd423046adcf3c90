"""Authorizations started from the configurator's OAuth page (``salon.web.oauth``), which
reaches them only through the ``OAuthDesk`` the web server's process hands it (the web
package never speaks MCP): ``salon tools auth``'s flow, with the redirect taken by the web
server's callback route instead of a one-shot listener, and the tokens sealed and stored
as the CLI stores them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from salon.config import McpServerConfig, Secrets
from salon.config.tools import TOKEN_KEY_ENV as KEY_ENV
from salon.errors import ToolError
from salon.tools.link import describe
from salon.tools.servers import client_info

if TYPE_CHECKING:  # the MCP SDK loads with the first authorization or state asked
    from mcp.shared.auth import AuthorizationCodeResult

    from salon.tools.mcp_auth import TokenKeeper

__all__ = ["FLOW_SECONDS", "MAX_FLOWS", "OAuthDesk"]

logger = logging.getLogger(__name__)

MAX_FLOWS = 16  # authorizations waiting for their redirect at once
FLOW_SECONDS = 300.0  # how long a link stays good
LINK_SECONDS = 30.0  # for discovery and registration until the link, and the token exchange


@dataclass
class _Flow:
    bot: str
    server: str
    started: float
    code: asyncio.Future[AuthorizationCodeResult]
    task: asyncio.Task[None] | None = None


@dataclass
class OAuthDesk:
    """The authorizations started from the page and waiting for their redirect, by the
    ``state`` of their link (random, single-use)."""

    tokens: TokenKeeper
    environ: Mapping[str, str]
    pending: dict[str, _Flow] = field(default_factory=dict)

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
        self, bot: str, server: str, settings: McpServerConfig, redirect: str
    ) -> tuple[str | None, str]:
        """Start the flow in the background: (the link, ""), or (None, why not)."""
        from salon.tools.mcp_auth import SealedStorage, Sealer, run_authorization

        self._drop_stale()
        secret = self.environ.get(KEY_ENV)
        if not secret:
            return (
                None,
                f"set {KEY_ENV} where the web server runs (the key the tokens are kept under)",
            )
        if len(self.pending) >= MAX_FLOWS:
            return None, "Too many authorizations wait: retry later."
        assert settings.oauth is not None
        client = client_info(settings.oauth, Secrets(dict(self.environ)), redirect)
        storage = SealedStorage(self.tokens, bot, server, Sealer(secret), client)
        loop = asyncio.get_running_loop()
        shown: asyncio.Future[str] = loop.create_future()
        flow = _Flow(bot, server, time.monotonic(), loop.create_future())

        async def show(link: str) -> None:
            self.pending[parse_qs(urlsplit(link).query).get("state", [""])[0]] = flow
            shown.set_result(link)

        async def answer() -> AuthorizationCodeResult:
            return await asyncio.wait_for(asyncio.shield(flow.code), FLOW_SECONDS)

        async def run() -> None:
            await self.tokens.forget(bot, server)  # a new authorization replaces the old
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
            return shown.result(), ""
        flow.task.cancel()
        if flow.task in done and (exc := flow.task.exception()) is not None:
            logger.debug("authorizing %s for %s failed", server, bot, exc_info=exc)
            return None, f"{server} gave no authorization link: {describe(exc)}"
        return None, f"{server} gave no authorization link within {LINK_SECONDS:g}s"

    async def finish(self, query: Mapping[str, str]) -> tuple[bool, str]:
        """The redirect's query to the flow of its ``state``: (authorized, one line)."""
        from mcp.shared.auth import AuthorizationCodeResult

        self._drop_stale()
        flow = self.pending.pop(query.get("state", ""), None)
        if flow is None or flow.task is None:
            return False, "This authorization is unknown or over: start it again."
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

    def _drop_stale(self) -> None:
        now = time.monotonic()
        for state, flow in list(self.pending.items()):
            if now - flow.started > FLOW_SECONDS or (flow.task and flow.task.done()):
                del self.pending[state]
                if flow.task is not None and not flow.task.done():
                    flow.task.cancel()
