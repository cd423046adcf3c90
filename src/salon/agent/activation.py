"""Whether a message should make the bot answer."""

from __future__ import annotations

import random
import re

from salon.config import BotConfig
from salon.context import is_visible, m_command
from salon.model import Message, Participant

__all__ = ["should_activate"]


def _names_bot(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def should_activate(
    message: Message,
    me: Participant,
    config: BotConfig,
    *,
    monitored: bool = False,
    rng: random.Random | None = None,
) -> bool:
    """Apply the bot's activation rules, cheapest first."""
    if message.author.id == me.id:
        return False
    if message.author.is_bot and not config.allow_bot_interactions:
        return False
    command = m_command(message.text)
    if command is not None:  # "m continue" goes on without a mention; other m words: nothing
        addressed = message.mentions_id(me.id) or message.reply_to_author_id == me.id
        return command == "continue" and (message.channel.is_direct or monitored or addressed)
    if not is_visible(message, config):
        return False
    if message.channel.is_direct or monitored:
        return True
    if message.mentions_id(me.id) or message.reply_to_author_id == me.id:
        return True
    if config.reply_on_name and (
        _names_bot(message.text, config.name) or _names_bot(message.text, me.name)
    ):
        return True
    if config.reply_on_random > 0:
        return (rng or random.Random()).randrange(config.reply_on_random) == 0
    return False
