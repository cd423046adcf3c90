"""Slack's Events API over HTTP (``mode: http``): the server behind the app's Request URL.

Slack POSTs events (JSON), button presses (a form field ``payload``) and slash commands
(form fields) to one URL; the bolt app takes them all, as it takes Socket Mode's envelopes.
Bolt checks each request first: ``X-Slack-Signature`` must be the HMAC-SHA256 of
``v0:{X-Slack-Request-Timestamp}:{body}`` under the app's signing secret, and the timestamp
within five minutes of now; anything else is answered 401 and goes no further. It answers
the ``url_verification`` challenge Slack sends when the URL is saved, and acknowledges
within Slack's three seconds (an event before its listener runs). A retried event
(``X-Slack-Retry-Num``) carries its first ``event_id``, which ``events.py`` handles once.

The server listens where ``listen`` says, loopback by default: Slack reaches it through a
reverse proxy that holds the TLS certificate. It runs as a supervised task: a failure is
logged and the server started again on the same socket.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable

from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

from salon.sockets import bind, url_host
from salon.tasks import TaskState, supervise

__all__ = ["Receiver"]

logger = logging.getLogger(__name__)

_MAX_BODY = 1_000_000  # bytes of one request; Slack's are a few kilobytes
_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 3.0  # requests in flight get Slack's own three seconds to finish


class Receiver:
    def __init__(
        self,
        app: AsyncApp,
        *,
        address: tuple[str, int],
        path: str,
        serving: Callable[[], None],
    ) -> None:
        self.state = TaskState("Slack HTTP receiver")
        self.refused = 0  # requests whose signature or timestamp did not hold
        self._app = app
        self._address = address
        self._path = path
        self._serving = serving  # told each time the server (re)starts
        self._sock: socket.socket | None = None
        self._listening = asyncio.Event()
        self._halt = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def listening(self) -> bool:
        return self._listening.is_set()

    @property
    def url(self) -> str:
        """Where Salon itself answers (the proxy in front forwards Slack's requests here)."""
        if self._sock is None:
            return ""
        host, port = self._sock.getsockname()[:2]
        return f"http://{url_host(host)}:{port}{self._path}"

    async def start(self) -> None:
        """Bind (an ``OSError`` when the address cannot be had), then serve in a
        supervised task; returns once the server listens."""
        sock = bind(*self._address)
        self._sock = sock
        self._halt.clear()
        work = supervise(
            "Slack HTTP receiver", self._serve_once, state=self.state, finished=self._halt.is_set
        )
        task = self._task = asyncio.create_task(work, name="slack-http")
        listening = asyncio.create_task(self._listening.wait())
        await asyncio.wait({task, listening}, timeout=_START_TIMEOUT, return_when="FIRST_COMPLETED")
        listening.cancel()
        if not self._listening.is_set():
            await self.stop()
            raise OSError("the Slack HTTP receiver did not start")

    async def stop(self) -> None:
        self._halt.set()
        if self._task is not None:
            try:
                await asyncio.wait_for(self._task, _STOP_TIMEOUT + 2)
            except TimeoutError:
                logger.warning("Slack: the HTTP receiver did not stop in time")
            self._task = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def _serve_once(self) -> None:
        assert self._sock is not None
        app = web.Application(client_max_size=_MAX_BODY)
        app.router.add_post(self._path, self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=_STOP_TIMEOUT)
        await runner.setup()
        sock = self._sock.dup()  # the server closes what it served; the bound one stays
        try:
            await web.SockSite(runner, sock).start()
            self._serving()
            self._listening.set()
            logger.info("Slack: Request URL served at %s", self.url)
            await self._halt.wait()
        finally:
            self._listening.clear()
            await runner.cleanup()
            sock.close()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        stamp = request.headers.get("X-Slack-Request-Timestamp")
        if stamp is not None and not stamp.isdigit():  # bolt would take it for a number
            self._refused()
            return web.json_response({"error": "invalid request"}, status=401)
        response = await self._app.async_dispatch(await to_bolt_request(request))
        if response.status == 401:  # bolt's answer to a bad signature or an old timestamp
            self._refused()
        return await to_aiohttp_response(response)

    def _refused(self) -> None:
        """Logged the 1st, 2nd, 4th, 8th… time: a wrong secret shows at once, a flood of
        forged requests does not fill the log."""
        self.refused += 1
        if self.refused & (self.refused - 1) == 0:
            logger.warning(
                "Slack: refused %d request(s) whose signature does not match the signing "
                "secret or whose timestamp is over 5 minutes off (is the secret right?)",
                self.refused,
            )
