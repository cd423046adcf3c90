"""Serving the web app with uvicorn inside Salon's own event loop.

uvicorn's ``Server`` would install its own SIGINT/SIGTERM handlers (taking them from
``salon run``); here it leaves signals alone, binds no socket itself (Salon binds it, so a
busy port is a clear error at start and tests can ask for port 0), logs no access lines
(``/activity`` links carry tokens in their query) and configures no logging.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Generator

import uvicorn
from starlette.applications import Starlette

from salon.tasks import TaskState, supervise

__all__ = ["WebServer", "serving"]

logger = logging.getLogger(__name__)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, listening: asyncio.Event) -> None:
        super().__init__(config)
        self.listening = listening

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield  # the caller owns the signals

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.listening.set()


class WebServer:
    """The app on one bound socket, supervised like every long-lived task: a failure is
    logged and the server started again on the same socket."""

    def __init__(self, app: Starlette, sock: socket.socket) -> None:
        self.app = app
        self.sock = sock
        self.state = TaskState("web")
        self._server: _Server | None = None
        self._stopping = False
        self.started = asyncio.Event()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def url(self) -> str:
        host = self.sock.getsockname()[0]
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}"

    async def _serve_once(self) -> None:
        config = uvicorn.Config(
            self.app,
            access_log=False,
            log_config=None,
            lifespan="off",
            server_header=False,
            proxy_headers=False,  # the peer stays the peer: the configurator's check needs it
            timeout_graceful_shutdown=3,
        )
        self._server = _Server(config, self.started)
        listening = self.sock.dup()  # uvicorn closes what it served; the bound socket stays
        serving = asyncio.create_task(self._server.serve(sockets=[listening]))
        try:
            await serving
        finally:
            self._server.should_exit = True
            if not serving.done():
                serving.cancel()
                await asyncio.gather(serving, return_exceptions=True)
                for server in getattr(self._server, "servers", []):
                    server.close()
            listening.close()

    async def run(self) -> None:
        """Serve until ``stop``; a crash restarts the server (logged, counted in state)."""
        await supervise(
            "web server",
            self._serve_once,
            state=self.state,
            backoff_initial=0.5,
            backoff_max=10.0,
            finished=lambda: self._stopping,
        )

    def stop(self) -> None:
        self._stopping = True
        if self._server is not None:
            self._server.should_exit = True

    def close(self) -> None:
        self.sock.close()


@contextlib.asynccontextmanager
async def serving(app: Starlette, sock: socket.socket) -> AsyncIterator[WebServer]:
    """Serve ``app`` on ``sock`` for the duration of the block, then stop and close it."""
    server = WebServer(app, sock)
    task = asyncio.create_task(server.run(), name="web")
    try:
        started = asyncio.create_task(server.started.wait())
        await asyncio.wait({task, started}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        yield server
    finally:
        server.stop()
        try:
            await asyncio.wait_for(task, 10)
        except TimeoutError:
            logger.warning("the web server did not stop in 10 s")
        server.close()
