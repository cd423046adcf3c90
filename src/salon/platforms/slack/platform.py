"""Slack through slack_bolt (async) in Socket Mode: ``SlackPlatform``, the adapter's
``Platform``. No public URL: the app opens a WebSocket to Slack (the app-level token) and
calls the Web API with the bot token. With ``mode: http`` Slack POSTs to a Request URL
instead (the Events API, ``receiver.py``), each request checked with the signing secret.

History stays on Slack (``reading.py``), threads are contexts of their own, pins are where
``.config`` is read, approvals are Block Kit buttons (``approvals.py``), ``/ask``,
``/monitor`` and ``/unmonitor`` are slash commands (``events.py``). Every failure of a call
to Slack leaves as a ``PlatformError`` naming Slack's error code.

Socket Mode delivers nothing again of what happened while the app had no connection: each
new connection after the first (its ``hello``) is a gap, which the agent reads back
(``messages_after``). Over HTTP there is none within the process: Slack retries a delivery
that failed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_bolt.authorization import AuthorizeResult
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.web.async_client import AsyncWebClient

from salon.config import Secrets
from salon.config.platforms import SlackConfig
from salon.errors import PlatformError
from salon.model import (
    ApprovalDecision,
    ApprovalRequest,
    Attachment,
    ChannelRef,
    Event,
    Message,
    Participant,
)
from salon.platforms.base import Capability, EventSink, MonitorStore, PlatformBase
from salon.platforms.monitored import Monitored
from salon.platforms.slack.access import Access
from salon.platforms.slack.approvals import Approvals
from salon.platforms.slack.client import build_web_client, call
from salon.platforms.slack.events import Events
from salon.platforms.slack.files import Images
from salon.platforms.slack.people import People, thread_of
from salon.platforms.slack.reading import Reader
from salon.platforms.slack.receiver import Receiver
from salon.platforms.slack.sending import Sender

__all__ = ["SlackPlatform"]

logger = logging.getLogger(__name__)

_CONNECT_TIMEOUT = 30.0


class SlackPlatform(PlatformBase):
    name = "slack"
    max_message_chars = 4000  # Slack's advice for one message's text
    capabilities = frozenset(
        {
            Capability.DELETE,
            Capability.PINS,
            Capability.REACTIONS,
            Capability.BUTTONS,
            Capability.DIRECT_MESSAGES,
        }
    )

    def __init__(
        self,
        *,
        bot: str,
        bot_name: str,
        config: SlackConfig,
        secrets: Secrets,
        monitors: MonitorStore,
        authorized_roles: Sequence[str] = (),
    ) -> None:
        self.config = config
        self.ready = asyncio.Event()
        self._bot = bot
        self._bot_token = secrets.get(config.bot_token_env) or ""
        self._app_token = secrets.get(config.app_token_env) or ""
        self._signing_secret = secrets.get(config.signing_secret_env) or ""
        self._monitored = Monitored(monitors, bot=bot, bot_name=bot_name)
        self._sink: EventSink | None = None
        self._web: AsyncWebClient | None = None
        self._handler: AsyncSocketModeHandler | None = None
        self._receiver: Receiver | None = None
        self.connections = 0  # Socket Mode connections opened (hello received)
        self._greeted_at: float | None = None  # when the newest connection said hello
        self._dropped_at: float | None = None  # when the connection was last lost
        self._people = People(
            client=self._client, bot_name=bot_name, monitored=self._monitored.keys
        )
        self._images = Images(
            token=self._bot_token,
            api_base_url=str(config.api_base_url) if config.api_base_url else None,
            max_images=config.image_budget,
            max_bytes=config.max_image_bytes,
        )
        self._reader = Reader(
            client=self._client,
            people=self._people,
            max_channels=config.history_cache_channels,
            images=self._images,
        )
        self._sender = Sender(
            client=self._client,
            people=self._people,
            reader=self._reader,
            max_chars=self.max_message_chars,
            interval=config.progress_interval,
        )
        self._access = Access(self._client)
        self._approvals = Approvals(
            bot_name=bot_name, authorized_roles=authorized_roles, sender=self._sender
        )
        self._events = Events(
            bot_name=bot_name,
            people=self._people,
            reader=self._reader,
            approvals=self._approvals,
            monitored=self._monitored,
            authorized_roles=authorized_roles,
            deliver=self._deliver,
            find=self._access.find,
        )

    def _client(self) -> AsyncWebClient:
        if self._web is None:
            raise PlatformError("Slack is not started")
        return self._web

    @property
    def self_participant(self) -> Participant:
        return self._people.me

    @property
    def connected(self) -> bool:
        if self._receiver is not None:
            return self._receiver.listening
        handler = self._handler
        return handler is not None and handler.client.current_session is not None

    @property
    def request_url(self) -> str:
        """In http mode, where Salon answers Slack's requests (behind the proxy)."""
        return self._receiver.url if self._receiver is not None else ""

    @property
    def handled(self) -> int:
        """Messages handed to the agent (each at most once, however often delivered)."""
        return self._events.handled

    @property
    def repeated(self) -> int:
        """Events Slack delivered again (a late acknowledgement), recognised and skipped."""
        return self._events.repeated

    async def wait_repeated(self) -> None:
        await self._events.repeat_seen.wait()

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, sink: EventSink) -> None:
        """Check the bot token (``auth.test``), then open the socket (the app token) or,
        in http mode, serve the Request URL; a missing or refused token is a
        PlatformError saying which."""
        missing = [e for e, v in self._tokens() if not v]
        if missing:
            raise PlatformError(f"Slack needs its tokens: set {', '.join(missing)}")
        self._sink = sink
        await self._monitored.load(f"slack:{c}" for c in self.config.monitored_channels)
        base = str(self.config.api_base_url) if self.config.api_base_url else None
        self._web = build_web_client(
            self._bot_token, base_url=base, wait_max=self.config.rate_limit_wait_max
        )
        me = await call("check the bot token (SLACK_BOT_TOKEN)", self._web.auth_test())
        self._people.introduce(str(me.get("user_id", "")), str(me.get("bot_id", "")))
        self._events.workspace = self._access.workspace = str(me.get("team_id", "")) or None
        who = AuthorizeResult(
            enterprise_id=None,
            team_id=str(me.get("team_id", "")),
            bot_user_id=self._people.me.id,
            bot_id=self._people.bot_id,
            bot_token=self._bot_token,
        )

        async def authorize(**_: Any) -> AuthorizeResult:
            """Who the app is, known from the check above: bolt asks for every event,
            and its own way would call auth.test again for each one that comes at once."""
            return who

        http = self.config.mode == "http"
        secret = self._signing_secret if http else None  # Socket Mode's are not signed
        app = AsyncApp(client=self._web, authorize=authorize, logger=logger, signing_secret=secret)
        self._events.register(app)
        app.event("member_joined_channel")(self._membership)
        app.event("member_left_channel")(self._membership)
        await (self._listen(app) if http else self._connect(app))
        self.ready.set()
        logger.info("Slack: connected as %s", me.get("user", "?"))

    async def _connect(self, app: AsyncApp) -> None:
        handler = self._handler = AsyncSocketModeHandler(app, self._app_token)
        handler.client.message_listeners.append(self._on_socket_message)
        self._greeted_at = self._dropped_at = None
        self._watch_reconnects(handler.client)
        try:
            await asyncio.wait_for(handler.connect_async(), _CONNECT_TIMEOUT)  # type: ignore[no-untyped-call]
        except Exception as exc:  # the SDK's own errors, or a timeout
            await self.stop()
            raise PlatformError(f"Slack Socket Mode did not connect: {exc}") from exc

    async def _listen(self, app: AsyncApp) -> None:
        config = self.config
        receiver = Receiver(app, address=config.address, path=config.path, serving=self._forget)
        self._receiver = receiver
        self.connection = receiver.state
        try:
            await receiver.start()
        except OSError as exc:
            await self.stop()
            reason = exc.strerror or str(exc)
            raise PlatformError(f"Slack: could not listen on {config.listen}: {reason}") from exc

    def _forget(self) -> None:
        """Events may have been missed while nothing listened: the history kept goes."""
        self._reader.forget()
        self._access.forget()

    def _watch_reconnects(self, client: SocketModeClient) -> None:
        """Note when the connection is lost. slack_sdk tells no one, but every way it
        reconnects (a close, a stale ping, Slack's ``disconnect``) goes through here."""
        reconnect = client.connect_to_new_endpoint

        async def reconnecting(force: bool = False) -> None:
            if self._dropped_at is None and (force or not await client.is_connected()):
                self._dropped_at = time.time()
            await reconnect(force=force)

        client.connect_to_new_endpoint = reconnecting  # type: ignore[method-assign]

    async def _on_socket_message(self, _: object, message: dict[str, Any], raw: object) -> None:
        """Each new connection says hello: events may have been missed while there was
        none, so the history kept is dropped, and after the first the agent reads back
        what was said in the gap."""
        if message.get("type") != "hello":
            return
        self._forget()
        self.connections += 1
        first = self._greeted_at is None
        # No loss noted: slack_sdk replaced the last connection itself, since its hello.
        since = self._dropped_at if self._dropped_at is not None else self._greeted_at
        self._greeted_at, self._dropped_at = time.time(), None
        if not first:
            logger.info("Slack: connected again; reading back what was missed")
            await self.gap_closed(since)

    async def _membership(self, event: dict[str, Any]) -> None:
        """Someone joined or left a channel the bot is in: who reads it is asked again."""
        self._access.changed(str(event.get("channel", "")))

    def _tokens(self) -> list[tuple[str, str]]:
        config = self.config
        if config.mode == "http":
            second = (config.signing_secret_env, self._signing_secret)
        else:
            second = (config.app_token_env, self._app_token)
        return [(config.bot_token_env, self._bot_token), second]

    async def stop(self) -> None:
        self.ready.clear()
        await self._images.close()
        if self._handler is not None:
            await self._handler.close_async()  # type: ignore[no-untyped-call]
            self._handler = None
        if self._receiver is not None:
            await self._receiver.stop()
            self._receiver = None

    async def _deliver(self, event: Event) -> None:
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
        """Into the thread when the context is one; files uploaded after the text (a
        link line each when that cannot be); ``key`` in the first message's metadata
        (see ``sent_before``). ``reply_to`` is ignored: Slack has no replies outside
        threads."""
        return await self._sender.send(channel, text, files=files, note=note, key=key)

    async def sent_before(self, channel: ChannelRef, key: str, *, note: str) -> bool | None:
        """Whether the bot posted the first message of an answer under ``key``: it went
        out with the key in its message metadata, which ``conversations.history`` (a
        thread: ``conversations.replies``) shows with ``include_all_metadata``. The newest
        100 messages of a channel are searched (a thread's first 1,000): an answer further
        back is taken as not shown, and given again. ``note`` is not posted here."""
        return await self._reader.sent(channel, key, by=self._people.me.id)

    async def progress(
        self, channel: ChannelRef, key: str, text: str, *, done: bool = False
    ) -> None:
        """One note per job, edited (``chat.update``) at most every ``progress_interval``."""
        await self._sender.progress(channel, key, text, done=done)

    async def send_tool_log(self, channel: ChannelRef, text: str) -> None:
        await self._sender.send(channel, text)

    async def send_direct(self, person: Participant, text: str) -> None:
        """Their DM with the bot (``conversations.open``: scope im:write), then the text."""
        await self._sender.direct(person.id, text)

    async def request_approval(
        self, channel: ChannelRef, request: ApprovalRequest
    ) -> ApprovalDecision:
        return await self._approvals.ask(channel, request)

    async def wait_prompts(self, count: int = 1) -> None:
        await self._approvals.wait_open(count)

    # -- reading ---------------------------------------------------------------------

    async def history(self, channel: ChannelRef, *, limit: int) -> Sequence[Message]:
        return await self._reader.history(channel, limit=limit)

    async def messages_after(
        self, channel: ChannelRef, after: str, *, limit: int
    ) -> Sequence[Message] | None:
        """The newest ``limit`` messages of the channel (or thread) newer than the message
        ``after``, oldest first, as their events would have handed them on; the
        conversation is looked up (``conversations.info``) for its kind and workspace."""
        channel_id, _ = thread_of(channel)
        raw = await self._reader.after(channel, after, limit=limit)
        if not raw:
            return []
        found = await self._access.find(channel_id)
        direct = found.is_direct if found is not None else channel.is_direct
        workspace = found.workspace_id if found is not None else None
        return await self._events.read_back(channel_id, raw, direct=direct, workspace=workspace)

    async def pinned(self, channel: ChannelRef) -> Sequence[Message]:
        return await self._reader.pinned(channel)

    async def find_channel(self, channel_id: str) -> ChannelRef | None:
        return await self._access.find(channel_id)

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """Whether ``person`` is a member of the conversation (``access.py``)."""
        return await self._access.can_read(person, channel)

    async def current_users(self, channel: ChannelRef) -> Sequence[str]:
        """Who spoke in what is cached of the channel."""
        return sorted({m.author.name for m in self._reader.cached(channel)})

    # -- other abilities ---------------------------------------------------------------

    async def delete_message(self, channel: ChannelRef, message_id: str) -> None:
        channel_id, _ = thread_of(channel)
        await call(
            "delete a message", self._client().chat_delete(channel=channel_id, ts=message_id)
        )

    async def react(self, channel: ChannelRef, message_id: str, emoji: str) -> None:
        channel_id, _ = thread_of(channel)
        name = _EMOJI_NAMES.get(emoji, emoji.strip(":"))
        request = self._client().reactions_add(channel=channel_id, timestamp=message_id, name=name)
        await call("react", request)


_EMOJI_NAMES = {
    "\U0001f501": "repeat",  # the agent's loop stop
    "\u26a0\ufe0f": "warning",  # a pinned .config skipped
    "\u2705": "white_check_mark",
    "\u274c": "x",
}
"""Slack reacts by emoji name; the few the agent uses by character, named."""
