"""Discord through discord.py.

History stays on Discord: it is fetched when an activation needs it, from a cache that the
gateway's create, edit, delete and reaction events keep exact, and that is dropped whenever
the connection drops. Monitored channels live in the store so ``/monitor`` survives restarts.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Protocol

import discord
from discord import app_commands

from salon.config import DiscordConfig, Secrets
from salon.errors import PlatformError
from salon.model import (
    TAG_ASKED,
    TAG_MONITORED,
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Message,
    MessageEvent,
    Participant,
)
from salon.platforms.base import Capability, EventSink, PlatformBase
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.convert import (
    channel_ref,
    parse_message_link,
    participant,
    to_discord_mentions,
    to_message,
)
from salon.platforms.discord.views import ButtonPrompt

__all__ = ["PERMISSIONS", "DiscordPlatform", "invite_url"]

logger = logging.getLogger(__name__)

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
_FETCH_MARGIN = 50  # extra messages fetched so deletions do not force a refetch
_RANGE_CACHE = 32  # .history stretches kept (dropped on any edit or deletion in the channel)


class MonitorStore(Protocol):
    async def monitored(self, bot: str) -> set[str]: ...

    async def set_monitored(self, bot: str, channel_key: str, on: bool, by: str = "") -> bool: ...


SchedulesCommand = Callable[[ChannelRef, str], Awaitable[str]]


def invite_url(application_id: int) -> str:
    return discord.utils.oauth_url(
        application_id, permissions=PERMISSIONS, scopes=("bot", "applications.commands")
    )


class _Client(discord.Client):
    def __init__(self, platform: DiscordPlatform) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        intents.guild_messages = True
        intents.dm_messages = True
        intents.message_content = True
        intents.guild_reactions = True
        intents.dm_reactions = True
        super().__init__(intents=intents, max_messages=None)
        self.platform = platform
        self.tree = app_commands.CommandTree(self)

    async def setup_hook(self) -> None:
        self.platform._register_commands(self.tree)

    async def on_ready(self) -> None:
        await self.platform._on_ready(self)

    async def on_message(self, message: discord.Message) -> None:
        await self.platform._on_message(message)

    async def on_raw_message_edit(self, payload: discord.RawMessageUpdateEvent) -> None:
        self.platform.cache.edited(self.platform._convert(payload.message))
        self.platform._channel_changed(str(payload.channel_id))

    async def on_raw_message_delete(self, payload: discord.RawMessageDeleteEvent) -> None:
        self.platform.cache.deleted(str(payload.channel_id), [str(payload.message_id)])
        self.platform._channel_changed(str(payload.channel_id))

    async def on_raw_bulk_message_delete(self, payload: discord.RawBulkMessageDeleteEvent) -> None:
        self.platform.cache.deleted(str(payload.channel_id), [str(i) for i in payload.message_ids])
        self.platform._channel_changed(str(payload.channel_id))

    async def on_guild_channel_pins_update(self, channel: Any, last_pin: Any) -> None:
        self.platform._pins.pop(str(channel.id), None)

    async def on_private_channel_pins_update(self, channel: Any, last_pin: Any) -> None:
        self.platform._pins.pop(str(channel.id), None)

    async def on_raw_reaction_add(self, payload: discord.RawReactionActionEvent) -> None:
        self.platform.cache.reacted(
            str(payload.channel_id), str(payload.message_id), str(payload.emoji), added=True
        )

    async def on_raw_reaction_remove(self, payload: discord.RawReactionActionEvent) -> None:
        self.platform.cache.reacted(
            str(payload.channel_id), str(payload.message_id), str(payload.emoji), added=False
        )

    async def on_disconnect(self) -> None:
        self.platform.cache.forget()  # events may be missed until we are back
        self.platform._pins.clear()
        self.platform._ranges.clear()

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        logger.exception("Discord: the %s handler failed", event_method)


class DiscordPlatform(PlatformBase):
    name = "discord"
    max_message_chars = 1800
    capabilities = frozenset(Capability)

    def __init__(
        self,
        *,
        bot: str,
        bot_name: str,
        config: DiscordConfig,
        secrets: Secrets,
        monitors: MonitorStore,
        schedules: SchedulesCommand | None = None,
        authorized_roles: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.cache = HistoryCache(max_channels=config.history_cache_channels)
        self.history_fetches = 0
        self._bot = bot
        self._bot_name = bot_name
        self._token = secrets.get(config.token_env) or ""
        self._monitors = monitors
        self._schedules = schedules
        self._authorized_roles = set(authorized_roles)
        self._client: _Client | None = None
        self._runner: asyncio.Task[None] | None = None
        self._sink: EventSink | None = None
        self._monitored: set[str] = set()
        self._webhooks: dict[int, discord.Webhook] = {}
        self._seen_channels: OrderedDict[int, Any] = OrderedDict()
        self._told: set[str] = set()  # permission problems already logged once
        self._pins: dict[str, list[Message]] = {}  # channel id -> pinned, oldest first
        self._ranges: OrderedDict[tuple[str, str, int], list[Message]] = OrderedDict()
        self.ready = asyncio.Event()
        self.open_prompts = 0
        self._prompts_changed = asyncio.Condition()

    @property
    def client(self) -> _Client:
        if self._client is None:
            raise PlatformError("Discord is not started")
        return self._client

    @property
    def self_participant(self) -> Participant:
        user = self._client.user if self._client else None
        if user is None:
            return Participant("discord:self", self._bot_name, is_bot=True)
        return participant(user)

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        self._monitored = await self._monitors.monitored(self._bot)
        self._monitored |= {f"discord:{c}" for c in self.config.monitored_channels}
        self._client = _Client(self)
        self._runner = asyncio.create_task(self._client.start(self._token), name="discord")
        ready = asyncio.create_task(self.ready.wait())
        done, _ = await asyncio.wait({ready, self._runner}, return_when=asyncio.FIRST_COMPLETED)
        if self._runner in done:
            ready.cancel()
            error = self._runner.exception()
            if isinstance(error, discord.LoginFailure):
                raise PlatformError("Discord refused the token (check the bot token)") from error
            raise PlatformError(f"Discord connection failed: {error}") from error

    async def stop(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._runner, 10)

    async def _on_ready(self, client: _Client) -> None:
        self.cache.forget()
        app = await client.application_info()
        logger.info("Discord: logged in as %s; invite: %s", client.user, invite_url(app.id))
        flags = app.flags
        if not (flags.gateway_message_content or flags.gateway_message_content_limited):
            logger.error(
                "Discord: the Message Content intent is not enabled for this application; "
                "the bot will see empty messages. Enable it under Bot > Privileged Gateway "
                "Intents in the developer portal."
            )
        try:
            await client.tree.sync()
        except discord.HTTPException as exc:
            logger.warning("Discord: could not register slash commands: %s", exc)
        self.ready.set()

    # -- incoming --------------------------------------------------------------------

    def _convert(self, message: discord.Message) -> Message:
        converted = to_message(message)
        if converted.channel.key in self._monitored:
            converted = _tagged(converted, TAG_MONITORED)
        return converted

    async def _on_message(self, message: discord.Message) -> None:
        self._remember_channel(message.channel)
        converted = self._convert(message)
        self.cache.added(converted)
        if self._sink is not None:
            await self._sink(MessageEvent(converted))

    # -- outgoing --------------------------------------------------------------------

    def _remember_channel(self, channel: object) -> None:
        """DM channels are not always in discord.py's cache: keep the ones we saw."""
        if isinstance(channel, discord.abc.Messageable) and hasattr(channel, "id"):
            self._seen_channels[int(channel.id)] = channel
            self._seen_channels.move_to_end(int(channel.id))
            while len(self._seen_channels) > self.config.history_cache_channels:
                self._seen_channels.popitem(last=False)

    async def _channel(self, channel: ChannelRef) -> discord.abc.Messageable:
        client = self.client
        found = client.get_channel(int(channel.id)) or self._seen_channels.get(int(channel.id))
        if found is None:
            try:
                found = await client.fetch_channel(int(channel.id))
            except discord.HTTPException as exc:
                raise PlatformError(f"cannot reach Discord channel {channel.id}: {exc}") from exc
        if not isinstance(found, discord.abc.Messageable):
            raise PlatformError(f"Discord channel {channel.id} takes no messages")
        return found

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
    ) -> Message:
        target = await self._channel(channel)
        content = to_discord_mentions(text, self._known_people(channel, target))
        nonce = uuid.uuid4().int % (1 << 63)  # Discord drops a repeat with the same nonce
        delay = 1.0
        for attempt in range(self.config.send_retries + 1):
            try:
                uploads = [discord.File(io.BytesIO(f.data or b""), f.filename) for f in files]
                sent = await target.send(content, files=uploads, nonce=nonce, silent=note)
            except discord.Forbidden as exc:
                self._tell_once(channel, f"missing permission to send in {channel.key}: {exc.text}")
                raise PlatformError(f"no permission to post in this channel: {exc.text}") from exc
            except discord.HTTPException as exc:
                if exc.status < 500 or attempt == self.config.send_retries:
                    raise PlatformError(f"Discord refused the message: {exc}") from exc
                logger.warning("Discord: send failed (%s); retrying in %.1fs", exc.status, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.config.discord_backoff_max)
            else:
                return self._convert(sent)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _known_people(self, channel: ChannelRef, target: object) -> dict[str, str]:
        """Lower-cased names to ids: the guild's cached members and who spoke recently."""
        known: dict[str, str] = {}
        for member in getattr(getattr(target, "guild", None), "members", ()):
            known.setdefault(participant(member).name.lower(), str(member.id))
        for message in self.cache.get(channel.id, 1, everything=True) or ():
            for person in (message.author, *message.mentions):
                known.setdefault(person.name.lower(), person.id)
        return known

    def _tell_once(self, channel: ChannelRef, problem: str) -> None:
        if channel.key not in self._told:
            self._told.add(channel.key)
            logger.error("Discord: %s (needs: %s)", problem, ", ".join(_permission_names()))

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        target = await self._channel(channel)
        if isinstance(target, discord.TextChannel):
            try:
                hook = await self._webhook(target)
                await hook.send(text[: self.max_message_chars], username=self._bot_name)
                return
            except discord.HTTPException as exc:
                logger.info("Discord: no webhook in %s (%s); posting plainly", channel.key, exc)
        await target.send(text[: self.max_message_chars])

    async def _webhook(self, channel: discord.TextChannel) -> discord.Webhook:
        if channel.id not in self._webhooks:
            hooks = [h for h in await channel.webhooks() if h.name == self._bot_name and h.token]
            hook = hooks[0] if hooks else await channel.create_webhook(name=self._bot_name)
            self._webhooks[channel.id] = hook
        return self._webhooks[channel.id]

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._with_files(await self._history(channel, limit))

    async def _with_files(self, messages: Sequence[Message]) -> list[Message]:
        """Load what the model may see of attachments: the newest ``max_images`` images
        under the size cap, and text files under ``max_text_attachment_kb``."""
        out = list(messages)
        images_left = self.config.max_images if self.config.include_images else 0
        for index in range(len(out) - 1, -1, -1):
            if out[index].attachments:
                loaded, images_left = await self._load_files(out[index], images_left)
                if loaded != out[index]:
                    out[index] = loaded
                    self.cache.edited(loaded)
        return out

    async def _load_files(self, message: Message, images_left: int) -> tuple[Message, int]:
        files = []
        for attachment in message.attachments:
            wanted = self._wanted(attachment, images_left)
            if attachment.content_type.startswith("image/") and wanted:
                images_left -= 1
            data = attachment.data
            if wanted and data is None:
                data = await self._download(attachment)
            files.append(replace(attachment, data=data if wanted else None))
        return replace(message, attachments=tuple(files)), images_left

    def _wanted(self, attachment: Attachment, images_left: int) -> bool:
        if attachment.content_type.startswith("image/"):
            return images_left > 0 and attachment.size <= self.config.max_image_bytes
        textual = attachment.content_type.startswith("text/") or attachment.filename.endswith(
            (".txt", ".md", ".py", ".json", ".csv", ".log", ".yaml", ".yml", ".toml")
        )
        return textual and attachment.size <= self.config.max_text_attachment_kb * 1024

    async def _download(self, attachment: Attachment) -> bytes | None:
        try:
            return await self.client.http.get_from_cdn(attachment.url)
        except (discord.HTTPException, OSError) as exc:
            logger.warning("Discord: could not load %s: %s", attachment.filename, exc)
            return None

    async def _history(self, channel: ChannelRef, limit: int) -> Sequence[Message]:
        cached = self.cache.get(channel.id, limit)
        if cached is not None:
            return cached
        target = await self._channel(channel)
        depth = limit + _FETCH_MARGIN
        short = self.cache.short(channel.id)
        if short is not None:  # deletions used up the margin: fetch only what is missing
            oldest, known = short
            self.history_fetches += 1
            before = discord.Object(id=int(oldest))
            missing = depth - known
            older = [self._convert(m) async for m in target.history(limit=missing, before=before)]
            self.cache.extend_older(channel.id, older[::-1], depth)
            return self.cache.get(channel.id, limit) or []
        self.history_fetches += 1
        fetched = [self._convert(m) async for m in target.history(limit=depth)]
        fetched.reverse()
        opens_with_history = bool(fetched) and fetched[0].text.startswith(".history")
        if isinstance(target, discord.Thread) and len(fetched) < depth and not opens_with_history:
            fetched = [*await self._before_thread(target, depth - len(fetched)), *fetched]
        self.cache.fill(channel.id, fetched, depth)
        return fetched[-limit:]

    async def _before_thread(self, thread: discord.Thread, limit: int) -> list[Message]:
        """The parent channel up to and including the message the thread branched from."""
        parent = thread.parent
        if not isinstance(parent, discord.TextChannel):
            return []  # a forum post has no messages before it
        self.history_fetches += 1
        until = discord.Object(id=thread.id + 1)  # a thread's id is its starter message's
        earlier = [self._convert(m) async for m in parent.history(limit=limit, before=until)]
        return earlier[::-1]

    def _channel_changed(self, channel_id: str) -> None:
        """An edit or deletion: pins and ``.history`` stretches of the channel are stale."""
        self._pins.pop(channel_id, None)
        for key in [k for k in self._ranges if k[0] == channel_id]:
            del self._ranges[key]

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        parsed = parse_message_link(link)
        if parsed is None:
            return None
        channel_id, message_id = parsed
        cached = self.cache.get(channel_id, 1, everything=True) or []
        for index, message in enumerate(cached):
            if message.id == message_id and index + 1 >= limit:
                return await self._with_files(cached[index + 1 - limit : index + 1])
        key = (channel_id, message_id, limit)
        if key not in self._ranges:
            self._ranges[key] = await self._fetch_until(channel_id, message_id, limit)
            while len(self._ranges) > _RANGE_CACHE:
                self._ranges.popitem(last=False)
        self._ranges.move_to_end(key)
        return await self._with_files(self._ranges[key])

    async def _fetch_until(self, channel_id: str, message_id: str, limit: int) -> list[Message]:
        target = await self._channel(ChannelRef("discord", channel_id))
        try:
            last = await target.fetch_message(int(message_id))
            before = discord.Object(id=int(message_id))
            older = [m async for m in target.history(limit=limit - 1, before=before)]
        except discord.HTTPException as exc:
            raise PlatformError(f"cannot read message {message_id}: {exc}") from exc
        self.history_fetches += 1
        return [self._convert(m) for m in reversed(older)] + [self._convert(last)]

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        own = await self._pins_of(channel.id)
        if channel.parent_id is None:
            return own
        return [*await self._pins_of(channel.parent_id), *own]

    async def _pins_of(self, channel_id: str) -> list[Message]:
        if channel_id not in self._pins:
            target = await self._channel(ChannelRef("discord", channel_id))
            try:
                found = [self._convert(m) async for m in target.pins(limit=None)]
            except discord.HTTPException as exc:
                self._tell_once(ChannelRef("discord", channel_id), f"cannot read pins: {exc}")
                found = []
            self._pins[channel_id] = sorted(found, key=lambda m: int(m.id))
        return self._pins[channel_id]

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        target = await self._channel(channel)
        try:
            await target.get_partial_message(int(message_id)).delete()  # type: ignore[attr-defined]
        except discord.HTTPException as exc:
            raise PlatformError(f"cannot delete message {message_id}: {exc}") from exc

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        target = await self._channel(channel)
        try:
            await target.get_partial_message(int(message_id)).add_reaction(emoji)  # type: ignore[attr-defined]
        except discord.HTTPException as exc:
            raise PlatformError(f"cannot react to message {message_id}: {exc}") from exc

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        """Walk replies back, at most ``reply_chain_max_depth``; the cache first, then REST."""
        target = await self._channel(message.channel)
        known = {m.id: m for m in self.cache.get(message.channel.id, 1, everything=True) or ()}
        chain: list[Message] = []
        seen = {message.id}
        current = message
        while current.reply_to_id and len(chain) < self.config.reply_chain_max_depth:
            if current.reply_to_id in seen:
                break  # a cycle: stop
            found = known.get(current.reply_to_id)
            if found is None:
                try:
                    fetched = await target.fetch_message(int(current.reply_to_id))
                except discord.HTTPException:
                    break  # deleted or out of reach: the chain ends here
                found = self._convert(fetched)
            seen.add(found.id)
            chain.append(found)
            current = found
        return chain[::-1]

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        target = await self._channel(channel)
        members = getattr(target, "members", None)
        if members:
            return sorted({participant(m).name for m in members})
        recent = self.cache.get(channel.id, 1) or []
        return sorted({m.author.name for m in recent})

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        target = await self._channel(channel)
        async with target.typing():
            yield

    # -- approvals ---------------------------------------------------------------------

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        target = await self._channel(channel)
        roles = set(request.authorized_roles) | self._authorized_roles

        def may_answer(interaction: discord.Interaction) -> bool:
            if str(interaction.user.id) == request.requester.id:
                return True
            names = {r.name for r in getattr(interaction.user, "roles", ())}
            return bool(names & roles)

        prompt = ButtonPrompt(
            may_answer=may_answer,
            refusal=f"Only {request.requester.name} can answer this.",
            timeout=request.timeout,
        )
        text = f"{self._bot_name} wants to run {request.description}. Allow?"
        await target.send(text, view=prompt)
        async with self._prompts_changed:
            self.open_prompts += 1
            self._prompts_changed.notify_all()
        try:
            return await prompt.answer
        finally:
            self.open_prompts -= 1

    async def wait_prompts(self, count: int = 1) -> None:
        """Wait until ``count`` approval prompts are open and clickable."""
        async with self._prompts_changed:
            await self._prompts_changed.wait_for(lambda: self.open_prompts >= count)

    # -- slash commands -----------------------------------------------------------------

    def _register_commands(self, tree: app_commands.CommandTree[_Client]) -> None:
        @tree.command(name="monitor", description="Read and answer every message here")
        async def monitor(interaction: discord.Interaction) -> None:
            await self._set_monitor(interaction, on=True)

        @tree.command(name="unmonitor", description="Stop reading every message here")
        async def unmonitor(interaction: discord.Interaction) -> None:
            await self._set_monitor(interaction, on=False)

        @tree.command(name="ask", description="Ask the bot one question")
        async def ask(interaction: discord.Interaction, question: str) -> None:
            await self._ask(interaction, question)

        @tree.command(name="schedules", description="List this channel's schedules, or cancel one")
        async def schedules(interaction: discord.Interaction, cancel: int | None = None) -> None:
            channel = channel_ref(interaction.channel)
            if self._schedules is None:
                await interaction.response.send_message("Schedules are off.", ephemeral=True)
                return
            text = await self._schedules(channel, f"cancel {cancel}" if cancel else "")
            await interaction.response.send_message(text[:1900], ephemeral=True)

    async def _set_monitor(self, interaction: discord.Interaction, *, on: bool) -> None:
        key = channel_ref(interaction.channel).key
        changed = await self._monitors.set_monitored(self._bot, key, on, str(interaction.user.id))
        if on:
            self._monitored.add(key)
        else:
            self._monitored.discard(key)
        self.cache.forget(key.partition(":")[2])  # tags in the cache follow the new state
        state = "now reads every message here" if on else "now answers only when addressed here"
        note = "" if changed else " (no change)"
        await interaction.response.send_message(f"{self._bot_name} {state}{note}.", ephemeral=True)

    async def _ask(self, interaction: discord.Interaction, question: str) -> None:
        await interaction.response.send_message(f"Asking: {question[:1800]}", ephemeral=True)
        channel = channel_ref(interaction.channel)
        message = Message(
            id=f"ask-{interaction.id}",
            channel=channel,
            author=participant(interaction.user),
            text=question,
            created_at=interaction.created_at,
            mentions=(self.self_participant,),
        )
        if self._sink is not None:
            await self._sink(MessageEvent(_tagged(message, TAG_ASKED)))


def _tagged(message: Message, tag: str) -> Message:
    return replace(message, tags=message.tags | {tag})


def _permission_names() -> list[str]:
    return [name for name, value in PERMISSIONS if value]
