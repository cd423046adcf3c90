"""What the Slack app needs, and ``salon check --live``'s look at the tokens: the bot
token's scopes (Slack lists them in every answer's ``X-OAuth-Scopes`` header) and whether
the app-level token may open Socket Mode (http mode has none)."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from salon.config.platforms import SlackConfig
from salon.config.secrets import Secrets
from salon.errors import PlatformError
from salon.platforms.slack.client import answer, build_web_client, call

__all__ = ["BOT_SCOPES", "check_tokens"]

BOT_SCOPES = (
    "channels:history",  # messages and their events, public channels
    "groups:history",  # private channels
    "im:history",  # direct messages
    "mpim:history",  # group direct messages
    "chat:write",
    "commands",  # /ask, /monitor, /unmonitor
    "pins:read",  # pinned .config
    "reactions:write",
    "users:read",  # names
    "channels:read",  # who is in a linked public channel (conversations.members)
    "groups:read",  # and in a linked private one
    "files:read",  # images in messages (url_private)
    "files:write",  # files a tool made, uploaded (files.getUploadURLExternal)
    "im:write",  # a direct message to one person (conversations.open): an OAuth link
)


async def check_tokens(config: SlackConfig, secrets: Secrets) -> tuple[str, bool]:
    """One line saying how the tokens fare, and whether all is well."""
    base = str(config.api_base_url) if config.api_base_url else None
    bot = build_web_client(secrets.get(config.bot_token_env) or "", base_url=base, wait_max=5)
    try:
        response = await answer(f"accept {config.bot_token_env}", bot.auth_test())
    except PlatformError as exc:
        return f"live: slack: {exc}", False
    headers = {k.lower(): v for k, v in response.headers.items()}
    granted = str(headers.get("x-oauth-scopes", "")).split(",")
    missing = sorted(set(BOT_SCOPES) - {s.strip() for s in granted})
    if missing:
        return (
            f"live: slack: the bot token lacks scopes {', '.join(missing)} "
            "(add them under OAuth & Permissions and reinstall the app)",
            False,
        )
    who = f"{response.get('user', '?')} in {response.get('team', '?')}"
    if config.mode == "http":  # no app token; the secret can only be tried by Slack
        where = f"{config.listen}{config.path}"
        return (
            f"live: slack: ok, {who}; Events API over HTTP on {where} "
            "(the signing secret is checked on Slack's first request)",
            True,
        )
    app_token = secrets.get(config.app_token_env) or ""
    app = AsyncWebClient(base_url=bot.base_url, timeout=30)
    try:
        what = f"open Socket Mode with {config.app_token_env}"
        await call(what, app.apps_connections_open(app_token=app_token))
    except PlatformError as exc:
        return f"live: slack: {exc}", False
    return f"live: slack: ok, {who}; Socket Mode open to this app token", True
