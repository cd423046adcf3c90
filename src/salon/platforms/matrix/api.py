"""The homeserver's client-server API through mautrix's ``HTTPAPI``: raw JSON in and out,
every error a ``PlatformError``, rate limits (``M_LIMIT_EXCEEDED``) waited out for as long
as ``retry_after_ms`` asks (up to ``rate_limit_wait_max``), and a send's transaction id
chosen once, so a send tried again is one event (the homeserver answers a repeated
transaction id with the first event's id). What another try may get through (a longer
rate limit, a 5xx, no answer) is a transient ``PlatformError``, with the wait a rate limit
asked for."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
from typing import Any
from urllib.parse import quote

from aiohttp import ClientError, ClientResponse, ContentTypeError
from mautrix.api import HTTPAPI, Method
from mautrix.errors import (
    MatrixConnectionError,
    MatrixRequestError,
    MatrixResponseError,
    make_request_error,
)
from yarl import URL

from salon.errors import PlatformError
from salon.platforms.images import read_at_most

__all__ = ["Homeserver", "new_txn_id"]

logger = logging.getLogger(__name__)

JSON = dict[str, Any]
_V3 = "/_matrix/client/v3"
_V1 = "/_matrix/client/v1"
_DOWNLOAD_TIMEOUT = 30.0  # seconds for one file
_UPLOAD_TIMEOUT = 120.0  # seconds for one file


def new_txn_id() -> str:
    return f"salon-{secrets.token_hex(12)}"


def q(part: str) -> str:
    """A room, event or user id as one path segment."""
    return quote(part, safe="")


class _API(HTTPAPI):
    """mautrix's HTTP API, keeping what an error's body says of a rate limit (mautrix's
    standard errors drop the body, and with it ``retry_after_ms``)."""

    async def _send(
        self,
        method: Method,
        url: URL,
        content: Any,
        query_params: dict[str, str],
        headers: dict[str, str],
    ) -> tuple[Any, ClientResponse]:
        request = self.session.request(
            str(method), url, data=content, params=query_params, headers=headers
        )
        async with request as response:
            if 200 <= response.status < 300:
                return await response.json(), response
            text = await response.text()
            try:
                body = json.loads(text)
            except ValueError:
                body = {}
            body = body if isinstance(body, dict) else {}
            error = make_request_error(
                http_status=response.status,
                text=text,
                errcode=body.get("errcode"),
                message=body.get("error"),
            )
            error.retry_after_ms = body.get("retry_after_ms")  # type: ignore[attr-defined]
            raise error


class Homeserver:
    """One logged-in session (an access token) on a homeserver."""

    def __init__(
        self, base_url: str, token: str, *, rate_limit_wait_max: float, retries: int
    ) -> None:
        self.api = _API(base_url, token=token, default_retry_count=retries)
        self._wait_max = rate_limit_wait_max

    async def close(self) -> None:
        session = self.api.session
        if session is not None and not session.closed:
            await session.close()

    async def call(
        self,
        method: str,
        path: str,
        content: JSON | bytes | None = None,
        *,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        limit: float = 60.0,
        sensitive: bool = False,
    ) -> JSON:
        """One request, waiting out rate limits; ``path`` is under ``/_matrix``."""
        if self.api.session.closed:  # stopped: aiohttp would raise a RuntimeError
            raise PlatformError("not connected to the Matrix homeserver")
        waited = 0.0
        while True:
            try:
                async with asyncio.timeout(limit):
                    answer = await self.api.request(
                        Method(method),
                        path,
                        content,
                        headers=dict(headers or {}),
                        query_params=query or {},
                        sensitive=sensitive,  # mautrix then never logs the body
                    )
                return answer if isinstance(answer, dict) else {}
            except MatrixRequestError as exc:
                delay = _retry_after(exc)
                if delay is None or waited + delay > self._wait_max:
                    raise _refusal(method, path, exc, delay) from exc
                logger.warning("Matrix: rate limited, waiting %.1fs", delay)
                waited += delay
                await asyncio.sleep(delay)  # what the homeserver asked for, not a poll
            except (
                MatrixConnectionError,
                MatrixResponseError,
                ContentTypeError,
                TimeoutError,
            ) as exc:
                raise PlatformError(
                    f"the homeserver did not answer ({type(exc).__name__})", transient=True
                ) from exc

    async def send_event(self, room: str, kind: str, content: JSON, txn_id: str = "") -> str:
        """Send a message event; the same ``txn_id`` on every try of it."""
        txn = txn_id or new_txn_id()
        path = f"{_V3}/rooms/{q(room)}/send/{q(kind)}/{q(txn)}"
        answer = await self.call("PUT", path, content)
        return str(answer.get("event_id", ""))

    async def redact(self, room: str, event_id: str, reason: str = "") -> None:
        path = f"{_V3}/rooms/{q(room)}/redact/{q(event_id)}/{q(new_txn_id())}"
        await self.call("PUT", path, {"reason": reason} if reason else {})

    async def event(self, room: str, event_id: str) -> JSON:
        return await self.call("GET", f"{_V3}/rooms/{q(room)}/event/{q(event_id)}")

    async def state(self, room: str, kind: str, key: str = "") -> JSON | None:
        """A state event's content, or None where the room has none."""
        try:
            return await self.call("GET", f"{_V3}/rooms/{q(room)}/state/{q(kind)}/{q(key)}")
        except PlatformError as exc:
            if isinstance(exc.__cause__, MatrixRequestError) and exc.__cause__.http_status == 404:
                return None
            raise

    async def creators(self, room: str) -> frozenset[str]:
        """Who created the room: its create event's sender and ``additional_creators``
        (room version 12 ranks them above every power level)."""
        path = f"{_V3}/rooms/{q(room)}/state/m.room.create/"
        create = await self.call("GET", path, query={"format": "event"})
        more = (create.get("content") or {}).get("additional_creators")
        named = [str(create.get("sender", "")), *(more if isinstance(more, list) else [])]
        return frozenset(str(user) for user in named if user)

    async def account_data(self, me: str, kind: str) -> JSON | None:
        """The account's own data of ``kind`` (``m.direct``), or None where there is none."""
        try:
            return await self.call("GET", f"{_V3}/user/{q(me)}/account_data/{q(kind)}")
        except PlatformError as exc:
            if isinstance(exc.__cause__, MatrixRequestError) and exc.__cause__.http_status == 404:
                return None
            raise

    async def put_account_data(self, me: str, kind: str, content: JSON) -> None:
        await self.call("PUT", f"{_V3}/user/{q(me)}/account_data/{q(kind)}", content)

    async def messages(self, room: str, *, start: str | None, limit: int) -> JSON:
        """A page of the room's timeline, newest first, with who wrote it (lazy members)."""
        query = {
            "dir": "b",
            "limit": str(limit),
            "filter": json.dumps({"lazy_load_members": True}),
        }
        if start:
            query["from"] = start
        return await self.call("GET", f"{_V3}/rooms/{q(room)}/messages", query=query)

    async def thread(self, room: str, root: str, *, start: str | None, limit: int) -> JSON:
        """A page of a thread's events, newest first (``/relations``)."""
        query = {"dir": "b", "limit": str(limit)}
        if start:
            query["from"] = start
        path = f"{_V1}/rooms/{q(room)}/relations/{q(root)}/m.thread"
        return await self.call("GET", path, query=query)

    async def download(self, mxc: str, *, max_bytes: int) -> bytes | None:
        """A file of the media repository through authenticated media (``/v1/media``,
        the access token shown); None when it is not there, refused or too large."""
        server_name, _, media = mxc.removeprefix("mxc://").partition("/")
        if not server_name or not media or "/" in media:
            return None
        url = self.api.base_url.with_path(
            f"{_V1}/media/download/{q(server_name)}/{q(media)}", encoded=True
        )
        headers = {"Authorization": f"Bearer {self.api.token}"}
        try:
            async with asyncio.timeout(_DOWNLOAD_TIMEOUT):
                async with self.api.session.get(url, headers=headers) as response:
                    if response.status != 200 or (response.content_length or 0) > max_bytes:
                        return None
                    data = await read_at_most(response.content, max_bytes + 1)
        except (TimeoutError, ClientError) as exc:
            logger.warning("Matrix: could not download %s (%s)", mxc, type(exc).__name__)
            return None
        return data if len(data) <= max_bytes else None

    async def upload(self, data: bytes, content_type: str, filename: str) -> str:
        """``data`` put in the media repository (with the access token); its ``mxc://`` URI."""
        answer = await self.call(
            "POST",
            "/_matrix/media/v3/upload",
            data,
            query={"filename": filename},
            headers={"Content-Type": content_type},
            limit=_UPLOAD_TIMEOUT,
            sensitive=True,  # the file's bytes are not for the log
        )
        uri = answer.get("content_uri")
        if not isinstance(uri, str) or not uri.startswith("mxc://"):
            raise PlatformError("the homeserver gave no content URI for the upload")
        return uri

    async def upload_limit(self) -> int | None:
        """The largest upload the homeserver takes (``m.upload.size``): asked through
        authenticated media, then the older ``/media/v3/config``; None when it says not."""
        for path in (f"{_V1}/media/config", "/_matrix/media/v3/config"):
            try:
                size = (await self.call("GET", path)).get("m.upload.size")
            except PlatformError:
                continue
            return size if isinstance(size, int) and not isinstance(size, bool) else None
        return None

    async def typing(self, room: str, me: str, on: bool) -> None:
        body: JSON = {"typing": on, "timeout": 30000} if on else {"typing": False}
        await self.call("PUT", f"{_V3}/rooms/{q(room)}/typing/{q(me)}", body)

    async def sync(self, since: str | None, *, timeout_ms: int, filter_json: str) -> JSON:
        query = {"timeout": str(timeout_ms), "filter": filter_json}
        if since:
            query["since"] = since
        return await self.call("GET", f"{_V3}/sync", query=query, limit=timeout_ms / 1000 + 30)


def _retry_after(exc: MatrixRequestError) -> float | None:
    """Seconds a rate limit asks to wait (None: not a rate limit). The spec puts
    ``retry_after_ms`` in the body; a missing one is a short wait."""
    if getattr(exc, "errcode", "") != "M_LIMIT_EXCEEDED" and exc.http_status != 429:
        return None
    value = getattr(exc, "retry_after_ms", None)
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value) / 1000
    return 1.0


def _refusal(
    method: str, path: str, exc: MatrixRequestError, retry_after: float | None
) -> PlatformError:
    """A readable reason naming the operation (``send``, ``redact``, ``join``), without the
    homeserver's address or the token; a rate limit (``retry_after``) or a server error
    is transient."""
    parts = re.split("/_matrix/(?:client|media)/", path, maxsplit=1)[-1].split("/")[1:]
    what = parts[2] if len(parts) > 2 and parts[0] == "rooms" else (parts[0] if parts else "")
    code = getattr(exc, "errcode", "") or f"HTTP {exc.http_status}"
    message = getattr(exc, "message", "") or ""
    transient = retry_after is not None or exc.http_status >= 500
    return PlatformError(
        f"the homeserver refused {what or method}: {code} {message}".strip(),
        transient=transient,
        retry_after=retry_after,
    )
