"""What the bot asks of Discord: of its application, the Message Content intent (a
switch in the Developer Portal); of a server, the permissions the invite link asks for."""

from __future__ import annotations

import discord

__all__ = [
    "INTENT_REFUSED",
    "PERMISSIONS",
    "READ_HISTORY",
    "SEND",
    "has_content_intent",
    "invite_url",
    "permission_labels",
    "permission_names",
]

# What the operator reads when the application lacks the intent (Discord's close 4014).
INTENT_REFUSED = (
    "Discord refused the Message Content intent: enable it in the Developer Portal "
    "under Bot > Privileged Gateway Intents"
)
# The application's flags that grant it: GATEWAY_MESSAGE_CONTENT (a verified app's) and
# GATEWAY_MESSAGE_CONTENT_LIMITED (the portal's switch, for an app in under 100 servers).
_CONTENT_FLAGS = (1 << 18) | (1 << 19)

PERMISSIONS = discord.Permissions(
    send_messages=True,
    read_message_history=True,
    attach_files=True,
    embed_links=True,
    use_application_commands=True,
    manage_messages=True,
    manage_webhooks=True,
    add_reactions=True,
    view_channel=True,
)
# What an action needs, as Discord's settings name it (said when Discord refuses it).
READ_HISTORY = "Read Message History"
SEND = "Send Messages"


def invite_url(application_id: int) -> str:
    return discord.utils.oauth_url(
        application_id, permissions=PERMISSIONS, scopes=("bot", "applications.commands")
    )


def permission_names() -> list[str]:
    return [name for name, value in PERMISSIONS if value]


def permission_labels() -> list[str]:
    """The permissions asked for, as Discord's invite page names them."""
    # discord.py lists View Channel under its older name, read_messages
    renamed = {"read_messages": "View Channels"}
    return [renamed.get(name, name.replace("_", " ").title()) for name in permission_names()]


def has_content_intent(application_flags: int) -> bool:
    """Whether an application's ``flags`` grant it the Message Content intent."""
    return bool(application_flags & _CONTENT_FLAGS)
