"""The loopback server every vendor fake is built on (aiohttp, 127.0.0.1 only).

A fake answers each route with a default built from its own state, in the vendor's
documented shape; a test scripts the next answers of a route (status, JSON or raw body,
headers, or a hold until an event) with ``script``. Every request is recorded. A request
whose client goes away (a timeout on Salon's side) is counted in ``aborted``.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

__all__ = ["Reply", "Seen", "VendorFake"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Reply:
    """One scripted answer. ``body`` wins over ``json``; ``hold`` delays the answer."""

    status: int = 200
    json: Any = None
    body: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    hold: asyncio.Event | None = None


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


class VendorFake:
    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.arrived = asyncio.Event()  # set at every request; tests clear it to wait again
        self.aborted = 0
        self.abort_seen = asyncio.Event()
        self.log: list[str] = []  # "arrive /path" and "abort /path", in order
        self._scripts: dict[str, deque[Reply]] = {}
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.app = web.Application()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def route(self, method: str, path: str, handler: Handler) -> None:
        """Add a route whose default answer is ``handler``; scripts go before it."""
        self.app.router.add_route(method, path, self._wrap(path, handler))

    def script(self, path: str, *replies: Reply) -> None:
        """The next answers of a route (its path pattern as registered)."""
        self._scripts.setdefault(path, deque()).extend(replies)

    def seen(self, path_prefix: str = "") -> list[Seen]:
        return [r for r in self.requests if r.path.startswith(path_prefix)]

    def _wrap(self, pattern: str, handler: Handler) -> Handler:
        async def handle(request: web.Request) -> web.StreamResponse:
            await self._record(request)
            try:
                queued = self._scripts.get(pattern)
                if queued:
                    return await _scripted(queued.popleft())
                return await handler(request)
            except asyncio.CancelledError:
                self.aborted += 1
                self.log.append(f"abort {request.path}")
                self.abort_seen.set()
                raise

        return handle

    async def _record(self, request: web.Request) -> None:
        raw = await request.read()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.requests.append(Seen(request.method, request.path, dict(request.query), headers, body))
        self.log.append(f"arrive {request.path}")
        self.arrived.set()

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> VendorFake:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def _scripted(reply: Reply) -> web.StreamResponse:
    if reply.hold is not None:
        await reply.hold.wait()
    if reply.body is not None:
        body = reply.body
    else:
        body = json.dumps(reply.json if reply.json is not None else {}).encode()
    return web.Response(
        status=reply.status, body=body, headers=reply.headers, content_type=reply.content_type
    )


def json_response(data: Any, status: int = 200) -> web.Response:
    """JSON with exactly ``Content-Type: application/json``, as the vendors send it."""
    return web.Response(
        status=status, body=json.dumps(data).encode(), content_type="application/json"
    )
