"""``!memory`` and ``!forget`` on IRC (``salon.platforms.notes``), in a channel or in a
private message: answered by NOTICE to the person alone, never in the channel, and neither
the command nor its answer is logged or handed to the bot."""

from __future__ import annotations

import logging
from collections.abc import Callable

from salon.errors import PlatformError
from salon.model import Participant
from salon.platforms.irc.client import Client
from salon.platforms.irc.lines import TokenBucket
from salon.platforms.irc.sending import SEND_ERRORS, Sender
from salon.platforms.notes import IRC_WORDS, PeoplesMemory

__all__ = ["MEMORY_COMMANDS_PER_MINUTE", "MemoryCommands"]

logger = logging.getLogger(__name__)

MEMORY_COMMANDS_PER_MINUTE = 20  # answered for everyone together; the rest are dropped
_COMMANDS = {"!memory": "memory", "!forget": "forget"}


class MemoryCommands:
    def __init__(
        self, memory: PeoplesMemory, current: Callable[[], Client | None], sender: Sender
    ) -> None:
        self._memory = memory
        self._current = current
        self._sender = sender
        # Anyone can send these, and each answer takes lines of the flood limit: past a
        # few a minute they are dropped, after one line saying so.
        self._allowance = TokenBucket(MEMORY_COMMANDS_PER_MINUTE, MEMORY_COMMANDS_PER_MINUTE / 60)
        self._muted = False

    async def __call__(self, person: Participant, nick: str, text: str) -> bool:
        """Whether ``text`` was one of the commands (then it is answered, and done with)."""
        word, _, rest = text.strip().partition(" ")
        command = _COMMANDS.get(word.lower())
        if command is None:
            return False
        if not self._allowance.take_if_free():
            if not self._muted:
                self._muted = True
                await self._tell(
                    nick, word, "Too many memory commands just now: try again in a minute."
                )
            return True
        self._muted = False
        try:
            answer = await self._memory.answer(person, command, rest, IRC_WORDS)
        except Exception:  # the command's boundary: one line to the person, the rest logged
            logger.exception("IRC: %s from %s failed", word, nick)
            answer = "That did not work; the reason is in Salon's log."
        await self._tell(nick, word, answer)
        return True

    async def _tell(self, nick: str, word: str, answer: str) -> None:
        client = self._current()
        if client is None:
            return  # the connection went meanwhile: they can ask again
        try:
            await self._sender.notice(client, nick, answer)
        except (PlatformError, *SEND_ERRORS) as exc:
            logger.warning("IRC: could not answer %s to %s: %s", word, nick, exc)
