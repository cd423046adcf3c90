"""An OpenAI-type server's streaming endpoints, spoken over aiohttp (which the Discord
adapter loads anyway): post the JSON body the provider built, read the server-sent events.

This is all the openai SDK did for Salon once the body was Salon's own (#17), and its import
(about half a second and 18 MiB of generated types) and its HTTP stack (httpx2, httpcore2,
anyio, h11: a fifth of an activation's CPU) went with every bot. What it did is kept:
``Authorization: Bearer`` (basic auth when the URL carries user info), the configured and
per-request headers, proxies from the environment, the connect timeout and the read
backstop, ``[DONE]`` ending the stream, an ``error`` object inside the stream raised as an
error, and every failure leaving as one ProviderError line naming the redacted URL.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import msgspec
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

from salon.errors import ProviderError
from salon.llm._errors import MALFORMED_STREAM_ERRORS, redact_url, status_error
from salon.llm.base import StreamEvent
from salon.model import clean_text

__all__ = ["Chunk", "EventStreams", "endpoint"]


class Chunk(dict[str, Any]):
    """A JSON object of the stream whose fields also read as attributes, None when absent,
    as the SDK's models read (the decoders were written for those)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)


class Decoder(Protocol):
    def decode(self, chunk: Any) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


def endpoint(base_url: str, path: str) -> str:
    """``path`` under ``base_url``, whose query (e.g. Azure's ``api-version``) stays."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


def _env_proxy(url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The proxy the environment names for ``url`` (``HTTP(S)_PROXY``, ``NO_PROXY``; its
    credentials from the URL or ``~/.netrc``), as aiohttp's ``trust_env`` reads it, but
    once per provider: aiohttp read it, and ``~/.netrc``, in a thread on every request.
    (Its per-request ``~/.netrc`` lookup for the server itself only ever clashed with the
    ``Authorization`` header sent here: aiohttp refuses both.)"""
    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:  # none, or NO_PROXY names the host
        return None, None


class EventStreams:
    """One provider's HTTP session (made at the first request, inside the event loop)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        headers: dict[str, str],
        connect_timeout: float,
        read_timeout: float,
    ) -> None:
        self.base_url = base_url
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if not urlsplit(base_url).username:  # else aiohttp sends the URL's user info
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers.update(headers)
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout, sock_read=read_timeout
        )
        # The pool outlives each request's session: a session left unclosed is an error
        # at collection, a connector only while it holds connections (aclose closes it).
        self._pool: aiohttp.TCPConnector | None = None
        self._proxy: tuple[URL | None, aiohttp.BasicAuth | None] = (None, None)

    async def stream(
        self,
        provider: str,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        decoder: Decoder,
    ) -> AsyncIterator[StreamEvent]:
        """Post ``body`` to ``path`` and decode its events; every failure a ProviderError."""
        url = endpoint(self.base_url, path)
        if self._pool is None:
            self._pool = aiohttp.TCPConnector()
            self._proxy = await asyncio.to_thread(_env_proxy, url)
        data = _encoded(body)
        async with aiohttp.ClientSession(
            connector=self._pool,
            connector_owner=False,
            timeout=self._timeout,
            proxy=self._proxy[0],
            proxy_auth=self._proxy[1],
        ) as session:
            reading = self._read(
                session, provider=provider, url=url, data=data, headers=headers, decoder=decoder
            )
            async for event in reading:
                yield event

    async def _read(
        self,
        session: aiohttp.ClientSession,
        *,
        provider: str,
        url: str,
        data: bytes,
        headers: dict[str, str],
        decoder: Decoder,
    ) -> AsyncIterator[StreamEvent]:
        try:
            response = await session.post(url, data=data, headers={**self._headers, **headers})
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _transport_error(exc, provider, url, answering=False) from exc
        # A body read to the connection's close ends at a reset too: the connection says.
        connection = response.connection.protocol if response.connection else None
        try:
            if response.status >= 300:
                raise await _status_error(response, provider)
            async for chunk in _chunks(response.content, provider):
                for event in decoder.decode(chunk):
                    yield event
            ended = connection.exception() if connection is not None else None
            if isinstance(ended, aiohttp.ClientOSError):
                raise ended
        except (TimeoutError, aiohttp.ClientError) as exc:
            raise _transport_error(exc, provider, url, answering=True) from exc
        except MALFORMED_STREAM_ERRORS as exc:
            raise ProviderError(
                f"{provider}: malformed response stream: {exc}", provider=provider, retryable=False
            ) from exc
        finally:
            response.close()  # also when the caller stops early or a deadline cancels
        for event in decoder.finish():
            yield event

    async def aclose(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None


_ENCODER = msgspec.json.Encoder()


def _encoded(body: dict[str, Any]) -> bytes:
    """``body`` as UTF-8 JSON: msgspec's encoder is several times faster than json's on a
    long chat; a text it refuses (a lone surrogate) goes through json, escaped."""
    try:
        return _ENCODER.encode(body)
    except (TypeError, ValueError, msgspec.EncodeError):  # UnicodeEncodeError included
        return json.dumps(body).encode()


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[str]:
    """The stream's lines, however long (aiohttp's own line reader has a limit)."""
    pending = b""
    async for piece in content.iter_any():
        pending += piece
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8")


async def _chunks(content: aiohttp.StreamReader, provider: str) -> AsyncIterator[Chunk]:
    """The JSON objects of a server-sent event stream, up to ``[DONE]``; an ``error`` object
    inside an otherwise good stream (e.g. overloaded mid-answer) is raised."""
    data: list[str] = []
    async for line in _lines(content):
        if line:
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            continue  # event:, id:, retry: and comments say nothing here
        if not data:
            continue
        text, data = "\n".join(data), []
        if text.startswith("[DONE]"):
            return
        chunk = json.loads(text, object_hook=Chunk)
        if isinstance(chunk, dict) and chunk.get("error"):
            error = chunk["error"]
            message = error.get("message") if isinstance(error, dict) else error
            if not isinstance(message, str) or not message:
                message = "An error occurred during streaming"
            raise ProviderError(f"{provider}: {clean_text(message)}", provider=provider)
        yield chunk


async def _status_error(response: aiohttp.ClientResponse, provider: str) -> ProviderError:
    text = (await response.read()).decode("utf-8", "replace")
    message = text or f"Error code: {response.status}"
    try:
        body = json.loads(text)
    except ValueError:
        body = None
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            message = error["message"]
        elif isinstance(error, str):
            message = error
    retry_after: float | None
    try:
        retry_after = float(response.headers.get("retry-after", ""))
    except ValueError:
        retry_after = None
    return status_error(provider, response.status, clean_text(message), retry_after=retry_after)


def _transport_error(
    exc: BaseException, provider: str, url: str, *, answering: bool
) -> ProviderError:
    """A transport failure as one line naming the URL; ``answering``: the stream was open."""
    target = redact_url(url)
    reason = str(exc).strip() or type(exc).__name__
    if answering:
        text = f"the connection to {target} broke during the answer: {reason}"
    elif isinstance(exc, aiohttp.ClientConnectorError | aiohttp.ConnectionTimeoutError):
        text = f"cannot reach the server at {target}: {reason}"
    elif isinstance(exc, TimeoutError):
        text = f"no answer from {target}: {reason}"
    else:
        text = f"the connection to {target} broke before the answer began: {reason}"
    return ProviderError(f"{provider}: {text}", provider=provider)
