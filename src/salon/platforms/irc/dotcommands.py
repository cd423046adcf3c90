"""``.ping`` and ``.help``, answered by the bot itself (Terrarium's utility commands), when
``dot_commands`` is on: a line that asks for one goes to no model, and its answer is a note
no bot reads back. Without it, both are dot messages like any other."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from salon.model import ChannelRef, Message

__all__ = ["DotCommands"]

_PING = "pong, if the bot is here"
_HELP = "the commands, or how one is used"


class DotCommands:
    def __init__(
        self, commands: Sequence[str], say: Callable[[ChannelRef, str], Awaitable[object]]
    ) -> None:
        """``commands``: the bot's command words (``.terrarium``); ``say``: sends a note."""
        self._commands = list(commands)
        self._say = say

    async def answer(self, message: Message) -> bool:
        """Answer ``.ping`` or ``.help [command]``; whether the line was one."""
        words = message.text.split()
        if not words or words[0].lower() not in (".ping", ".help"):
            return False
        if words[0].lower() == ".ping":
            reply = "pong"
        else:
            reply = self._help(words[1] if len(words) > 1 else "")
        if not message.channel.is_direct:
            reply = f"{message.author.name}: {reply}"
        await self._say(message.channel, reply)
        return True

    def _help(self, asked: str) -> str:
        uses = {".ping": _PING, ".help": _HELP}
        uses |= {c.lower(): "<question>: asks the bot" for c in self._commands}
        if not asked:
            listed = [".ping", ".help [command]", *(f"{c} <question>" for c in self._commands)]
            return ", ".join(listed)
        key = asked.lower() if asked[0] in ".!" else f".{asked.lower()}"
        use = uses.get(key)
        if use is None:
            return f"no command {asked}; .help lists them"
        return f"{key}{'' if use.startswith('<') else ':'} {use}"
