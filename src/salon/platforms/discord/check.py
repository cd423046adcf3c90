"""``salon check --live`` for a bot on Discord: who the token is (``GET /users/@me``),
whether its application has the Message Content intent (the flags of ``GET
/oauth2/applications/@me``), and the link that invites it with its permissions."""

from __future__ import annotations

from typing import Any

import aiohttp

from salon.config import BotConfig, DiscordConfig, Secrets
from salon.errors import PlatformError
from salon.platforms.discord.permissions import (
    INTENT_REFUSED,
    has_content_intent,
    invite_url,
    permission_labels,
)

__all__ = ["live_check"]

_API = "https://discord.com/api/v10"
_TIMEOUT = aiohttp.ClientTimeout(total=30)


async def live_check(config: BotConfig, secrets: Secrets) -> tuple[list[str], bool]:
    """The lines to print, and whether all is well."""
    discord = config.platforms.discord
    if discord is None:
        return ["live: discord: not configured"], True
    try:
        me, app = await _read(discord, secrets.get(discord.token_env) or "")
    except PlatformError as exc:
        return [f"live: discord: {exc}"], False
    lines = [
        f"live: discord: the token is the bot {me.get('username')} (id {me.get('id')}), "
        f"application {app.get('name')} (id {app.get('id')})"
    ]
    content = has_content_intent(int(app.get("flags") or 0))
    if content:
        lines.append("live: discord: the Message Content intent is on")
    else:
        lines.append(f"live: discord: {INTENT_REFUSED} (the bot cannot connect without it)")
    asked = ", ".join(permission_labels())
    url = invite_url(int(app["id"]))
    lines.append(f"live: discord: invite it with {url} (it asks for {asked})")
    return lines, content


async def _read(config: DiscordConfig, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bot user and its application, as Discord describes them."""
    base = str(config.api_base_url or _API).rstrip("/")
    headers = {"Authorization": f"Bot {token}"}
    refused = (
        f"Discord refused the token in {config.token_env} "
        "(the Developer Portal's Bot page makes a new one: Reset Token)"
    )
    async with aiohttp.ClientSession(headers=headers, timeout=_TIMEOUT) as session:
        me = await _get(session, f"{base}/users/@me", refused)
        app = await _get(session, f"{base}/oauth2/applications/@me", refused)
    return me, app


async def _get(session: aiohttp.ClientSession, url: str, refused: str) -> dict[str, Any]:
    try:
        async with session.get(url) as response:
            if response.status == 401:
                raise PlatformError(refused)
            if response.status != 200:
                text = (await response.text())[:200]
                raise PlatformError(f"Discord answered HTTP {response.status}: {text}")
            answer = await response.json()
    except (aiohttp.ClientError, TimeoutError) as exc:
        reason = str(exc) or type(exc).__name__
        raise PlatformError(f"Discord cannot be reached: {reason}") from exc
    if not isinstance(answer, dict):
        raise PlatformError("Discord answered something other than an object")
    return answer
