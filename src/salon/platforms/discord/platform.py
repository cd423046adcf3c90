"""Discord through discord.py.

History stays on Discord: it is fetched when an activation needs it, from a cache that the
gateway's create, edit, delete and reaction events keep exact, and that is dropped whenever
the connection drops. Monitored channels live in the store so ``/monitor`` survives restarts.

Discord's REST messages name their authors by user only; guild names and roles come from
``MemberCache``, so a person has one name and the same roles whichever way their message
was read. Discord's own notices (pins, joins, boosts, thread starts) are never read. Every
failure of a call to Discord leaves as a ``PlatformError`` that says what was refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Protocol, TypeVar

import discord
from discord import app_commands

from salon.config import DiscordConfig, Secrets
from salon.errors import PlatformError
from salon.model import (
    Approval,
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Message,
    MessageEvent,
    Participant,
    Tag,
)
from salon.platforms.base import Capability, EventSink, PlatformBase
from salon.platforms.discord.attachments import AttachmentLoader
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.client import AnyClient, build_client
from salon.platforms.discord.convert import (
    channel_ref,
    is_conversation,
    message_link,
    parse_message_link,
    to_discord_mentions,
)
from salon.platforms.discord.members import MemberCache
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import PERMISSIONS, invite_url, permission_names
from salon.platforms.discord.refusals import (
    NETWORK_ERRORS,
    Once,
    refusal,
    retry_after,
    translated,
    where,
)
from salon.platforms.discord.showing import FileBatch, ProgressBoard, file_batches
from salon.platforms.discord.views import ButtonPrompt
from salon.tasks import TaskState, supervise

__all__ = ["PERMISSIONS", "DiscordPlatform", "GenerateCommand", "invite_url"]

logger = logging.getLogger(__name__)

_FETCH_MARGIN = 50  # extra messages fetched so deletions do not force a refetch
_RANGE_CACHE = 32  # .history stretches kept (dropped on any edit or deletion in the channel)
_MEMBER_CACHE = 5000  # guild members whose names and roles are kept
_T = TypeVar("_T")
_HISTORY = "Read Message History"
_SEND = "Send Messages"


class MonitorStore(Protocol):
    async def monitored(self, bot: str) -> set[str]: ...

    async def set_monitored(self, bot: str, channel_key: str, on: bool, by: str = "") -> bool: ...


class SchedulesCommand(Protocol):
    """``/schedules``: lists the channel's schedules or cancels one. With ``requester``,
    only a schedule they set (``others`` says who else may cancel one)."""

    async def __call__(
        self,
        channel: ChannelRef,
        words: str,
        *,
        requester: Participant | None = None,
        others: str = "",
    ) -> str: ...


GenerateCommand = Callable[[ChannelRef, Participant, dict[str, Any]], Awaitable[str]]
"""``/generate``: runs the image tool for who asked, in the channel; says how it went."""
ActivityLink = Callable[[], str]  # the answer to /activity: a short-lived link, or why not


class DiscordPlatform(PlatformBase):
    name = "discord"
    max_message_chars = 1800
    capabilities = frozenset(Capability)
    guild_ready_timeout = 2.0  # how long discord.py waits for more guilds after READY
    typing_interval = 8.0  # Discord shows "typing" for ten seconds: say it again before

    def __init__(
        self,
        *,
        bot: str,
        bot_name: str,
        config: DiscordConfig,
        secrets: Secrets,
        monitors: MonitorStore,
        schedules: SchedulesCommand | None = None,
        generate: GenerateCommand | None = None,
        authorized_roles: Sequence[str] = (),
        activity: ActivityLink | None = None,
    ) -> None:
        """``generate``: what ``/generate`` runs; without it the command is not offered."""
        self.config = config
        self.cache = HistoryCache(max_channels=config.history_cache_channels)
        self.members = MemberCache(max_entries=_MEMBER_CACHE)
        self.history_fetches = 0
        self._bot = bot
        self._bot_name = bot_name
        self._token = secrets.get(config.token_env) or ""
        self._monitors = monitors
        self._schedules = schedules
        self._generate = generate
        self.progress_board = ProgressBoard(config.progress_interval)
        self._activity = activity
        self._authorized_roles = set(authorized_roles)
        self._client: AnyClient | None = None
        self.attachments = AttachmentLoader(config)
        self._runner: asyncio.Task[None] | None = None
        self._sink: EventSink | None = None
        self._monitored: set[str] = set()  # shared with who reads and who changes it
        self._people = People(
            me=lambda: self._client.user if self._client else None,
            bot_name=bot_name,
            members=self.members,
            monitored=self._monitored,
        )
        self._channels = Channels(config, lambda: self._client)
        self._webhooks: dict[int, discord.Webhook] = {}
        self.connection = TaskState("Discord connection")
        self._stopping = False
        self._start_failure: asyncio.Future[BaseException] | None = None  # set by start()
        self._told = Once()  # send permission problems, logged once per channel
        self._typing_told = Once()
        self._pins: OrderedDict[str, list[Message]] = OrderedDict()  # oldest first
        self._ranges: OrderedDict[tuple[str, str, int], list[Message]] = OrderedDict()
        self.ready = asyncio.Event()
        self._introduced = False  # application info read and commands registered
        self.open_prompts = 0
        self._prompts_changed = asyncio.Condition()

    @property
    def client(self) -> AnyClient:
        if self._client is None:
            raise PlatformError("Discord is not started")
        return self._client

    def link(self, message: Message) -> str | None:
        return message_link(message)

    @property
    def connected(self) -> bool:
        client = self._client
        return client is not None and client.is_ready() and not client.is_closed()

    @property
    def self_participant(self) -> Participant:
        return self._people.myself()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, sink: EventSink) -> None:
        """Connect; a refused token or a first connection that fails is a PlatformError.
        From then on the connection is supervised: should discord.py's client end anyway
        (its own reconnects failed), it is logged and a new client connects."""
        self._sink = sink
        self._monitored.clear()
        self._monitored |= await self._monitors.monitored(self._bot)
        self._monitored |= {f"discord:{c}" for c in self.config.monitored_channels}
        await self.attachments.open()
        self._stopping = False
        self._start_failure = asyncio.get_running_loop().create_future()
        work = supervise(
            "Discord connection",
            self._connect,
            state=self.connection,
            finished=lambda: self._stopping,
        )
        self._runner = asyncio.create_task(work, name="discord")
        failed = self._start_failure
        ready = asyncio.ensure_future(self.ready.wait())
        waiting: set[asyncio.Future[Any]] = {ready, failed}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if failed.done():
            ready.cancel()
            await self.stop()
            error = failed.result()
            if isinstance(error, discord.LoginFailure):
                raise PlatformError("Discord refused the token (check the bot token)") from error
            raise PlatformError(f"Discord connection failed: {error}") from error

    async def _connect(self) -> None:
        """One client's life. Objects of an earlier client (channels, webhooks) go with it."""
        self._channels.clear()
        self._webhooks.clear()
        client = self._client = build_client(self)
        try:
            await client.start(self._token)
        except Exception as exc:
            first = self._start_failure
            if first is not None and not first.done():
                first.set_result(exc)  # start() says it, once
            raise
        finally:
            if not client.is_closed():
                await client.close()
        if not self._stopping:
            raise PlatformError("the Discord client stopped by itself")
        # stopping: return, and the supervision ends with it

    async def stop(self) -> None:
        self._stopping = True
        if self._client is not None:
            await self._client.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._runner, 10)
            self._runner = None
        self.progress_board.close()
        await self.attachments.close()

    async def _on_ready(self, client: AnyClient) -> None:
        self.cache.forget()
        if not self._introduced:  # a reconnect needs neither again
            await self._introduce(client)
            self._introduced = True
        self.ready.set()

    async def _introduce(self, client: AnyClient) -> None:
        """Once per process: say who the bot is, check its intents, register commands.
        discord.py read the application at login; it is asked again only if it did not."""
        app = client.application or await client.application_info()
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

    # -- people and messages ----------------------------------------------------------

    async def _on_message(self, message: discord.Message) -> None:
        if not is_conversation(message):
            return  # a pin notice, a join, a boost: nothing anyone said
        self._channels.remember(message.channel)
        converted = self._people.convert(message)
        self.cache.added(converted)
        if self._sink is not None:
            await self._sink(MessageEvent(converted))

    def _on_edit(self, message: discord.Message) -> None:
        channel_id = str(message.channel.id)
        if is_conversation(message):
            self.cache.edited(self._people.convert(message))
        self._channel_changed(channel_id, [str(message.id)], pinned=message.pinned)

    def _on_delete(self, channel_id: str, message_ids: list[str]) -> None:
        self.cache.deleted(channel_id, message_ids)
        self._channel_changed(channel_id, message_ids)

    def _on_pins_changed(self, channel_id: str) -> None:
        self._pins.pop(channel_id, None)

    def _on_reaction(self, payload: discord.RawReactionActionEvent, *, added: bool) -> None:
        if payload.member is not None:
            self.members.remember(payload.member)
        channel_id, message_id = str(payload.channel_id), str(payload.message_id)
        self.cache.reacted(channel_id, message_id, str(payload.emoji), added=added)

    def _on_disconnect(self) -> None:
        self.cache.forget()  # events may be missed until we are back
        self._pins.clear()
        self._ranges.clear()

    def _channel_changed(self, channel_id: str, ids: list[str], *, pinned: bool = False) -> None:
        """An edit or deletion: ``.history`` stretches of the channel are stale, and its
        pins when the message is (or was) one of them."""
        pins = self._pins.get(channel_id)
        if pinned or (pins is not None and any(m.id in ids for m in pins)):
            self._pins.pop(channel_id, None)
        for key in [k for k in self._ranges if k[0] == channel_id]:
            del self._ranges[key]

    # -- outgoing --------------------------------------------------------------------

    async def send(
        self,
        channel: ChannelRef,
        text: str,
        *,
        files: Sequence[Attachment] = (),
        note: bool = False,
    ) -> Message:
        """Images go in embeds (an attachment each, titled and linked), ten to a message."""
        target = await self._channels.get(channel)
        content = to_discord_mentions(text, self._known_people(channel, target))
        batches: list[FileBatch | None] = [*file_batches(files)] or [None]
        first = await self._post(channel, target, content, batches[0], silent=note)
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
    ) -> Message:
        nonce = _nonce()
        action = f"post in {where(target)}"
        extra: dict[str, Any] = {"embeds": list(batch.embeds)} if batch and batch.embeds else {}

        def attempt() -> Awaitable[discord.Message]:
            uploads = batch.uploads() if batch is not None else []  # fresh for each try
            return target.send(content, files=uploads, nonce=nonce, silent=silent, **extra)

        try:
            sent = await self._retrying(attempt)
        except discord.Forbidden as exc:
            error = refusal(action, exc, needs=_SEND)
            self._tell_once(channel, str(error))
            raise error from exc
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            raise refusal(action, exc, needs=_SEND) from exc
        return (await self._people.converted([sent]))[0]

    async def _retrying(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call``, tried again (at most ``send_retries`` times) after a failure worth
        another try; the last failure is raised as it came. A retried send keeps its
        nonce, so Discord shows it once."""
        delay = 1.0
        for tries in range(self.config.send_retries, -1, -1):
            try:
                return await call()
            except (discord.DiscordException, *NETWORK_ERRORS) as exc:
                wait = self._wait_before_again(exc, delay)
                if wait is None or tries == 0:
                    raise
                logger.warning("Discord: send failed (%s); retrying in %.1fs", exc, wait)
                await asyncio.sleep(wait)
                delay = min(delay * 2, self.config.discord_backoff_max)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _wait_before_again(self, exc: BaseException, backoff: float) -> float | None:
        """Seconds to wait before trying again after ``exc``, or None not to: a server or
        network error backs off; a 429 that discord.py did not wait out (one without
        Discord's ``Via`` header, which it takes for a Cloudflare ban) waits its
        Retry-After, unless that is more than ``rate_limit_wait_max``."""
        if isinstance(exc, (discord.DiscordServerError, *NETWORK_ERRORS)):
            return backoff
        wait = retry_after(exc)
        if wait is None or wait > self.config.rate_limit_wait_max:
            return None
        return wait

    async def progress(
        self, channel: ChannelRef, key: str, text: str, *, done: bool = False
    ) -> None:
        """One silent message per job, edited as reports come (at most every
        ``progress_interval`` seconds) and once more at its end."""

        async def post(first: str) -> discord.Message:
            target = await self._channels.get(channel)
            with translated(f"post progress in {where(target)}", needs=_SEND):
                return await target.send(first[: self.max_message_chars], silent=True)

        await self.progress_board.report(key, text[: self.max_message_chars], done=done, post=post)

    def _known_people(self, channel: ChannelRef, target: object) -> dict[str, str]:
        """Lower-cased names to ids: the guild's known members and who spoke recently."""
        known: dict[str, str] = {}
        guild = getattr(target, "guild", None)
        if guild is not None:
            for name, user_id in self.members.names(guild.id).items():
                known.setdefault(name.lower(), str(user_id))
        for message in self.cache.get(channel.id, 1, everything=True) or ():
            for person in (message.author, *message.mentions):
                known.setdefault(person.name.lower(), person.id)
        return known

    def _tell_once(self, channel: ChannelRef, problem: str) -> None:
        if self._told.first(channel.key):
            logger.error("%s (the bot needs: %s)", problem, ", ".join(permission_names()))

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        """The dot message through a webhook named after the bot (a thread's through its
        parent's); where there is none, or it fails, as a plain message."""
        target = await self._channels.get(channel)
        body = text[: self.max_message_chars]
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
        nonce = _nonce()
        with translated(f"post the tool log in {where(target)}", needs=_SEND):
            await self._retrying(lambda: target.send(body, nonce=nonce))

    async def _webhook(self, channel: discord.TextChannel) -> discord.Webhook:
        if channel.id not in self._webhooks:
            hooks = [h for h in await channel.webhooks() if h.name == self._bot_name and h.token]
            hook = hooks[0] if hooks else await channel.create_webhook(name=self._bot_name)
            self._webhooks[channel.id] = hook
        return self._webhooks[channel.id]

    # -- history -----------------------------------------------------------------------

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._with_files(await self._history(channel, limit))

    async def _with_files(self, messages: Sequence[Message]) -> list[Message]:
        loaded = await self.attachments.load(messages)
        for before, after in zip(messages, loaded, strict=True):
            if after is not before:
                self.cache.edited(after)  # downloaded once, kept with the cached message
        return loaded

    async def _history(self, channel: ChannelRef, limit: int) -> Sequence[Message]:
        cached = self.cache.get(channel.id, limit)
        if cached is not None:
            return cached
        target = await self._channels.get(channel)
        depth = limit + _FETCH_MARGIN
        short = self.cache.short(channel.id)
        if short is not None:  # deletions used up the margin: fetch only what is missing
            oldest, known = short
            older = await self._fetch(target, depth - known, before=int(oldest))
            self.cache.extend_older(channel.id, older, depth)
            return self.cache.get(channel.id, limit) or []
        fetched = await self._fetch(target, depth)
        opens_with_history = bool(fetched) and fetched[0].text.startswith(".history")
        if isinstance(target, discord.Thread) and len(fetched) < depth and not opens_with_history:
            fetched = [*await self._before_thread(target, depth - len(fetched)), *fetched]
        if self._channels.hears(target):
            self.cache.fill(channel.id, fetched, depth)
        return fetched[-limit:]

    async def serves(self, channel: ChannelRef) -> bool:
        """Whether this process acts in ``channel`` on its own (see ``Channels.serves``)."""
        return await self._channels.serves(channel)

    async def _fetch(
        self, target: discord.abc.Messageable, limit: int, *, before: int | None = None
    ) -> list[Message]:
        """Up to ``limit`` messages (before the id ``before``), oldest first."""
        self.history_fetches += 1
        until = discord.Object(id=before) if before is not None else None
        with translated(f"read the history of {where(target)}", needs=_HISTORY):
            raw = [m async for m in target.history(limit=limit, before=until)]
        return (await self._people.converted(raw))[::-1]

    async def _before_thread(self, thread: discord.Thread, limit: int) -> list[Message]:
        """The parent channel up to and including the message the thread branched from."""
        parent = thread.parent
        if not isinstance(parent, discord.TextChannel):
            return []  # a forum post has no messages before it
        # A thread's id is its starter message's: the parent up to and including it.
        return await self._fetch(parent, limit, before=thread.id + 1)

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
            target = await self._channels.get(ChannelRef("discord", channel_id))
            found = await self._fetch_until(target, message_id, limit)
            if not self._channels.hears(
                target
            ):  # no edit or deletion of it would drop a stale copy
                return await self._with_files(found)
            self._ranges[key] = found
            while len(self._ranges) > _RANGE_CACHE:
                self._ranges.popitem(last=False)
        self._ranges.move_to_end(key)
        return await self._with_files(self._ranges[key])

    async def _fetch_until(
        self, target: discord.abc.Messageable, message_id: str, limit: int
    ) -> list[Message]:
        self.history_fetches += 1
        with translated(f"read message {message_id} in {where(target)}", needs=_HISTORY):
            last = await target.fetch_message(int(message_id))
            before = discord.Object(id=int(message_id))
            older = [m async for m in target.history(limit=limit - 1, before=before)]
        return await self._people.converted([*reversed(older), last])

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        own = await self._pins_of(channel.id)
        if channel.parent_id is None:
            return own
        return [*await self._pins_of(channel.parent_id), *own]

    async def _pins_of(self, channel_id: str) -> list[Message]:
        """A channel's pins, oldest first; kept until a pin, or an edit or deletion of a
        pinned message. An unreadable list is not kept: the next activation asks again."""
        if channel_id not in self._pins:
            target = await self._channels.get(ChannelRef("discord", channel_id))
            with translated(f"read the pins of {where(target)}", needs=_HISTORY):
                raw = [m async for m in target.pins(limit=None)]
            found = sorted(await self._people.converted(raw), key=lambda m: int(m.id))
            if not self._channels.hears(target):
                return found
            self._pins[channel_id] = found
            while len(self._pins) > self.config.history_cache_channels:
                self._pins.popitem(last=False)
        return self._pins[channel_id]

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        """Walk replies back, at most ``reply_chain_max_depth``; the cache first, then REST."""
        target = await self._channels.get(message.channel)
        known = {m.id: m for m in self.cache.get(message.channel.id, 1, everything=True) or ()}
        chain: list[Message] = []
        seen = {message.id}
        current = message
        while current.reply_to_id and len(chain) < self.config.reply_chain_max_depth:
            if current.reply_to_id in seen:
                break  # a cycle: stop
            found = known.get(current.reply_to_id) or await self._replied(
                target, current.reply_to_id
            )
            if found is None:
                break  # deleted or out of reach: the chain ends here
            seen.add(found.id)
            chain.append(found)
            current = found
        return chain[::-1]

    async def _replied(self, target: discord.abc.Messageable, message_id: str) -> Message | None:
        with translated(f"read message {message_id} in {where(target)}", needs=_HISTORY):
            try:
                fetched = await target.fetch_message(int(message_id))
            except discord.NotFound:
                return None
        converted = await self._people.converted([fetched])
        return converted[0] if converted else None

    # -- other abilities ---------------------------------------------------------------

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        target = await self._channels.get(channel)
        with translated(f"delete a message in {where(target)}", needs="Manage Messages"):
            await target.get_partial_message(int(message_id)).delete()  # type: ignore[attr-defined]

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        target = await self._channels.get(channel)
        with translated(f"react in {where(target)}", needs="Add Reactions"):
            await target.get_partial_message(int(message_id)).add_reaction(emoji)  # type: ignore[attr-defined]

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        """Who spoke recently, and the members discord.py knows can see the channel."""
        target = await self._channels.get(channel)
        guild = getattr(target, "guild", None)
        names = {m.author.name for m in self.cache.get(channel.id, 1, everything=True) or ()}
        names |= {self._people.person(m, guild).name for m in getattr(target, "members", ())}
        return sorted(names)

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        """Typing shows at once and is said again until the context ends. A failure costs
        only the indicator: it is logged once per channel and the answer goes on."""
        keeper: asyncio.Task[None] | None = None
        try:
            target = await self._channels.get(channel)
            await self._show_typing(target)
            keeper = asyncio.create_task(
                self._keep_typing(channel, target), name=f"typing {channel.key}"
            )
        except PlatformError as exc:
            self._typing_failed(channel, exc)
        try:
            yield
        finally:
            if keeper is not None:
                keeper.cancel()
                await asyncio.gather(keeper, return_exceptions=True)

    async def _keep_typing(self, channel: ChannelRef, target: discord.abc.Messageable) -> None:
        try:
            while True:
                await asyncio.sleep(self.typing_interval)
                await self._show_typing(target)
        except PlatformError as exc:
            self._typing_failed(channel, exc)

    async def _show_typing(self, target: discord.abc.Messageable) -> None:
        with translated(f"show typing in {where(target)}", needs=_SEND):
            await target.typing()

    def _typing_failed(self, channel: ChannelRef, exc: PlatformError) -> None:
        if self._typing_told.first(channel.key):
            logger.warning("%s; answering without the typing indicator", exc)

    # -- approvals ---------------------------------------------------------------------

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        """Approve / Cancel buttons on a silent message (Salon's own words); only the
        requester or a member of an authorized role (by name or id) may press them."""
        target = await self._channels.get(channel)
        roles = set(request.authorized_roles) | self._authorized_roles

        def may_answer(interaction: discord.Interaction) -> bool:
            who = self._people.person(interaction.user, interaction.guild)
            return who.id == request.requester.id or bool(roles & set(who.roles))

        prompt = ButtonPrompt(
            may_answer=may_answer,
            name_of=lambda interaction: (
                self._people.person(interaction.user, interaction.guild).name
            ),
            refusal=f"Only {request.requester.name} can answer this.",
            timeout=request.timeout,
        )
        text = f"{self._bot_name} wants to run {request.description}. Allow?"
        nonce = _nonce()
        with translated(f"ask for approval in {where(target)}", needs=_SEND):
            asked = await self._retrying(
                lambda: target.send(text, view=prompt, silent=True, nonce=nonce)
            )
        async with self._prompts_changed:
            self.open_prompts += 1
            self._prompts_changed.notify_all()
        try:
            decision = await prompt.answer
        finally:
            self.open_prompts -= 1
        if decision.answer is Approval.TIMEOUT:
            await self._close_unanswered(asked, text)
        return decision

    async def _close_unanswered(self, asked: discord.Message, text: str) -> None:
        """Take the buttons off a prompt nobody answered, so nobody presses them later."""
        try:
            await asked.edit(content=f"{text}\nNo answer in time.", view=None)
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            logger.warning("Discord: could not close an unanswered approval prompt: %s", exc)

    async def wait_prompts(self, count: int = 1) -> None:
        """Wait until ``count`` approval prompts are open and clickable."""
        async with self._prompts_changed:
            await self._prompts_changed.wait_for(lambda: self.open_prompts >= count)

    # -- slash commands -----------------------------------------------------------------

    def _register_commands(self, tree: app_commands.CommandTree[Any]) -> None:
        # What changes the bot for everyone in a channel is offered to those who may manage
        # it; server admins can give it to others in Discord's Integrations settings.
        @tree.command(name="monitor", description="Read and answer every message here")
        @app_commands.default_permissions(manage_channels=True)
        async def monitor(interaction: discord.Interaction) -> None:
            await self._set_monitor(interaction, on=True)

        @tree.command(name="unmonitor", description="Stop reading every message here")
        @app_commands.default_permissions(manage_channels=True)
        async def unmonitor(interaction: discord.Interaction) -> None:
            await self._set_monitor(interaction, on=False)

        @tree.command(name="ask", description="Ask the bot one question")
        async def ask(interaction: discord.Interaction, question: str) -> None:
            await self._ask(interaction, question)

        if self._generate is not None:
            self._register_generate(tree)

        @tree.command(name="schedules", description="List this channel's schedules, or cancel one")
        async def schedules(interaction: discord.Interaction, cancel: int | None = None) -> None:
            channel = channel_ref(interaction.channel)
            if self._schedules is None:
                await interaction.response.send_message("Schedules are off.", ephemeral=True)
                return
            text = await self._schedules(
                channel,
                f"cancel {cancel}" if cancel else "",
                requester=None if self._steers(interaction) else self._asker(interaction),
                others="members with Manage Channels" + self._in_roles(),
            )
            await interaction.response.send_message(text[:1900], ephemeral=True)

        @tree.command(name="activity", description="A short-lived link to the activity page")
        async def activity(interaction: discord.Interaction) -> None:
            await interaction.response.send_message(
                self._activity_answer(interaction), ephemeral=True
            )

    def _asker(self, interaction: discord.Interaction) -> Participant:
        return self._people.person(interaction.user, interaction.guild)

    def _steers(self, interaction: discord.Interaction) -> bool:
        """Whether who used a command may change the bot for others (cancel anyone's
        schedule): in a server, a member with Manage Channels there who holds one of the
        authorized roles when the bot has them; in DMs, nobody."""
        if interaction.guild is None or not interaction.permissions.manage_channels:
            return False
        return not self._lacks_role(interaction)

    def _lacks_role(self, interaction: discord.Interaction) -> bool:
        """In a server, when the bot has authorized roles: whether the member holds none."""
        if interaction.guild is None or not self._authorized_roles:
            return False
        return not set(self._asker(interaction).roles) & self._authorized_roles

    def _in_roles(self) -> str:
        if not self._authorized_roles:
            return ""
        return f" in the authorized roles ({', '.join(sorted(self._authorized_roles))})"

    def _activity_answer(self, interaction: discord.Interaction) -> str:
        """Only members of an authorized role get a link (it opens every bot's traces)."""
        if self._activity is None:
            return "The activity page is not served for this bot."
        if not self._authorized_roles:
            return "No role may open the activity page: the bot's authorized_roles is empty."
        roles = set(self._people.person(interaction.user, interaction.guild).roles)
        if not roles & self._authorized_roles:
            return "Only members of the authorized roles can open the activity page."
        return self._activity()[:1900]

    def _register_generate(self, tree: app_commands.CommandTree[AnyClient]) -> None:
        @tree.command(name="generate", description="Draw an image (ComfyUI)")
        @app_commands.describe(
            prompt="what to draw",
            width="pixels (default: the workflow's)",
            height="pixels (default: the workflow's)",
            seed="the same seed and prompt draw the same image",
        )
        async def generate(
            interaction: discord.Interaction,
            prompt: app_commands.Range[str, 1, 2000],
            width: app_commands.Range[int, 64, 8192] | None = None,
            height: app_commands.Range[int, 64, 8192] | None = None,
            seed: app_commands.Range[int, 0, 2**53] | None = None,
        ) -> None:
            wanted = {"prompt": prompt, "width": width, "height": height, "seed": seed}
            given = {k: v for k, v in wanted.items() if v is not None}
            await self._run_generate(interaction, given)

    async def _run_generate(
        self, interaction: discord.Interaction, arguments: dict[str, Any]
    ) -> None:
        """Answered at once (privately); the tool's approval, progress and image follow in
        the channel like any tool call's; the private answer then says how it went."""
        assert self._generate is not None
        await interaction.response.send_message(
            f"Generating: {arguments['prompt'][:1800]}", ephemeral=True
        )
        self._channels.remember(interaction.channel)
        channel = channel_ref(interaction.channel)
        who = self._people.person(interaction.user, interaction.guild)
        try:
            said = await self._generate(channel, who, arguments)
        except Exception:  # the command's boundary: one line to the person, the rest logged
            logger.exception("Discord: /generate failed in %s", channel.key)
            said = "The image could not be generated; the reason is in Salon's log."
        try:
            await interaction.edit_original_response(content=said[:1900])
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            logger.warning("Discord: could not answer /generate: %s", exc)

    async def _set_monitor(self, interaction: discord.Interaction, *, on: bool) -> None:
        """Discord offers the command to who may manage the channel (or whom the server's
        admins chose); Salon asks for an authorized role as well, when the bot has them."""
        if self._lacks_role(interaction):
            roles = ", ".join(sorted(self._authorized_roles))
            await interaction.response.send_message(
                f"Only members of the authorized roles ({roles}) can change what "
                f"{self._bot_name} reads here.",
                ephemeral=True,
            )
            return
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
            author=self._people.person(interaction.user, interaction.guild),
            text=question,
            created_at=interaction.created_at,
            mentions=(self.self_participant,),
        )
        if self._sink is not None:
            await self._sink(MessageEvent(_tagged(message, Tag.ASKED)))


def _nonce() -> int:
    """A send's nonce: Discord drops a repeat with the same one."""
    return uuid.uuid4().int % (1 << 63)


def _tagged(message: Message, tag: Tag) -> Message:
    return replace(message, tags=message.tags | {tag})
