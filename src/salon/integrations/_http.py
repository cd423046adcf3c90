"""One vendor's HTTP client: JSON or bytes in, one clear sentence out on every failure.

Every failure a vendor can produce (a refused key, a missing thing, a rate limit, a server
error, a timeout, an unreachable host, an answer that is not JSON) becomes a
``VendorError`` whose text names the service and what to do; the tool returns it to the
model as an error result. Secrets stay in headers or parameters and never in that text.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote_plus

import httpx2

from salon.errors import ToolError

__all__ = ["USER_AGENT", "VendorError", "VendorHttp", "retry_after_seconds", "with_query"]

logger = logging.getLogger(__name__)

USER_AGENT = "salon/0.1 (+https://github.com/salon-bots)"
_MESSAGE_KEYS = ("error", "message", "Message", "reason", "detail", "title")
_MAX_MESSAGE = 200
_BACKSTOP = 1.0


class VendorError(ToolError):
    """A vendor call failed; the text is one sentence the model can read and act on.

    ``status`` is the vendor's HTTP status when it answered one, ``detail`` its own short
    explanation and ``retry_after`` its Retry-After in seconds, so a caller can act on an
    answer (wait out a 429, read a 404 as "gone", word a refusal its own way) instead of
    only showing it."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        detail: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a Retry-After header: a number of seconds or an HTTP date."""
    if not value:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return float(text)
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    wait = moment.timestamp() - (time.time() if now is None else now)
    return max(0.0, wait)


def vendor_message(body: bytes) -> str:
    """The vendor's own short explanation, when its error body carries one."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if isinstance(data, dict):
        for key in _MESSAGE_KEYS:
            value = data.get(key)
            if isinstance(value, list) and value and isinstance(value[0], dict):
                value = value[0].get("msg")  # FastAPI validation details
            if isinstance(value, dict):  # ComfyUI: {"error": {"message": ..., "details": ...}}
                value = " ".join(str(value.get(k) or "") for k in ("message", "details"))
            if isinstance(value, str) and value.strip():
                return " ".join(value.split())[:_MAX_MESSAGE]
    return ""


class VendorHttp:
    """httpx2 for one service; open it with ``async with`` (the server's lifespan does)."""

    def __init__(
        self,
        service: str,
        *,
        timeout: float,
        headers: Mapping[str, str] | None = None,
        key_hint: str | None = None,
    ) -> None:
        self.service = service
        self.key_hint = key_hint  # e.g. "the key in SERPAPI_API_KEY": said on a 401
        self._timeout = timeout
        self._headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        self._headers.update(headers or {})
        self._client: httpx2.AsyncClient | None = None
        self._users = 0  # open connections of the server; the client lives while any does

    async def __aenter__(self) -> VendorHttp:
        if self._client is None:
            # The queue's timeout is the one that counts (it covers a whole call); this one
            # is a backstop for a connection that hangs, a little later so it never races it.
            backstop = httpx2.Timeout(self._timeout + _BACKSTOP)
            self._client = httpx2.AsyncClient(
                headers=self._headers, timeout=backstop, follow_redirects=True
            )
        self._users += 1
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._users -= 1
        if self._users > 0:
            return
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    @property
    def client(self) -> httpx2.AsyncClient:
        if self._client is None:
            raise VendorError(f"{self.service} is not connected yet; try again in a moment")
        return self._client

    async def get_json(
        self,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        accept: tuple[int, ...] = (),
    ) -> Any:
        """GET and parse JSON; statuses in ``accept`` are answers, not failures."""
        response = await self._send("GET", url, params=params, headers=headers)
        return self._json(response, accept)

    async def post_json(
        self, url: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Any:
        response = await self._send("POST", url, json_body=body, headers=headers)
        return self._json(response, ())

    async def get_bytes(
        self,
        url: str,
        *,
        max_bytes: int,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> tuple[bytes, str]:
        """Download a file, refusing one larger than ``max_bytes``; (data, content type)."""
        wanted = {"Accept": "*/*", **(headers or {})}
        request = self.client.build_request("GET", with_query(url, params), headers=wanted)
        try:
            response = await self.client.send(request, stream=True)
            try:
                self._check(response, ())
                data = await _read_capped(response, max_bytes, self.service)
            finally:
                await response.aclose()
        except httpx2.HTTPError as exc:
            raise self._transport_error(exc) from exc
        kind = response.headers.get("content-type", "application/octet-stream")
        return data, kind.split(";")[0].strip()

    async def _send(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        json_body: Any = None,
    ) -> httpx2.Response:
        try:
            response = await self.client.request(
                method, with_query(url, params), headers=headers, json=json_body
            )
            await response.aread()
        except httpx2.HTTPError as exc:
            raise self._transport_error(exc) from exc
        return response

    def _json(self, response: httpx2.Response, accept: tuple[int, ...]) -> Any:
        self._check(response, accept)
        try:
            return json.loads(response.content)
        except ValueError:
            raise VendorError(
                f"{self.service} sent an answer that is not valid JSON; try again later"
            ) from None

    def _check(self, response: httpx2.Response, accept: tuple[int, ...]) -> None:
        status = response.status_code
        if 200 <= status < 300 or status in accept:
            return
        detail = vendor_message(response.content) if response.is_stream_consumed else ""
        logger.info("%s answered HTTP %d: %s", self.service, status, detail or "(no detail)")
        wait = retry_after_seconds(response.headers.get("retry-after"))
        sentence = self._status_sentence(status, detail, wait)
        raise VendorError(sentence, status=status, detail=detail, retry_after=wait)

    def _status_sentence(self, status: int, detail: str, wait: float | None) -> str:
        said = f": {detail}" if detail else ""
        if status in (401, 403):
            key = f"; check {self.key_hint}" if self.key_hint else ""
            return f"{self.service} refused the request (HTTP {status}){said}{key}"
        if status == 402:
            return f"{self.service} says the account is out of credits (HTTP 402){said}"
        if status == 404:
            return f"{self.service} found nothing there (HTTP 404){said}; check the name or id"
        if status in (429, 529):
            when = f"in {wait:.0f} seconds" if wait is not None else "later"
            return (
                f"{self.service} is rate-limiting requests (HTTP {status}){said}; try again {when}"
            )
        if status >= 500:
            return f"{self.service} had a server error (HTTP {status}); try again in a minute"
        return f"{self.service} rejected the request (HTTP {status}){said}"

    def _transport_error(self, exc: httpx2.HTTPError) -> VendorError:
        if isinstance(exc, httpx2.TimeoutException):
            return VendorError(
                f"{self.service} did not answer within {self._timeout:g} seconds; try again later"
            )
        if isinstance(exc, httpx2.ConnectError):
            return VendorError(f"could not reach {self.service}; check its base_url or the network")
        logger.info("%s: %s: %s", self.service, type(exc).__name__, exc)
        return VendorError(f"the connection to {self.service} failed; try again later")


def _query_value(value: Any) -> str:
    """A parameter as httpx2 writes it: booleans in lower case, None as nothing."""
    if value is True or value is False:
        return "true" if value else "false"
    return "" if value is None else str(value)


# Most names and many values repeat on every call (field lists, units): quoted once.
_quoted = functools.lru_cache(maxsize=512)(quote_plus)


def with_query(url: str, params: Mapping[str, Any] | None) -> str:
    """``url`` with ``params`` encoded as httpx2 encodes them (``urlencode``'s form). Done
    here because httpx2 parses the URL again to merge its ``params``: half the cost of
    building a request."""
    if not params:
        return url
    query = "&".join(
        f"{_quoted(str(key))}={_quoted(_query_value(item))}"
        for key, value in params.items()
        for item in (value if isinstance(value, list | tuple) else (value,))
    )
    return f"{url}{'&' if '?' in url else '?'}{query}"


async def _read_capped(response: httpx2.Response, max_bytes: int, service: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > max_bytes:
            raise VendorError(f"{service} sent a file larger than {max_bytes} bytes; not kept")
        chunks.append(chunk)
    return b"".join(chunks)
