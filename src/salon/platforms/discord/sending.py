"""Posting on Discord: messages with their files, the tool log through a webhook, and
progress messages; a failed post is tried again when another try may succeed.

A retried post keeps its nonce, so Discord shows it once. A post Discord refuses for a
missing permission is logged once per channel with the permissions the bot needs.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import discord

from salon.config import DiscordConfig
from salon.model import Attachment, ChannelRef, Message
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.convert import to_discord_mentions
from salon.platforms.discord.members import MemberCache
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import SEND, permission_names
from salon.platforms.discord.refusals import (
    NETWORK_ERRORS,
    Once,
    refusal,
    retry_after,
    translated,
    where,
)
from salon.platforms.discord.showing import FileBatch, ProgressBoard, file_batches

__all__ = ["Sender", "new_nonce"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


def new_nonce() -> int:
    """A send's nonce: Discord drops a repeat with the same one."""
    return uuid.uuid4().int % (1 << 63)


class Sender:
    def __init__(
        self,
        *,
        config: DiscordConfig,
        bot_name: str,
        max_chars: int,
        channels: Channels,
        people: People,
        members: MemberCache,
        cache: HistoryCache,
        progress_board: ProgressBoard,
    ) -> None:
        """``max_chars``: the longest message posted (longer progress and logs are cut)."""
        self._config = config
        self._bot_name = bot_name
        self._max_chars = max_chars
        self._channels = channels
        self._people = people
        self._members = members
        self._cache = cache
        self._board = progress_board
        self._webhooks: dict[int, discord.Webhook] = {}
        self._told = Once()  # send permission problems, logged once per channel

    def forget_webhooks(self) -> None:
        """Webhook objects belong to one client: a new one looks them up again."""
        self._webhooks.clear()

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
        key: str | None = None,
        reply_to: str | None = None,
    ) -> Message:
        """Images go in embeds (an attachment each, titled and linked), ten to a message.
        ``key`` is the first message's nonce (see ``DiscordPlatform.sent_before``);
        ``reply_to`` makes the first a reply, or a plain message if that one is gone."""
        target = await self._channels.get(channel)
        # Who could be meant is looked up only for a text naming someone (most do not).
        known = self._known_people(channel, target) if "@" in text else {}
        content = to_discord_mentions(text, known)
        batches: list[FileBatch | None] = [*file_batches(files)] or [None]
        reference = None
        if reply_to is not None:
            # Without fail_if_not_exists=False, Discord refuses the whole message (400,
            # "Unknown message") when the one it answers was deleted meanwhile.
            reference = discord.MessageReference(
                message_id=int(reply_to), channel_id=int(channel.id), fail_if_not_exists=False
            )
        first = await self._post(
            channel, target, content, batches[0], silent=note, nonce=key, reference=reference
        )
        for batch in batches[1:]:
            await self._post(channel, target, "", batch, silent=note)
        return first

    async def _post(
        self,
        channel: ChannelRef,
        target: discord.abc.Messageable,
        content: str,
        batch: FileBatch | None,
        *,
        silent: bool,
        nonce: int | str | None = None,
        reference: discord.MessageReference | None = None,
    ) -> Message:
        if nonce is None:  # Discord drops a repeat with the same nonce
            nonce = new_nonce()
        action = f"post in {where(target)}"
        extra: dict[str, Any] = {"embeds": list(batch.embeds)} if batch and batch.embeds else {}
        if reference is not None:
            extra["reference"] = reference

        def attempt() -> Awaitable[discord.Message]:
            uploads = batch.uploads() if batch is not None else []  # fresh for each try
            return target.send(content, files=uploads, nonce=nonce, silent=silent, **extra)

        try:
            sent = await self.retrying(attempt)
        except discord.Forbidden as exc:
            error = refusal(action, exc, needs=SEND)
            self._tell_once(channel, str(error))
            raise error from exc
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            raise refusal(action, exc, needs=SEND) from exc
        return (await self._people.converted([sent]))[0]

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool:
        """Whether a message went out under ``key``: ``note`` is posted under it, and
        Discord gives back the message made then instead, if it was (see
        ``DiscordPlatform.sent_before``)."""
        target = await self._channels.get(channel)
        came_back = await self._post(channel, target, note, None, silent=True, nonce=key)
        return came_back.text != note

    async def retrying(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call``, tried again (at most ``send_retries`` times) after a failure worth
        another try; the last failure is raised as it came. A retried send keeps its
        nonce, so Discord shows it once."""
        delay = 1.0
        for tries in range(self._config.send_retries, -1, -1):
            try:
                return await call()
            except (discord.DiscordException, *NETWORK_ERRORS) as exc:
                wait = self._wait_before_again(exc, delay)
                if wait is None or tries == 0:
                    raise
                logger.warning("Discord: send failed (%s); retrying in %.1fs", exc, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, self._config.discord_backoff_max)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _wait_before_again(self, exc: BaseException, backoff: float) -> float | None:
        """Seconds to wait before trying again after ``exc``, or None not to: a server or
        network error backs off; a 429 that discord.py did not wait out (one without
        Discord's ``Via`` header, which it takes for a Cloudflare ban) waits its
        Retry-After, unless that is more than ``rate_limit_wait_max``."""
        if isinstance(exc, (discord.DiscordServerError, *NETWORK_ERRORS)):
            return backoff
        wait = retry_after(exc)
        if wait is None or wait > self._config.rate_limit_wait_max:
            return None
        return wait

    def _known_people(self, channel: ChannelRef, target: object) -> dict[str, str]:
        """Lower-cased names to ids: the guild's known members and who spoke recently."""
        known: dict[str, str] = {}
        guild = getattr(target, "guild", None)
        if guild is not None:
            for name, user_id in self._members.names(guild.id).items():
                known.setdefault(name.lower(), str(user_id))
        for message in self._cache.get(channel.id, 1, everything=True) or ():
            for person in (message.author, *message.mentions):
                known.setdefault(person.name.lower(), person.id)
        return known

    def _tell_once(self, channel: ChannelRef, problem: str) -> None:
        if self._told.first(channel.key):
            logger.error("%s (the bot needs: %s)", problem, ", ".join(permission_names()))

    async def tool_log(self, channel: ChannelRef, text: str) -> None:
        """The dot message through a webhook named after the bot (a thread's through its
        parent's); where there is none, or it fails, as a plain message."""
        target = await self._channels.get(channel)
        body = text[: self._max_chars]
        home = target.parent if isinstance(target, discord.Thread) else target
        if isinstance(home, discord.TextChannel):
            try:
                hook = await self._webhook(home)
                thread = target if isinstance(target, discord.Thread) else discord.utils.MISSING
                await hook.send(body, username=self._bot_name, thread=thread)
                return
            except (discord.DiscordException, *NETWORK_ERRORS) as exc:
                self._webhooks.pop(home.id, None)  # perhaps deleted: look again next time
                logger.info("Discord: no webhook in %s (%s); posting plainly", channel.key, exc)
        nonce = new_nonce()
        with translated(f"post the tool log in {where(target)}", needs=SEND):
            await self.retrying(lambda: target.send(body, nonce=nonce))

    async def _webhook(self, channel: discord.TextChannel) -> discord.Webhook:
        if channel.id not in self._webhooks:
            hooks = [h for h in await channel.webhooks() if h.name == self._bot_name and h.token]
            hook = hooks[0] if hooks else await channel.create_webhook(name=self._bot_name)
            self._webhooks[channel.id] = hook
        return self._webhooks[channel.id]

    async def progress(
        self, channel: ChannelRef, key: str, text: str, *, done: bool = False
    ) -> None:
        """One silent message per job, edited as reports come (at most every
        ``progress_interval`` seconds) and once more at its end."""

        async def post(first: str) -> discord.Message:
            target = await self._channels.get(channel)
            with translated(f"post progress in {where(target)}", needs=SEND):
                return await target.send(first[: self._max_chars], silent=True)

        await self._board.report(key, text[: self._max_chars], done=done, post=post)
