"""Discord through discord.py: ``DiscordPlatform``, the adapter's ``Platform``.

History stays on Discord: it is fetched when an activation needs it, from a cache that the
gateway's create, edit, delete and reaction events keep exact, and that is dropped whenever
the connection drops. Monitored channels live in the store so ``/monitor`` survives restarts.
Every failure of a call to Discord leaves as a ``PlatformError`` that says what was refused.

The platform keeps the connection (a supervised discord.py client, ``client.py``) and hands
the rest to parts it owns: ``Events`` (what the gateway tells, the client's ``Handlers``),
``People`` (names, roles, messages converted), ``Channels`` (finding a channel), ``Reader``
(history, pins, reply chains), ``Sender`` (posts, tool logs, progress), ``Approvals``,
``TypingIndicator`` and ``Commands`` (the slash commands).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import discord

from salon.config import DiscordConfig, Secrets
from salon.errors import PlatformError, PlatformRefused
from salon.model import (
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Elicitation,
    ElicitationAnswer,
    Event,
    Message,
    Participant,
)
from salon.platforms.base import Capability, EventSink, MonitorStore, Place, PlatformBase
from salon.platforms.discord.access import Access
from salon.platforms.discord.approvals import Approvals
from salon.platforms.discord.attachments import AttachmentLoader
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.client import AnyClient, build_client
from salon.platforms.discord.commands import (
    ActivityLink,
    Commands,
    GenerateCommand,
    SchedulesCommand,
)
from salon.platforms.discord.convert import message_link
from salon.platforms.discord.events import Events
from salon.platforms.discord.members import MemberCache
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import INTENT_REFUSED, PERMISSIONS, invite_url
from salon.platforms.discord.questions import Questions
from salon.platforms.discord.reading import Reader
from salon.platforms.discord.refusals import translated, where
from salon.platforms.discord.sending import Sender
from salon.platforms.discord.showing import ProgressBoard, TypingIndicator
from salon.platforms.monitored import Monitored
from salon.platforms.notes import NotesBook, PeoplesMemory
from salon.tasks import TaskState, supervise

__all__ = ["PERMISSIONS", "DiscordPlatform", "GenerateCommand", "invite_url"]

logger = logging.getLogger(__name__)

_READY_WAIT = 60.0  # seconds sent_before waits for the connection, at start
_MEMBER_CACHE = 5000  # guild members whose names and roles are kept


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
        memory: NotesBook | None = None,
    ) -> None:
        """``generate``: what ``/generate`` runs; without it the command is not offered;
        ``memory``: the notes' rules, for ``/memory`` and ``/forget`` (offered with it)."""
        self.config = config
        self.cache = HistoryCache(max_channels=config.history_cache_channels)
        self.members = MemberCache(
            max_entries=_MEMBER_CACHE, held_by=authorized_roles, owner=self._owner_id
        )
        self.progress_board = ProgressBoard(config.progress_interval)
        self.attachments = AttachmentLoader(config)
        self.connection: TaskState = TaskState("Discord connection")
        self.ready = asyncio.Event()
        self.given_up = asyncio.Event()  # Discord refused the token or the intent, for good
        self._bot = bot
        self._token = secrets.get(config.token_env) or ""
        self._client: AnyClient | None = None
        self._runner: asyncio.Task[None] | None = None
        self._sink: EventSink | None = None
        self._stopping = False
        self._start_failure: asyncio.Future[BaseException] | None = None  # set by start()
        self._monitored = Monitored(monitors, bot=bot, bot_name=bot_name)
        # The parts, each owning its own state; they share the caches above, and reach
        # the current client only through People (the bot's user) and Channels.
        self._people = People(
            me=lambda: self._client.user if self._client else None,
            bot_name=bot_name,
            members=self.members,
            monitored=self._monitored.keys,
            owner=self._owner,
        )
        self._channels = Channels(config, lambda: self._client)
        self._access = Access(self._channels)
        self._reader = Reader(
            config=config,
            cache=self.cache,
            channels=self._channels,
            people=self._people,
            attachments=self.attachments,
        )
        self._sender = Sender(
            config=config,
            bot_name=bot_name,
            max_chars=self.max_message_chars,
            channels=self._channels,
            people=self._people,
            members=self.members,
            cache=self.cache,
            progress_board=self.progress_board,
        )
        self._approvals = Approvals(
            bot_name=bot_name,
            authorized_roles=authorized_roles,
            channels=self._channels,
            people=self._people,
            retrying=self._sender.retrying,
            operator=self._is_operator,
        )
        self._questions = Questions(
            channels=self._channels, people=self._people, retrying=self._sender.retrying
        )
        self._typing = TypingIndicator(self._channels, lambda: self.typing_interval)
        commands = Commands(
            bot_name=bot_name,
            monitored=self._monitored,
            schedules=schedules,
            generate=generate,
            activity=activity,
            authorized_roles=authorized_roles,
            people=self._people,
            channels=self._channels,
            cache=self.cache,
            deliver=self._deliver,
            memory=PeoplesMemory(memory, bot=bot) if memory is not None else None,
        )
        self._events = Events(
            cache=self.cache,
            members=self.members,
            people=self._people,
            channels=self._channels,
            reader=self._reader,
            commands=commands,
            deliver=self._deliver,
            ready=self.ready,
            gap=self.gap_closed,
        )

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
        """Connect; a refused token or intent, or a first connection that fails, is a
        PlatformError. From then on the connection is supervised: should discord.py's client
        end anyway (its own reconnects failed), it is logged and a new client connects;
        unless Discord refused the token or the Message Content intent, which no new client
        would change: then the connection ends with one line, and ``given_up`` is set."""
        self._sink = sink
        await self._monitored.load(f"discord:{c}" for c in self.config.monitored_channels)
        await self.attachments.open()
        self._stopping = False
        self.given_up.clear()
        self._start_failure = asyncio.get_running_loop().create_future()
        work = supervise(
            "Discord connection",
            self._connect,
            state=self.connection,
            finished=lambda: self._stopping or self.given_up.is_set(),
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
            refused = _refusal(error)
            if refused is not None:
                raise PlatformRefused(refused) from error
            raise PlatformError(f"Discord connection failed: {error}") from error
        self._start_failure = None  # started: a later failure is the supervision's to tell

    async def _connect(self) -> None:
        """One client's life. Objects of an earlier client (channels, webhooks) go with it."""
        self._channels.clear()
        self._sender.forget_webhooks()
        client = self._client = build_client(
            self._events, self.config, guild_ready_timeout=self.guild_ready_timeout
        )
        try:
            await client.start(self._token)
        except Exception as exc:
            first = self._start_failure
            refused = _refusal(exc)
            if first is not None and not first.done():
                first.set_result(exc)  # start() says it, once
            elif refused is not None:
                logger.error("%s; the bot stays off Discord until restarted", refused)
            if refused is None:
                raise
            self.connection.failed(refused)
            self.given_up.set()  # the supervision ends: another client would be refused
            return
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

    async def _deliver(self, event: Event) -> None:
        """To the agent, once started."""
        if self._sink is not None:
            await self._sink(event)

    # -- outgoing --------------------------------------------------------------------

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
        ``key`` is the first message's nonce (see ``sent_before``)."""
        return await self._sender.send(
            channel, text, files=files, note=note, key=key, reply_to=reply_to
        )

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """Discord shows no nonce on a fetched message, but a message created with a nonce
        this bot used in the last few minutes (``enforce_nonce``) comes back as the message
        made then, and nothing new is posted. So ``note`` goes out under ``key``: another
        message coming back is the one sent before. Past those minutes the note is posted
        and the answer comes again (at least once)."""
        await asyncio.wait_for(self.ready.wait(), _READY_WAIT)  # taken over at start
        return await self._sender.sent_before(channel, key, note=note)

    async def progress(
        self, channel: ChannelRef, key: str, text: str, *, done: bool = False
    ) -> None:
        """One silent message per job, edited as reports come (at most every
        ``progress_interval`` seconds) and once more at its end."""
        await self._sender.progress(channel, key, text, done=done)

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        """The dot message through a webhook named after the bot (a thread's through its
        parent's); where there is none, or it fails, as a plain message."""
        await self._sender.tool_log(channel, text)

    # -- reading ---------------------------------------------------------------------

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._reader.history(channel, limit=limit)

    async def history_until(self, link: str, *, limit: int) -> Sequence[Message] | None:
        return await self._reader.history_until(link, limit=limit)

    async def messages_after(
        self, channel: ChannelRef, after: str, *, limit: int
    ) -> Sequence[Message] | None:
        """The newest ``limit`` messages of the channel newer than ``after`` (one request:
        Discord's ids grow with time)."""
        return await self._reader.after(channel, after, limit=limit)

    async def mentions_after(self, since: float, *, limit: int) -> Sequence[Message] | None:
        """Discord's guild search for mentions of the bot since ``since``, where the
        application has the Message Content intent (the search needs it)."""
        if not self._events.content_intent:
            return None
        return await self._reader.mentions_after(since, limit=limit)

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        return await self._reader.pinned(channel)

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        return await self._reader.reply_chain(message)

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        return await self._access.find(channel_id)

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """``person``'s own View Channel and Read Message History there (``access.py``)."""
        return await self._access.can_read(person, channel)

    async def serves(self, channel: ChannelRef) -> bool:
        """Whether this process acts in ``channel`` on its own (see ``Channels.serves``)."""
        return await self._channels.serves(channel)

    # -- other abilities ---------------------------------------------------------------

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        target = await self._channels.get(channel)
        with translated(f"delete a message in {where(target)}", needs="Manage Messages"):
            await target.get_partial_message(int(message_id)).delete()  # type: ignore[attr-defined]

    async def send_direct(self, person: Participant, text: str) -> None:
        """The person's DM channel (Create DM: ``POST /users/@me/channels``, the one there is
        when it exists), then the message; a person who takes no DMs from the server's
        members is a ``PlatformError``."""
        client = self.client
        with translated("send a direct message"):
            channel = await client.create_dm(discord.Object(id=int(person.id)))
            await channel.send(text, allowed_mentions=discord.AllowedMentions.none())

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

    async def place(self, channel: ChannelRef) -> Place:
        """The guild's name (none in DMs) and the channel's topic (a thread's parent's)."""
        target = await self._channels.get(channel)
        guild = getattr(target, "guild", None)
        home = getattr(target, "parent", None) or target
        topic = getattr(home, "topic", None)
        return Place(guild.name if guild is not None else "", topic or "")

    @asynccontextmanager
    async def typing(self, channel: ChannelRef) -> AsyncIterator[None]:
        """Typing shows at once and is said again until the context ends (a failure
        costs only the indicator)."""
        async with self._typing.shown(channel):
            yield

    # -- approvals ---------------------------------------------------------------------

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        """Approve / Cancel buttons on a silent message (Salon's own words); only the
        requester or a member of an authorized role (by name or id) may press them (under
        ``ask_admin``: see ``ApprovalRequest``; the operator is the application's owner)."""
        return await self._approvals.ask(channel, request)

    async def elicit(self, channel: ChannelRef, request: Elicitation) -> ElicitationAnswer:
        """A tool server's question to the requester: buttons, or a form (a modal)."""
        return await self._questions.ask(channel, request)

    def _is_operator(self, user: discord.abc.User) -> bool:
        owner = self._owner()
        return owner is not None and user.id == owner.id

    def _owner_id(self) -> int | None:
        owner = self._owner()
        return owner.id if owner is not None else None

    def _owner(self) -> discord.abc.User | None:
        """The operator: who owns the bot's application (for a team's, the team's owner),
        as Discord reported it at login."""
        app = self._client.application if self._client else None
        if app is None:
            return None
        return app.team.owner if app.team else app.owner

    async def wait_questions(self, count: int = 1) -> None:
        """Wait until ``count`` tool servers' questions are open and clickable."""
        await self._questions.wait_open(count)

    async def wait_prompts(self, count: int = 1) -> None:
        """Wait until ``count`` approval prompts are open and clickable."""
        await self._approvals.wait_open(count)


def _refusal(error: BaseException) -> str | None:
    """What the operator must change, when Discord refused what only they can: the token,
    or the Message Content intent (the gateway's close 4014, Disallowed intent(s))."""
    if isinstance(error, discord.PrivilegedIntentsRequired):
        return INTENT_REFUSED
    if isinstance(error, discord.LoginFailure):
        return "Discord refused the token (check the bot token)"
    return None
