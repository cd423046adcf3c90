"""discord.py's errors as ``PlatformError`` with a reason a person can act on.

``Discord refused to read the history of #general: missing permission Read Message
History`` tells an operator what to change; ``403 Forbidden (error code: 50013)`` does
not. Every call the adapter makes to Discord runs inside ``translated``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager

import aiohttp
import discord

from salon.errors import PlatformError

__all__ = ["NETWORK_ERRORS", "Once", "refusal", "retry_after", "translated", "where"]

NETWORK_ERRORS = (aiohttp.ClientError, OSError, TimeoutError)

MISSING_ACCESS = 50001  # the bot cannot see the channel (View Channel)
DIRECT_MESSAGES = 50003  # an action Discord does not allow in DMs
MISSING_PERMISSIONS = 50013
_TOLD_KEYS = 1024  # channels whose problems were logged once


class Once:
    """Keys already told about (a problem is logged once per channel); bounded."""

    def __init__(self) -> None:
        self._keys: OrderedDict[str, None] = OrderedDict()

    def first(self, key: str) -> bool:
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > _TOLD_KEYS:
            self._keys.popitem(last=False)
        return True


def where(channel: object) -> str:
    """``#general``, or ``direct messages``: how an operator finds the channel."""
    if isinstance(channel, discord.DMChannel | discord.GroupChannel):
        return "direct messages"
    name = getattr(channel, "name", None)
    return f"#{name}" if name else f"channel {getattr(channel, 'id', '?')}"


def refusal(action: str, exc: BaseException, *, needs: str = "") -> PlatformError:
    """The failure to ``action`` (``read the history of #general``) in one sentence;
    ``needs`` names the permission the action takes (``Read Message History``)."""
    if isinstance(exc, discord.Forbidden):
        return PlatformError(f"Discord refused to {action}: {_forbidden(exc, needs)}")
    if isinstance(exc, discord.NotFound):
        return PlatformError(f"Discord could not {action}: {_said(exc, 'not found')}")
    if isinstance(exc, discord.DiscordServerError):
        text = f"Discord could not {action}: server error {exc.status}"
        return PlatformError(text, transient=True)
    if isinstance(exc, discord.RateLimited):
        text = f"Discord could not {action}: rate limited for {exc.retry_after:.0f}s"
        return PlatformError(text, transient=True, retry_after=exc.retry_after)
    if isinstance(exc, discord.HTTPException) and exc.status == 429:
        wait = retry_after(exc)
        said = f"rate limited for {wait:.0f}s" if wait is not None else "rate limited"
        return PlatformError(
            f"Discord could not {action}: {said}", transient=True, retry_after=wait
        )
    if isinstance(exc, discord.HTTPException):
        said = _said(exc, "refused")
        return PlatformError(f"Discord refused to {action}: {said} (HTTP {exc.status})")
    if isinstance(exc, NETWORK_ERRORS):
        text = f"could not {action}: Discord is unreachable ({type(exc).__name__})"
        return PlatformError(text, transient=True)
    return PlatformError(f"could not {action}: {exc or type(exc).__name__}")


def retry_after(exc: BaseException) -> float | None:
    """The seconds a 429 that discord.py did not wait out asks for (its Retry-After
    header); None for any other error, or a 429 that names no wait."""
    if not isinstance(exc, discord.HTTPException) or exc.status != 429:
        return None
    header = getattr(exc.response, "headers", {}).get("Retry-After", "")
    try:
        wait = float(header)
    except ValueError:
        return None
    return wait if wait >= 0 else None


def _forbidden(exc: discord.Forbidden, needs: str) -> str:
    if exc.code == MISSING_PERMISSIONS and needs:
        return f"missing permission {needs}"
    if exc.code == MISSING_ACCESS:
        return "missing access (the bot needs View Channel there)"
    if exc.code == DIRECT_MESSAGES:
        return "not possible in direct messages"
    return _said(exc, "forbidden")


def _said(exc: discord.HTTPException, fallback: str) -> str:
    """Discord's own words (``Unknown Message``), lower-cased to fit in a sentence."""
    text = exc.text.strip() if isinstance(exc.text, str) else ""
    return text.lower() if text else fallback


@contextmanager
def translated(action: str, *, needs: str = "") -> Iterator[None]:
    """Run Discord calls; their failures leave as ``PlatformError`` (see ``refusal``)."""
    try:
        yield
    except (discord.DiscordException, *NETWORK_ERRORS) as exc:
        raise refusal(action, exc, needs=needs) from exc
