"""Signed, short-lived tokens: ``/activity`` links, the page's session cookie, and the
configurator's one-time links (``salon config-link``).

All are signed with keys derived from the activity key, so every process that knows the
key (the web server, a bot answering ``/activity``) can make or check them, and changing
the key ends every link and session at once. A token is ``<expiry>.<signature>``; nothing
in it is secret. A configurator link is ``<expiry>.<nonce>.<signature>``: the web server
remembers the nonces it has taken, so each link signs in once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time

__all__ = [
    "CONFIG_LINK_SECONDS",
    "LINK",
    "SESSION",
    "activity_link",
    "config_token",
    "make_token",
    "one_time_token",
    "token_valid",
]

LINK = b"salon activity link"
SESSION = b"salon activity session"
CONFIG_LINK = b"salon configurator link"
CONFIG_LINK_SECONDS = 300  # long enough to paste it into a browser, no longer
MAX_NONCE_CHARS = 64


def _derived(key: str, purpose: bytes) -> bytes:
    return hmac.new(key.encode("utf-8"), purpose, hashlib.sha256).digest()


def _signature(key: str, purpose: bytes, expires: int | str) -> str:
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


def config_token(key: str, *, now: float | None = None) -> str:
    """A configurator link's token: valid ``CONFIG_LINK_SECONDS``, once (the server
    remembers its nonce)."""
    expires = int((time.time() if now is None else now) + CONFIG_LINK_SECONDS)
    signed = f"{expires}.{secrets.token_urlsafe(16)}"
    return f"{signed}.{_signature(key, CONFIG_LINK, signed)}"


def one_time_token(key: str, token: str, *, now: float | None = None) -> tuple[str, int] | str:
    """(nonce, expiry) of a configurator link's token, or why it is refused."""
    expires_text, _, rest = token.partition(".")
    nonce, dot, signature = rest.partition(".")
    if (
        not dot
        or not expires_text.isascii()
        or not expires_text.isdigit()
        or len(expires_text) > 12
        or not 0 < len(nonce) <= MAX_NONCE_CHARS
        or not nonce.isascii()
    ):
        return "This link is not valid"
    expected = _signature(key, CONFIG_LINK, f"{expires_text}.{nonce}")
    if not hmac.compare_digest(expected.encode("ascii"), signature.encode("ascii", "replace")):
        return "This link is not valid"
    if int(expires_text) <= (time.time() if now is None else now):
        return "This link has expired"
    return nonce, int(expires_text)
