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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any, Protocol

import discord
from discord import app_commands

from salon.config import DiscordConfig, Secrets
from salon.errors import PlatformError
from salon.model import (
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
from salon.platforms.discord.approvals import Approvals
from salon.platforms.discord.attachments import AttachmentLoader
from salon.platforms.discord.cache import HistoryCache
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.client import AnyClient, build_client
from salon.platforms.discord.convert import (
    channel_ref,
    is_conversation,
    message_link,
)
from salon.platforms.discord.members import MemberCache
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import PERMISSIONS, invite_url
from salon.platforms.discord.reading import Reader
from salon.platforms.discord.refusals import (
    NETWORK_ERRORS,
    translated,
    where,
)
from salon.platforms.discord.sending import Sender
from salon.platforms.discord.showing import ProgressBoard, TypingIndicator
from salon.tasks import TaskState, supervise

__all__ = ["PERMISSIONS", "DiscordPlatform", "GenerateCommand", "invite_url"]

logger = logging.getLogger(__name__)

_MEMBER_CACHE = 5000  # guild members whose names and roles are kept


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
        )
        self._typing = TypingIndicator(self._channels)
        self.connection = TaskState("Discord connection")
        self._stopping = False
        self._start_failure: asyncio.Future[BaseException] | None = None  # set by start()
        self.ready = asyncio.Event()
        self._introduced = False  # application info read and commands registered

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
        self._sender.forget_webhooks()
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
        self._reader.changed(channel_id, [str(message.id)], pinned=message.pinned)

    def _on_delete(self, channel_id: str, message_ids: list[str]) -> None:
        self.cache.deleted(channel_id, message_ids)
        self._reader.changed(channel_id, message_ids)

    def _on_pins_changed(self, channel_id: str) -> None:
        self._reader.pins_changed(channel_id)

    def _on_reaction(self, payload: discord.RawReactionActionEvent, *, added: bool) -> None:
        if payload.member is not None:
            self.members.remember(payload.member)
        channel_id, message_id = str(payload.channel_id), str(payload.message_id)
        self.cache.reacted(channel_id, message_id, str(payload.emoji), added=added)

    def _on_disconnect(self) -> None:
        self.cache.forget()  # events may be missed until we are back
        self._reader.forget()

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
        return await self._sender.send(channel, text, files=files, note=note)

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

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        return await self._reader.pinned(channel)

    async def reply_chain(self, message: Message) -> Sequence[Message]:
        return await self._reader.reply_chain(message)

    @property
    def history_fetches(self) -> int:
        return self._reader.fetches

    async def serves(self, channel: ChannelRef) -> bool:
        """Whether this process acts in ``channel`` on its own (see ``Channels.serves``)."""
        return await self._channels.serves(channel)

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
        """Typing shows at once and is said again until the context ends (a failure
        costs only the indicator)."""
        async with self._typing.shown(channel, every=self.typing_interval):
            yield

    # -- approvals ---------------------------------------------------------------------

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        """Approve / Cancel buttons on a silent message (Salon's own words); only the
        requester or a member of an authorized role (by name or id) may press them."""
        return await self._approvals.ask(channel, request)

    async def wait_prompts(self, count: int = 1) -> None:
        """Wait until ``count`` approval prompts are open and clickable."""
        await self._approvals.wait_open(count)

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


def _tagged(message: Message, tag: Tag) -> Message:
    return replace(message, tags=message.tags | {tag})
