"""The hub's side of an external MCP server (stdio or streamable HTTP, or an SDK server
in-process): connect, list tools, follow list changes, ping, reconnect with backoff.

Imported by the hub only when a bot has such a server, so a bot without one never loads
the MCP SDK (or jsonschema, which checks arguments against the schemas servers publish).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any, NamedTuple, cast

import jsonschema
import mcp_types
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError

from salon.errors import ToolError
from salon.model import ToolResult
from salon.tools.base import TRACE_PARENT, Progress, ToolSpec
from salon.tools.elicitation import Asking
from salon.tools.link import (
    CallContext,
    ServerGone,
    ServerSpec,
    describe,
    not_authorized,
    without_hidden,
)
from salon.tools.mcp_connect import (
    SENDING,
    Sending,
    open_http,
    open_stdio,
    session_gone,
    unauthorized,
    unreachable,
)
from salon.tools.results import to_result

__all__ = ["McpServerLink", "open_http", "open_stdio"]

logger = logging.getLogger(__name__)

_FRESH = 2.0
"""Seconds after the server last answered during which a call is sent without a ping
first: a server that answered that recently is taken to be there (a death inside that
window fails the call as "may or may not have run", unless its connection was refused)."""
_RESTARTING_CODES = frozenset({mcp_types.CONNECTION_CLOSED, mcp_types.REQUEST_TIMEOUT})


class _SessionGone(Exception):
    """The server answered 404 to the session's request: it never ran it."""


class _Unsent(ToolError):
    """The call's connection was refused: it never reached the server."""


class McpServerLink:
    """One MCP server's connection, owned by the task running ``run``."""

    def __init__(
        self, spec: ServerSpec, on_change: Callable[[], None], backoff: tuple[float, float]
    ):
        self.spec = spec
        self.client: Client | None = None
        self.tools: list[ToolSpec] = []
        self._lookups: frozenset[str] = frozenset()  # read-only tools: the hub asks again
        self.ready = asyncio.Event()
        self.first_attempt = asyncio.Event()
        self.last_error: str | None = None
        self.refused: str | None = None  # the last attempt's credentials were refused
        self.unreachable = False  # the last attempt could not connect to the server
        self.failures = 0
        self.connections = 0  # successful connections so far (a restart makes one more)
        self.checks = 0  # health checks the server answered
        self._in_flight = 0  # calls sent and not yet answered
        self._heard = 0.0  # time.monotonic() of the server's last answer
        self._draining = False  # a restart waits for the calls in flight to end
        self._counted = asyncio.Condition()
        self._restart = asyncio.Event()
        self._stale = asyncio.Event()
        self._on_change = on_change
        self._backoff = backoff
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._asking = Asking(spec.name)
        assert spec.connect is not None  # the hub links only servers it connects to
        self._connect = spec.connect

    async def run(self) -> None:
        try:
            await self._stay_connected()
        finally:  # a person's authorization still waiting goes with the hub
            if self.spec.consent is not None:
                self.spec.consent.close()

    async def _stay_connected(self) -> None:
        delay = self._backoff[0]
        while True:
            self._restart.clear()
            self._draining = False
            client: Client | None = None
            try:
                client = self._connect(self._on_message)
                if self.spec.elicitation:  # offered in the client's capabilities only then
                    client.elicitation_callback = self._asking.callback
                async with client:
                    await self._load_tools(client)
                    self.client, self.last_error, self.failures = client, None, 0
                    self.refused, self.unreachable = None, False
                    self.ready.set()
                    self.first_attempt.set()
                    async with self._counted:
                        self.connections += 1
                        self._counted.notify_all()
                    delay = self._backoff[0]
                    logger.info("MCP server %s: %d tools", self.spec.name, len(self.tools))
                    await self._serve(client)
            except Exception as exc:  # a server's failure must never take the hub down
                self.failures += 1
                lacking = not_authorized(exc)  # OAuth without tokens: no retry helps
                self.refused = unauthorized(client) or (str(lacking) if lacking else None)
                self.unreachable = unreachable(exc)
                self.last_error = self.refused or describe(exc)
                if self.failures == 1 or self.failures % 10 == 0:  # a dead server, not a flood
                    logger.warning(
                        "MCP server %s failed (%d in a row): %s",
                        self.spec.name,
                        self.failures,
                        self.last_error,
                    )
            finally:
                self.client = None
                self.ready.clear()
                self.first_attempt.set()
            async with self._counted:  # a call waiting for the connection learns of this
                self._counted.notify_all()
            await asyncio.sleep(delay)
            delay = min(max(delay * 2, 0.05), self._backoff[1])

    async def wait_connections(self, count: int) -> None:
        async with self._counted:
            await self._counted.wait_for(lambda: self.connections >= count)

    async def wait_checks(self, count: int) -> None:
        """Wait until the server has answered ``count`` health checks."""
        async with self._counted:
            await self._counted.wait_for(lambda: self.checks >= count)

    async def _serve(self, client: Client) -> None:
        helpers = [
            asyncio.create_task(self._follow_changes(client)),
            asyncio.create_task(self._reload_when_stale(client)),
            asyncio.create_task(self._watch(client)),
        ]
        try:
            await self._restart.wait()
            logger.warning("MCP server %s: restarting", self.spec.name)
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _watch(self, client: Client) -> None:
        """Ping the server while it is idle: one that died or hung is restarted now, before
        a call needs it, not when that call fails. A call in flight is never cut short:
        the server is only checked, and only restarted, while none is."""
        interval = self.spec.health_interval
        while True:
            await asyncio.sleep(interval)
            if self._in_flight:
                continue  # the call learns of a death itself, and a busy server may be slow
            found = await _probe(client, min(interval, 10.0))
            if found is None:
                self._heard = time.monotonic()
                async with self._counted:
                    self.checks += 1
                    self._counted.notify_all()
            elif not self._in_flight:
                self.last_error = f"stopped answering: {found.problem}"
                logger.warning("MCP server %s %s; restarting it", self.spec.name, self.last_error)
                self.restart(client)
                return

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale.set()

    async def _reload_when_stale(self, client: Client) -> None:
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                await self.reload(client)
            except (MCPError, OSError) as exc:
                logger.warning("MCP server %s: could not reload tools: %s", self.spec.name, exc)

    async def _follow_changes(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    await self.reload(client)
        except Exception as exc:  # older servers notify through the message handler instead
            logger.debug("MCP server %s: no change subscription (%s)", self.spec.name, exc)

    async def reload(self, client: Client | None = None) -> None:
        client = client or self.client
        if client is not None:
            await self._load_tools(client)
            self._on_change()

    async def _load_tools(self, client: Client) -> None:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever must not hang us
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = [_spec(self.spec, tool) for tool in tools]
        self._lookups = frozenset(t.remote_name for t in self.tools if t.read_only)
        self._on_change()

    def restart(self, client: Client | None = None) -> None:
        """Drop the connection; new calls wait for the owner task to bring up a new one.
        Calls in flight are never cut short: the old connection is closed once they end
        (each within its timeout; on a dead connection at once). Given the ``client``
        found at fault, a connection made since is left alone."""
        if client is not None and client is not self.client:
            return
        self.client = None
        self.ready.clear()
        if self._in_flight:
            self._draining = True
        else:
            self._restart.set()

    async def call(
        self, call_id: str, remote_name: str, arguments: dict[str, Any], context: CallContext
    ) -> ToolResult:
        with self._asking.during(context):
            if self.spec.connect_as is not None:
                raw = await self._call_as(remote_name, arguments, context)
            else:
                raw = await self._call(remote_name, arguments, context.progress)
        return await to_result(call_id, raw, outputs=context.outputs, owner=context.owner)

    def check(self, spec: ToolSpec, arguments: dict[str, Any]) -> str | None:
        return _invalid_arguments(spec, arguments, self._validator(spec))

    def _validator(self, spec: ToolSpec) -> jsonschema.protocols.Validator:
        validator = self._validators.get(spec.name)
        if validator is None or validator.schema is not spec.input_schema:
            cls = jsonschema.validators.validator_for(
                spec.input_schema, jsonschema.Draft202012Validator
            )
            validator = cls(spec.input_schema)
            self._validators[spec.name] = validator
        return validator

    async def _current(self, remote_name: str) -> Client:
        """The connection, once there is one: waiting up to ``start_timeout``, but not
        while the last attempt failed in a way the next would repeat (the credentials were
        refused, or the server could not be reached: a server that is down)."""

        def settled() -> bool:
            return self.ready.is_set() or self.refused is not None or self.unreachable

        if not settled():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.spec.start_timeout), self._counted:
                    await self._counted.wait_for(settled)
        client = self.client
        if client is None:
            reason = self.refused or self.last_error or "not started"
            raise ToolError(
                f"MCP server {self.spec.name} is unavailable: {reason}; {remote_name} was not run"
            )
        return client

    async def _reachable(self, client: Client, remote_name: str) -> Client:
        """``client`` if the server answers a ping, else a new connection: a server that
        died while idle (before the health check noticed) is restarted, and the call, which
        never reached it, goes to the new one. Only a server proven gone, or silent while
        nothing runs on it, is restarted: a busy one may just be slow to answer."""
        found = await _probe(client, min(self.spec.health_interval, 10.0))
        if found is None:
            self._heard = time.monotonic()
            return client
        if not found.gone and self._in_flight:
            return client
        self.last_error = f"stopped answering: {found.problem}"
        logger.warning("MCP server %s %s; restarting it", self.spec.name, self.last_error)
        self.restart(client)
        try:
            return await self._current(remote_name)
        except ToolError:
            reason = self.last_error or "not started"
            raise ToolError(
                f"MCP server {self.spec.name} had stopped ({found.problem}) and is not back "
                f"({reason}); {remote_name} was not run"
            ) from None

    async def _call(
        self, remote_name: str, arguments: dict[str, Any], progress: Progress | None
    ) -> mcp_types.CallToolResult:
        client = await self._current(remote_name)
        if session_gone(client):  # the session's event stream found it gone already
            client = await self._renewed(client, remote_name)
        # A lookup cut short is asked again anyway; a server heard from just now is there.
        recent = time.monotonic() - self._heard < _FRESH
        if remote_name not in self._lookups and not recent:
            client = await self._reachable(client, remote_name)
        try:
            return await self._send(client, remote_name, arguments, progress)
        except _Unsent as exc:  # it never reached the server: once more, if it is back
            logger.info("%s; sending it again once connected", exc)
            client = await self._current(remote_name)
        except _SessionGone:
            # The server forgot the session (it restarted) and refused the call unrun:
            # the call goes once more, on a new session.
            logger.info(
                "MCP server %s lost the session; sending %s again", self.spec.name, remote_name
            )
            client = await self._renewed(client, remote_name)
        try:
            return await self._send(client, remote_name, arguments, progress)
        except _SessionGone:
            raise ToolError(
                f"MCP server {self.spec.name} lost its session again; {remote_name} was not run"
            ) from None

    async def _call_as(
        self, remote_name: str, arguments: dict[str, Any], context: CallContext
    ) -> mcp_types.CallToolResult:
        """A per-person OAuth server: the call on a connection of its own, with the tokens
        of the person it runs for (never another's, never the bot's)."""
        assert self.spec.connect_as is not None
        name = self.spec.name
        if not context.person:
            raise ToolError(f"MCP server {name} runs each call as a person: none asked this one")
        client = self.spec.connect_as(context.person, self._on_message)
        if self.spec.elicitation:
            client.elicitation_callback = self._asking.callback
        try:
            async with contextlib.AsyncExitStack() as stack:
                async with asyncio.timeout(self.spec.start_timeout):
                    await stack.enter_async_context(client)
                return await self._send(client, remote_name, arguments, context.progress)
        except (ToolError, _SessionGone):
            raise
        except Exception as exc:  # could not connect as this person
            lacking = not_authorized(exc)
            refused = (str(lacking) if lacking else None) or unauthorized(client)
            logger.debug("MCP server %s as a person failed", name, exc_info=True)
            reason = refused or describe(exc)
            unconnected = lacking is not None or isinstance(
                getattr(getattr(client, "auth", None), "lacking", None), str
            )
            if unconnected and self.spec.consent is not None and context.consent is not None:
                raise ToolError(await self._consent(context, reason)) from None
            raise ToolError(f"MCP server {name} is unavailable: {reason}") from None

    async def _consent(self, context: CallContext, refused: str) -> str:
        """A person with no usable tokens: their authorization starts and its link goes to
        them in a direct message, where the platform has them; what the model is told."""
        assert self.spec.consent is not None
        assert context.consent is not None
        name, person = self.spec.name, context.person
        link, problem = await self.spec.consent.start_for(person)
        if link is None:
            logger.warning("MCP server %s gave no link to connect %s: %s", name, person, problem)
        instead = f"the operator connects it with salon tools auth {name} --person {person}"
        if await context.consent(name, link, instead):
            return (
                f"not authorized yet: MCP server {name} runs each call with the account of "
                "the person who asks, and they have not connected theirs. They were sent a "
                "link in a direct message to connect it; once they have, the call can be "
                "made again."
            )
        return f"MCP server {name} is unavailable: {refused}"

    async def _renewed(self, client: Client, remote_name: str) -> Client:
        """A new connection in place of ``client``, whose session the server forgot."""
        self.last_error = "the server lost the session (HTTP 404)"
        self.restart(client)
        return await self._current(remote_name)

    async def _send(
        self,
        client: Client,
        remote_name: str,
        arguments: dict[str, Any],
        progress: Progress | None,
    ) -> mcp_types.CallToolResult:
        timeout = self.spec.timeout
        parent = TRACE_PARENT.get()
        # An open map (extra keys allowed), which mypy cannot tell yet: hence the cast.
        meta = cast("mcp_types.RequestParamsMeta", {"traceparent": parent}) if parent else None
        sending = Sending()
        token = SENDING.set(sending)
        self._in_flight += 1
        try:
            async with asyncio.timeout(timeout + 5):
                result = await client.call_tool(
                    remote_name,
                    arguments,
                    read_timeout_seconds=timeout,
                    progress_callback=progress,
                    meta=meta,
                )
            self._heard = time.monotonic()
            return result
        except TimeoutError:
            self.restart(client)
            raise ToolError(
                f"{remote_name} timed out after {timeout:g}s; restarting server"
            ) from None
        except (MCPError, OSError, RuntimeError) as exc:
            raise self._failure(client, remote_name, exc, sending.unsent) from exc
        finally:
            SENDING.reset(token)
            self._in_flight -= 1
            if self._draining and not self._in_flight:
                self._restart.set()

    def _failure(
        self, client: Client, remote_name: str, exc: Exception, unsent: str | None
    ) -> Exception:
        """What a call that failed with ``exc`` raises; a broken connection is restarted.
        ``unsent``: why a request of the call could not connect (so it never ran)."""
        if isinstance(exc, MCPError):
            if session_gone(client):
                return _SessionGone()
            refused = unauthorized(client)
            if refused is not None:
                return ToolError(
                    f"{remote_name} was refused by MCP server {self.spec.name}: {refused}"
                )
            if exc.code not in _RESTARTING_CODES:
                return ToolError(f"{remote_name} failed: {exc.message}")
        self.restart(client)
        if unsent is not None:
            return _Unsent(
                f"{remote_name} was not run: MCP server {self.spec.name} could not be "
                f"reached ({unsent})"
            )
        problem = exc.message if isinstance(exc, MCPError) else describe(exc)
        return ServerGone(f"{remote_name} failed: {problem}; restarting server")


class _Unanswered(NamedTuple):
    problem: str
    gone: bool  # proven gone (the connection closed); else only silent


async def _probe(client: Client, within: float) -> _Unanswered | None:
    """Why the server did not answer a ping ``within`` seconds; None when it answered.

    Any answer proves the server alive, an error included: servers built with the MCP SDK
    2.3 answer ping with "Method not found" (the 2026-07-28 protocol dropped it). Only the
    client's own verdicts (connection closed, request timed out), a transport failure or
    silence mean it is gone or hung."""
    try:
        async with asyncio.timeout(within):
            await client.session.send_ping()  # the session's ping: no deprecation warning
    except MCPError as exc:
        if session_gone(client):  # a restarted server: it answers, but not this session
            return _Unanswered("the server lost the session (HTTP 404)", gone=True)
        if exc.code == mcp_types.REQUEST_TIMEOUT:
            return _Unanswered(exc.message, gone=False)
        if exc.code == mcp_types.CONNECTION_CLOSED:
            return _Unanswered(exc.message, gone=True)
        return None
    except TimeoutError:
        return _Unanswered(f"no answer to a ping within {within:g}s", gone=False)
    except Exception as exc:  # a transport failure: the server is gone all the same
        return _Unanswered(describe(exc), gone=True)
    return None


def _spec(server: ServerSpec, tool: mcp_types.Tool) -> ToolSpec:
    schema = without_hidden(tool.input_schema, server.hidden_arguments)
    notes = tool.annotations
    return ToolSpec(
        name=tool.name,
        server=server.name,
        remote_name=tool.name,
        description=tool.description or "",
        input_schema=schema,
        read_only=notes.read_only_hint if notes else None,
        destructive=notes.destructive_hint if notes else None,
    )


def _invalid_arguments(
    spec: ToolSpec, arguments: dict[str, Any], validator: jsonschema.protocols.Validator
) -> str | None:
    try:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except (jsonschema.SchemaError, jsonschema.exceptions.UnknownType):
        return None  # the server's schema is broken: let the server judge the arguments
    if not errors:
        return None
    lines = [f"{'.'.join(map(str, e.path)) or '(arguments)'}: {e.message}" for e in errors[:5]]
    return f"invalid arguments for {spec.name}: " + "; ".join(lines)
