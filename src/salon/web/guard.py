"""Who may do what: the activity page's session, forms' CSRF tokens, loopback-only pages.

- The activity page wants a session cookie (``HttpOnly``, ``SameSite=Strict``), got by
  typing the activity key or by opening a signed ``/activity`` link.
- Every form carries a CSRF token that must equal the one in the browser's
  ``salon_csrf`` cookie (double submit), and a POST whose ``Origin`` names another host
  is refused.
- The configurator answers loopback clients only: the peer address, the ``Host`` header
  (against DNS rebinding) and the absence of any forwarding header (a proxy on the same
  machine would make every client look local) are all checked.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response

from salon.web.context import Web
from salon.web.links import SESSION, make_token, token_valid

__all__ = [
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "csrf_token",
    "form",
    "loopback_refusal",
    "post_refusal",
    "set_session",
    "signed_in",
]

SESSION_COOKIE = "salon_session"
CSRF_COOKIE = "salon_csrf"
SESSION_SECONDS = 12 * 3600
MAX_FORM_BYTES = 2_000_000  # a config file may be up to 1 000 000 bytes
FORWARDING = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "x-real-ip")
LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1"}


def _secure(web: Web, request: Request) -> bool:
    public = web.settings.public_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


def signed_in(web: Web, request: Request) -> bool:
    key = web.activity_key()
    token = request.cookies.get(SESSION_COOKIE, "")
    return bool(key and token) and token_valid(key or "", SESSION, token, now=web.now())


def set_session(web: Web, request: Request, response: Response) -> None:
    key = web.activity_key() or ""
    response.set_cookie(
        SESSION_COOKIE,
        make_token(key, SESSION, SESSION_SECONDS, now=web.now()),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=_secure(web, request),
        path="/",
    )


def csrf_token(request: Request) -> tuple[str, bool]:
    """The browser's CSRF token, and whether it is new (then set it with ``keep_csrf``)."""
    current = request.cookies.get(CSRF_COOKIE, "")
    if len(current) >= 32:
        return current, False
    return secrets.token_urlsafe(32), True


def keep_csrf(web: Web, request: Request, response: Response, token: str) -> None:
    response.set_cookie(
        CSRF_COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=_secure(web, request),
        path="/",
    )


async def form(request: Request) -> dict[str, str] | None:
    """A urlencoded form's fields (the first value of each), or None when it is too big."""
    size = 0
    chunks: list[bytes] = []
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_FORM_BYTES:
            return None
        chunks.append(chunk)
    fields = parse_qs(b"".join(chunks).decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def post_refusal(request: Request, fields: dict[str, str]) -> str | None:
    """Why a form POST is refused (another site's, or no valid CSRF token), or None."""
    origin = request.headers.get("origin")
    # "null" too: pages here send their origin, so an opaque one came from elsewhere.
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host", ""):
        return "this form was sent from another site"
    expected = request.cookies.get(CSRF_COOKIE, "")
    given = fields.get("csrf", "")
    if not expected or not hmac.compare_digest(expected.encode(), given.encode()):
        return "the form's security token is missing or stale: reload the page and try again"
    return None


def _loopback_address(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_refusal(request: Request) -> str | None:
    """Why a request may not see a loopback-only page, or None."""
    if any(name in request.headers for name in FORWARDING):
        return "the configurator is not served through a proxy (a forwarding header was sent)"
    client = request.client.host if request.client else ""
    if not _loopback_address(client):
        return "the configurator answers only on this machine (loopback clients)"
    host = urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
    if host not in LOOPBACK_NAMES and not _loopback_address(host):
        return "the configurator answers only to localhost or 127.0.0.1 as the host name"
    return None
