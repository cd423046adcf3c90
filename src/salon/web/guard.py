"""Who may do what: the activity page's session, forms' CSRF tokens, loopback-only pages.

- The activity page wants a session cookie (``HttpOnly``, ``SameSite=Strict``), got by
  typing the activity key or by opening a signed ``/activity`` link; it names a session
  the store keeps until sign-out (``salon.web.sessions``).
- Every form carries a CSRF token that must equal the one in the browser's
  ``salon_csrf`` cookie (double submit), and a POST whose ``Origin`` names another host
  is refused.
- Every route answers only requests whose ``Host`` names this server (``HostGuard``): a
  page elsewhere whose name was made to resolve to this machine (DNS rebinding) sends its
  own name, so it can neither read ``/health`` nor post sign-ins.
- A POST that the browser says comes from elsewhere (``Origin``, ``Sec-Fetch-Site``) is
  refused before anything else looks at it: it never counts toward the sign-in lockout.
- Wrong keys pause sign-in for their client (``client_address``) and, past a ceiling far
  above that, for everyone (``salon.web.context.Lockout``).
- The configurator answers loopback clients only: the peer address, the ``Host`` header
  and the absence of any forwarding header (a proxy on the same machine would make every
  client look local) are all checked.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import secrets
from urllib.parse import parse_qs, urlsplit

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from salon.config import WebConfig
from salon.errors import StoreError
from salon.web.context import HEADERS, Web
from salon.web.links import session_of, session_token

__all__ = [
    "CSRF_COOKIE",
    "SESSION_COOKIE",
    "HostGuard",
    "client_address",
    "csrf_token",
    "end_session",
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
# What a browser's Sec-Fetch-Site says of a form of this page (``none``: typed or bookmarked).
OWN_FETCH_SITES = {"same-origin", "none"}
MAX_WARNED_HOSTS = 64

logger = logging.getLogger(__name__)


def _secure(web: Web, request: Request) -> bool:
    public = web.settings.public_url or ""
    return request.url.scheme == "https" or public.startswith("https://")


def _session(web: Web, request: Request) -> tuple[str, int] | None:
    """(session id, expiry) the request's cookie names, signed and unexpired, or None."""
    key = web.activity_key()
    token = request.cookies.get(SESSION_COOKIE, "")
    return session_of(key, token, now=web.now()) if key and token else None


async def signed_in(web: Web, request: Request) -> bool:
    """Whether the request's cookie names a live session (one nobody signed out)."""
    found = _session(web, request)
    if found is None:
        return False
    session, expires = found
    try:
        return await web.sessions.live(session, began=expires - SESSION_SECONDS)
    except StoreError as exc:  # no session can be checked: none is taken
        logger.warning("web server: cannot read the sessions from the store: %s", exc)
        return False


async def set_session(web: Web, request: Request, response: Response) -> None:
    """Begin a session and give the browser its cookie; StoreError when the store cannot
    keep it."""
    key = web.activity_key() or ""
    session = await web.sessions.begin(SESSION_SECONDS)
    response.set_cookie(
        SESSION_COOKIE,
        session_token(key, session, SESSION_SECONDS, now=web.now()),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="strict",
        secure=_secure(web, request),
        path="/",
    )


async def end_session(web: Web, request: Request, *, everywhere: bool) -> None:
    """End the request's session, or every session when ``everywhere`` and the request's
    is live (anyone can get a CSRF token: ending everyone's takes being signed in)."""
    found = _session(web, request)
    if found is None:
        return
    if everywhere and await signed_in(web, request):
        await web.sessions.end_all()
    else:
        await web.sessions.end(found[0])


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
    # Sent (to https and loopback addresses) even where Origin is not; a sibling
    # subdomain (same-site) is another site too.
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.lower() not in OWN_FETCH_SITES:
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


def client_address(request: Request) -> str:
    """Who sent the request, for the sign-in pause: the peer's address; from a proxy on
    this machine (a loopback peer sending ``X-Forwarded-For``), the address that proxy saw,
    the header's last entry (the earlier ones are the client's own word)."""
    peer = request.client.host if request.client else ""
    forwarded = ",".join(request.headers.getlist("x-forwarded-for"))
    last = forwarded.rsplit(",", 1)[-1].strip()
    if last and _loopback_address(peer) and _is_address(last):
        return last
    return peer


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


def _host_name(header: str) -> str | None:
    """The host name of a ``Host`` header, lower case, without port or final dot."""
    try:
        name = urlsplit(f"//{header}").hostname
    except ValueError:  # "[::1", a port that is no number…
        return None
    return name.rstrip(".") if name else None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def served_names(settings: WebConfig) -> frozenset[str]:
    """The host names requests may name: localhost, the bind address, ``public_url``'s host
    and ``allowed_hosts``. Any address is allowed too (see ``host_allowed``)."""
    names = {"localhost", settings.host, *settings.allowed_hosts}
    if settings.public_url:
        names.add(urlsplit(settings.public_url).hostname or "")
    return frozenset(n.strip().lower().rstrip(".") for n in names if n.strip())


def host_allowed(names: frozenset[str], header: str) -> bool:
    """Whether a ``Host`` header names this server. An address always does: a page can
    make a browser send one only when the page itself came from that address, whereas a
    rebound page sends the name it was loaded under."""
    name = _host_name(header)
    return name is not None and (name in names or _is_address(name))


class HostGuard:
    """ASGI middleware: a request whose ``Host`` names another server is refused (403)
    before any route sees it."""

    def __init__(self, app: ASGIApp, settings: WebConfig) -> None:
        self.app = app
        self.names = served_names(settings)
        self.warned: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope["headers"] if k == b"host"), b"")
        host = header.decode("latin-1")
        if host_allowed(self.names, host):
            await self.app(scope, receive, send)
            return
        self._warn(host)
        refusal = Response(
            "this server does not answer to that host name (see web.allowed_hosts)\n",
            status_code=403,
            media_type="text/plain",
            headers=HEADERS,
        )
        await refusal(scope, receive, send)

    def _warn(self, host: str) -> None:
        """Once per name (a few dozen at most): monitoring may have been set up under a
        name the config does not list yet."""
        if host in self.warned or len(self.warned) >= MAX_WARNED_HOSTS:
            return
        self.warned.add(host)
        logger.warning(
            "web server: refused a request for host %r (not localhost, an address, "
            "web.host, web.public_url's host or in web.allowed_hosts)",
            host[:200],
        )
