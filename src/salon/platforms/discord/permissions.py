"""What the bot asks of a server when it is invited, and the link that invites it."""

from __future__ import annotations

import discord

__all__ = ["PERMISSIONS", "READ_HISTORY", "SEND", "invite_url", "permission_names"]

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
