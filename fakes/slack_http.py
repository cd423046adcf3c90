"""The fake Slack's HTTP delivery (``slack_server.py``): the Events API, interactivity and
slash commands POSTed to the app's Request URL, as Slack's documentation says.

Every request is signed with the app's signing secret: ``X-Slack-Request-Timestamp`` and
``X-Slack-Signature: v0=HMAC-SHA256(secret, "v0:{timestamp}:{body}")``. A Request URL is
saved only once it answers a ``url_verification`` challenge with the challenge's value.
Events are JSON; a slash command is form fields; an interaction is a form field
``payload`` holding JSON. Slack waits three seconds for an HTTP 2xx: an event not answered
so (``http_timeout``), answered otherwise (``http_error``) or not reached
(``connection_failed``) is sent again, at once, after a minute and after five minutes, with
``X-Slack-Retry-Num`` and ``X-Slack-Retry-Reason``, unless a non-2xx answer carried
``X-Slack-No-Retry: 1``. A command or an interaction is never retried: the person sees an
error instead. The body of a command's answer is shown to the person who typed it.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp

from fakes.slack_web import SlackError

__all__ = ["RETRY_DELAYS", "SIGNING_SECRET", "Answer", "HttpDelivery", "sign"]

SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the app's, under Basic Information
RETRY_DELAYS = (0.0, 60.0, 300.0)  # Slack: at once, after one minute, after five


def sign(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class Answer:
    """What the app answered one request: ``status`` 0 when it did not in time."""

    status: int
    body: str
    reason: str = ""  # why Slack would retry: http_timeout, http_error, connection_failed
    no_retry: bool = False


class HttpDelivery:
    def __init__(
        self,
        *,
        ack_timeout: float,
        retry_delays: tuple[float, ...],
        acknowledged: Callable[[str, dict[str, Any] | None], Awaitable[None]],
    ) -> None:
        self.ack_timeout = ack_timeout
        self.retry_delays = retry_delays
        self.signing_secret = SIGNING_SECRET
        self.request_url: str | None = None  # set in the app's settings, once verified
        self.answers: list[tuple[str, Answer]] = []  # (envelope id, answer), retries too
        self.failed: list[str] = []  # commands and interactions not acknowledged: errors
        self._acknowledged = acknowledged
        self._session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def verify(self, url: str) -> None:
        """Save ``url`` as the Request URL, once it answers the challenge (Slack's app
        settings refuse a URL that does not)."""
        challenge = uuid.uuid4().hex
        body = {"token": "verification-token", "challenge": challenge, "type": "url_verification"}
        answer = await self.post(url, json.dumps(body).encode(), "application/json")
        if answer.status != 200 or _challenge_of(answer.body) != challenge:
            raise SlackError("url_verification_failed")
        self.request_url = url

    async def post(
        self,
        url: str,
        body: bytes,
        content_type: str,
        *,
        headers: dict[str, str] | None = None,
        secret: str | None = None,
        timestamp: int | None = None,
    ) -> Answer:
        """One signed POST (``secret`` and ``timestamp`` to forge one), waited for up to
        ``ack_timeout``."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        sent = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": sign(secret or self.signing_secret, stamp, body),
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            **(headers or {}),
        }
        limit = aiohttp.ClientTimeout(total=self.ack_timeout)
        try:
            async with self._session.post(url, data=body, headers=sent, timeout=limit) as got:
                text = await got.text()
                no_retry = got.headers.get("X-Slack-No-Retry") == "1"
                reason = "" if 200 <= got.status < 300 else "http_error"
                return Answer(got.status, text, reason, no_retry)
        except TimeoutError:
            return Answer(0, "", "http_timeout")
        except aiohttp.ClientError:
            return Answer(0, "", "connection_failed")

    async def deliver(self, envelope: dict[str, Any]) -> Answer:
        """One delivery of ``envelope`` (as the Socket Mode fake shapes it) to the Request
        URL; its ``retry_attempt`` and ``retry_reason``, when set, as the retry headers."""
        assert self.request_url is not None
        kind, payload = envelope["type"], envelope["payload"]
        headers: dict[str, str] = {}
        if envelope.get("retry_attempt"):
            headers["X-Slack-Retry-Num"] = str(envelope["retry_attempt"])
            headers["X-Slack-Retry-Reason"] = str(envelope.get("retry_reason", ""))
        if kind == "events_api":
            body, content_type = json.dumps(payload).encode(), "application/json"
        else:
            fields = payload if kind == "slash_commands" else {"payload": json.dumps(payload)}
            body, content_type = urlencode(fields).encode(), "application/x-www-form-urlencoded"
        answer = await self.post(self.request_url, body, content_type, headers=headers)
        self.answers.append((str(envelope["envelope_id"]), answer))
        if 200 <= answer.status < 300:
            await self._acknowledged(str(envelope["envelope_id"]), _shown(kind, answer.body))
        elif kind != "events_api":
            self.failed.append(str(envelope["envelope_id"]))
        return answer

    async def retry(
        self,
        envelope: dict[str, Any],
        first: Answer,
        counted: Callable[[dict[str, Any]], None],
    ) -> None:
        """An event not acknowledged: sent again on Slack's schedule until it is."""
        answer = first
        for attempt, delay in enumerate(self.retry_delays, 1):
            if not answer.reason or answer.no_retry:
                return
            await asyncio.sleep(delay)
            again = {**envelope, "retry_attempt": attempt, "retry_reason": answer.reason}
            counted(again)
            answer = await self.deliver(again)


def _challenge_of(body: str) -> str:
    """Slack takes the challenge as plain text, a form field or JSON."""
    text = body.strip()
    if text.startswith("{"):
        try:
            return str(json.loads(text).get("challenge", ""))
        except ValueError:
            return ""
    return text.removeprefix("challenge=")


def _shown(kind: str, body: str) -> dict[str, Any] | None:
    """A command's answer: JSON is a message payload, other text the message's text."""
    if kind == "events_api" or not body.strip():
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return {"text": body}
    return parsed if isinstance(parsed, dict) else {"text": body}
