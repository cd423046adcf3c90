"""Signed, short-lived tokens: ``/activity`` links and the page's session cookie.

Both are signed with keys derived from the activity key, so every process that knows the
key (the web server, a bot answering ``/activity``) can make or check them, and changing
the key ends every link and session at once. A token is ``<expiry>.<signature>``; nothing
in it is secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

__all__ = ["LINK", "SESSION", "activity_link", "make_token", "token_valid"]

LINK = b"salon activity link"
SESSION = b"salon activity session"


def _derived(key: str, purpose: bytes) -> bytes:
    return hmac.new(key.encode("utf-8"), purpose, hashlib.sha256).digest()


def _signature(key: str, purpose: bytes, expires: int) -> str:
    mac = hmac.new(_derived(key, purpose), str(expires).encode("ascii"), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode("ascii")


def make_token(key: str, purpose: bytes, seconds: float, *, now: float | None = None) -> str:
    expires = int((time.time() if now is None else now) + seconds)
    return f"{expires}.{_signature(key, purpose, expires)}"


def token_valid(key: str, purpose: bytes, token: str, *, now: float | None = None) -> bool:
    """Signed with ``key`` for ``purpose`` and not expired; compared in constant time."""
    expires_text, dot, signature = token.partition(".")
    if not dot or not expires_text.isdigit() or len(expires_text) > 12:
        return False
    expected = _signature(key, purpose, int(expires_text))
    if not hmac.compare_digest(expected.encode("ascii"), signature.encode("ascii", "replace")):
        return False
    return int(expires_text) > (time.time() if now is None else now)


def activity_link(public_url: str, key: str, minutes: float, *, now: float | None = None) -> str:
    """The activity page's address with a token valid for ``minutes``."""
    token = make_token(key, LINK, minutes * 60, now=now)
    return f"{public_url.rstrip('/')}/activity?token={token}"
