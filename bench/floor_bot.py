"""The floor: the least a bot like Salon's can cost, for ``discord_cpu`` to compare with.

A plain discord.py bot. It keeps each room's last 400 messages from the gateway (reading the
room's history once, at its first activation), and when it is mentioned or replied to it
sends them to an OpenAI-type server with aiohttp (no SDK) and posts the answer. No config,
store, traces or tools; one slash command so that it is ready as Salon is (commands synced).

``python -m bench.floor_bot`` with ``DISCORD_TOKEN``, ``FLOOR_LLM_URL`` (the server's
``/v1``) and ``FLOOR_LLM_KEY``; ``bench._bot_process`` points discord.py at the fake.
"""

from __future__ import annotations

import collections
import os

import aiohttp
import discord
from discord import app_commands

WINDOW = 400


class Floor(discord.Client):
    def __init__(self) -> None:
        intents = discord.Intents.none()
        intents.guilds = intents.guild_messages = intents.dm_messages = True
        intents.message_content = True
        super().__init__(intents=intents, max_messages=None)
        self.tree = app_commands.CommandTree(self)
        self.rooms: dict[int, collections.deque[discord.Message]] = {}
        self.http_session: aiohttp.ClientSession | None = None

        @self.tree.command(description="Forget this room's messages")
        async def forget(interaction: discord.Interaction) -> None:
            self.rooms.pop(interaction.channel_id or 0, None)
            await interaction.response.send_message("Forgotten.")

    async def setup_hook(self) -> None:
        self.http_session = aiohttp.ClientSession()
        await self.tree.sync()

    async def close(self) -> None:
        if self.http_session is not None:
            await self.http_session.close()
        await super().close()

    async def on_message(self, message: discord.Message) -> None:
        room = self.rooms.get(message.channel.id)
        if room is not None:
            room.append(message)
        me = self.user
        if me is None or message.author == me or not self._addressed(message, me):
            return
        if room is None:  # the room's first activation: its history, once
            past = [m async for m in message.channel.history(limit=WINDOW, before=message)]
            room = collections.deque(reversed(past), maxlen=WINDOW)
            room.append(message)
            self.rooms[message.channel.id] = room
        answer = await self._ask(room, me)
        await message.channel.send(answer[:2000], reference=message, mention_author=False)

    @staticmethod
    def _addressed(message: discord.Message, me: discord.ClientUser) -> bool:
        reply = message.reference and message.reference.resolved
        return me in message.mentions or (isinstance(reply, discord.Message) and reply.author == me)

    async def _ask(self, room: collections.deque[discord.Message], me: discord.ClientUser) -> str:
        messages = [{"role": "system", "content": f"You are {me.name}, in a group chat."}]
        for m in room:
            mine = m.author == me
            text = m.content if mine else f"{m.author.display_name}: {m.content}"
            messages.append({"role": "assistant" if mine else "user", "content": text})
        body = {"model": "m", "messages": messages, "max_tokens": 1024}
        headers = {"Authorization": f"Bearer {os.environ['FLOOR_LLM_KEY']}"}
        url = os.environ["FLOOR_LLM_URL"] + "/chat/completions"
        assert self.http_session is not None
        timeout = aiohttp.ClientTimeout(total=60)
        async with self.http_session.post(url, json=body, headers=headers, timeout=timeout) as r:
            data = await r.json()
        return str(data["choices"][0]["message"]["content"] or "…")


def main() -> int:
    Floor().run(os.environ["DISCORD_TOKEN"], log_handler=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
