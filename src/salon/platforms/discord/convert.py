"""discord.py objects to Salon's model, and Salon's text back to Discord's."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import discord

from salon.model import Attachment, ChannelRef, Message, Participant

__all__ = [
    "Person",
    "channel_ref",
    "is_conversation",
    "message_link",
    "parse_message_link",
    "participant",
    "readable",
    "role_names_and_ids",
    "to_discord_mentions",
    "to_message",
]

_USER_MENTION = re.compile(r"<@!?(\d+)>")
_ROLE_MENTION = re.compile(r"<@&(\d+)>")
_CHANNEL_MENTION = re.compile(r"<#(\d+)>")
_MESSAGE_LINK = re.compile(
    r"https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/channels/(\d+|@me)/(\d+)/(\d+)/?"
)
# What people write; every other type is a notice Discord makes (a pin, a join, a boost,
# a thread's start) and no part of the conversation.
_CONVERSATION = frozenset(
    {
        discord.MessageType.default,
        discord.MessageType.reply,
        discord.MessageType.chat_input_command,
        discord.MessageType.context_menu_command,
    }
)

Person = Callable[[discord.abc.User], Participant]
"""How an adapter sees a user in one message's guild: display name and roles."""

Messageable = discord.abc.Messageable


def role_names_and_ids(member: discord.Member) -> tuple[str, ...]:
    """Names and ids of a member's roles, so a config may use either."""
    return tuple(x for r in member.roles if not r.is_default() for x in (r.name, str(r.id)))


def participant(user: discord.abc.User) -> Participant:
    """``user`` as discord.py knows it: a member's nickname and roles, else the global
    display name."""
    name = getattr(user, "display_name", None) or user.name
    roles = role_names_and_ids(user) if isinstance(user, discord.Member) else ()
    return Participant(str(user.id), name, is_bot=user.bot, roles=roles)


def is_conversation(message: discord.Message) -> bool:
    """Whether someone wrote ``message`` (not a system notice such as a pin or a join)."""
    return message.type in _CONVERSATION


def channel_ref(channel: object) -> ChannelRef:
    direct = isinstance(channel, discord.DMChannel | discord.GroupChannel)
    guild = getattr(channel, "guild", None)
    parent = getattr(channel, "parent_id", None) if isinstance(channel, discord.Thread) else None
    return ChannelRef(
        "discord",
        str(getattr(channel, "id", "")),
        name=str(getattr(channel, "name", None) or "direct"),
        is_direct=direct,
        guild_id=str(guild.id) if guild is not None else None,
        parent_id=str(parent) if parent else None,
    )


def readable(
    text: str, message: discord.Message, name_of: Callable[[discord.abc.User], str]
) -> str:
    """Raw ``<@123>`` mentions become ``@name``, with the names ``name_of`` gives."""
    names = {str(u.id): name_of(u) for u in message.mentions}
    roles = {str(r.id): r.name for r in message.role_mentions}
    channels = {str(c.id): getattr(c, "name", "channel") for c in message.channel_mentions}
    text = _USER_MENTION.sub(lambda m: f"@{names.get(m[1], m[1])}", text)
    text = _ROLE_MENTION.sub(lambda m: f"@{roles.get(m[1], m[1])}", text)
    return _CHANNEL_MENTION.sub(lambda m: f"#{channels.get(m[1], m[1])}", text)


def to_discord_mentions(text: str, known: Mapping[str, str]) -> str:
    """``@name`` written by the model becomes a real mention of that person.

    ``known`` maps lower-cased names to user ids (people seen in the channel).
    """
    if not known:
        return text

    def swap(match: re.Match[str]) -> str:
        user_id = known.get(match[1].lower())
        return f"<@{user_id}>" if user_id else match[0]

    return re.sub(r"(?<![\w<])@([\w.\-]{2,32})", swap, text)


def to_message(message: discord.Message, *, person: Person) -> Message:
    """``message`` with every person in it (author, mentions) seen through ``person``."""
    mentions = tuple(person(u) for u in message.mentions)
    by_id = {p.id: p.name for p in mentions}
    text = readable(message.content, message, lambda u: by_id.get(str(u.id), u.name))
    reference = message.reference
    replied = reference.resolved if reference is not None else None
    reply_author = str(replied.author.id) if isinstance(replied, discord.Message) else None
    reactions = tuple(str(r.emoji) for r in message.reactions)
    files = tuple(
        Attachment(a.filename, a.content_type or "", a.size, url=a.url) for a in message.attachments
    )
    return Message(
        id=str(message.id),
        channel=channel_ref(message.channel),
        author=person(message.author),
        text=text,
        created_at=message.created_at,
        mentions=mentions,
        reply_to_id=str(reference.message_id) if reference and reference.message_id else None,
        reply_to_author_id=reply_author,
        attachments=files,
        reactions=reactions,
    )


def message_link(message: Message) -> str:
    guild = message.channel.guild_id or "@me"
    return f"https://discord.com/channels/{guild}/{message.channel.id}/{message.id}"


def parse_message_link(link: str) -> tuple[str, str] | None:
    """``(channel id, message id)`` of a Discord message link, or None."""
    match = _MESSAGE_LINK.fullmatch(link.strip())
    return (match[2], match[3]) if match else None
