"""Signed, short-lived tokens: ``/activity`` links, the page's session cookie, and the
configurator's one-time links (``salon config-link``).

All are signed with keys derived from the activity key, so every process that knows the
key (the web server, a bot answering ``/activity``) can make or check them, and changing
the key ends every link and session at once. Signing is itsdangerous's ``Signer``
(HMAC-SHA256, the key derived from the activity key by HMAC with the purpose as salt, so
a token made for one purpose opens nothing else). A token is ``<expiry>.<signature>``;
nothing in it is secret. A configurator link is ``<expiry>.<nonce>.<signature>``: the web
server remembers the nonces it has taken, so each link signs in once. A session cookie is
``<expiry>.<session id>.<signature>``: the session is live while the store lists its id
(``salon.web.sessions``), so signing out ends it.

The expiry is part of the signed value (rather than itsdangerous's signing time and a
``max_age`` at the check) because whoever makes a link chooses its lifetime (a bot's
``web.link_minutes``) and the server checking it need not know that choice.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time

from itsdangerous import BadSignature, Signer

__all__ = [
    "CONFIG_LINK_SECONDS",
    "LINK",
    "SESSION",
    "activity_link",
    "config_token",
    "make_token",
    "one_time_token",
    "session_of",
    "session_token",
    "token_valid",
]

LINK = b"salon activity link"
SESSION = b"salon activity session"
CONFIG_LINK = b"salon configurator link"
CONFIG_LINK_SECONDS = 300  # long enough to paste it into a browser, no longer
MAX_NONCE_CHARS = 64
# What a token of ours looks like: digits, a nonce, an unpadded URL-safe signature. Checked
# before the signature: base64 decoding skips characters outside its alphabet, so without
# it a token with bytes appended would still pass.
_TOKEN = re.compile(rf"[0-9]{{1,12}}(\.[A-Za-z0-9_-]{{1,{MAX_NONCE_CHARS}}})?\.[A-Za-z0-9_-]{{43}}")


def _signer(key: str, purpose: bytes) -> Signer:
    return Signer(key, salt=purpose, key_derivation="hmac", digest_method=hashlib.sha256)


def _unsigned(key: str, purpose: bytes, token: str) -> list[str] | None:
    """The signed fields of ``token`` (expiry first), or None if it is not one of ours."""
    if not _TOKEN.fullmatch(token):
        return None
    try:
        value = _signer(key, purpose).unsign(token)
    except BadSignature:
        return None
    return value.decode("ascii").split(".")


def _now(now: float | None) -> float:
    return time.time() if now is None else now


def make_token(key: str, purpose: bytes, seconds: float, *, now: float | None = None) -> str:
    expires = int(_now(now) + seconds)
    return _signer(key, purpose).sign(str(expires)).decode("ascii")


def token_valid(key: str, purpose: bytes, token: str, *, now: float | None = None) -> bool:
    """Signed with ``key`` for ``purpose`` and not expired."""
    fields = _unsigned(key, purpose, token)
    return fields is not None and len(fields) == 1 and int(fields[0]) > _now(now)


def session_token(key: str, session: str, seconds: float, *, now: float | None = None) -> str:
    """A session cookie's value: session ``session``, valid ``seconds``."""
    expires = int(_now(now) + seconds)
    return _signer(key, SESSION).sign(f"{expires}.{session}").decode("ascii")


def session_of(key: str, token: str, *, now: float | None = None) -> tuple[str, int] | None:
    """(session id, expiry) of a session cookie signed with ``key`` and not expired, or
    None (a cookie signed before sessions had ids names none)."""
    fields = _unsigned(key, SESSION, token)
    if fields is None or len(fields) != 2 or int(fields[0]) <= _now(now):
        return None
    return fields[1], int(fields[0])


def activity_link(public_url: str, key: str, minutes: float, *, now: float | None = None) -> str:
    """The activity page's address with a token valid for ``minutes``."""
    token = make_token(key, LINK, minutes * 60, now=now)
    return f"{public_url.rstrip('/')}/activity?token={token}"


def config_token(key: str, *, now: float | None = None) -> str:
    """A configurator link's token: valid ``CONFIG_LINK_SECONDS``, once (the server
    remembers its nonce)."""
    expires = int(_now(now) + CONFIG_LINK_SECONDS)
    value = f"{expires}.{secrets.token_urlsafe(16)}"
    return _signer(key, CONFIG_LINK).sign(value).decode("ascii")


def one_time_token(key: str, token: str, *, now: float | None = None) -> tuple[str, int] | str:
    """(nonce, expiry) of a configurator link's token, or why it is refused."""
    fields = _unsigned(key, CONFIG_LINK, token)
    if fields is None or len(fields) != 2:
        return "This link is not valid"
    expires_text, nonce = fields
    if int(expires_text) <= _now(now):
        return "This link has expired"
    return nonce, int(expires_text)
