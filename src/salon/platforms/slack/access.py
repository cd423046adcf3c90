"""Who may read a Slack channel: for a linked context (``salon.agent.links``), the person
being answered must be a member of the linked conversation, as ``conversations.members``
lists them (scopes ``channels:read``, ``groups:read``). Public channels are held to the same
rule: Slack lets a workspace's full members browse them, but a guest only sees the channels
they are in, and a bot cannot tell a guest without another scope; membership is what can
be told. Anything that cannot be told (a channel the bot cannot see, a refused call) is
unreadable.

Members are kept per channel until Slack says someone joined or left it
(``member_joined_channel``, ``member_left_channel``, sent for channels the bot is in), a
new connection (events may have been missed), or ``_MEMBERS_SECONDS`` at most.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from slack_sdk.web.async_client import AsyncWebClient

from salon.errors import PlatformError
from salon.model import ChannelRef, Participant
from salon.platforms.slack.client import call
from salon.platforms.slack.people import thread_of

__all__ = ["Access"]

logger = logging.getLogger(__name__)

_MEMBERS_SECONDS = 30.0  # a channel's members are asked again after this
_CHANNELS = 256  # channels whose members are kept
_MEMBERS_MAX = 20_000  # members read of one channel; past this, the rest count as absent
_PAGE = 200  # Slack's advice for a page


class Access:
    def __init__(self, client: Callable[[], AsyncWebClient]) -> None:
        self._client = client
        self._members: OrderedDict[str, tuple[float, frozenset[str]]] = OrderedDict()
        self.workspace: str | None = None  # the bot's (auth.test), set at start

    async def find(self, channel_id: str) -> ChannelRef | None:
        """The conversation with this id (``C…``, ``G…``, ``D…``) as the bot sees it; of
        the bot's workspace unless it is a direct message or shared with another
        organization (Slack Connect)."""
        if channel_id[:1] not in ("C", "G", "D") or not channel_id.isalnum():
            return None
        try:
            found = await call(
                f"look channel {channel_id} up",
                self._client().conversations_info(channel=channel_id),
            )
        except PlatformError as exc:
            logger.info("Slack: %s", exc)
            return None
        info = found.get("channel") or {}
        name = str(info.get("name") or channel_id)
        alone = any(info.get(k) for k in ("is_ext_shared", "is_im", "is_mpim"))
        workspace = None if alone else self.workspace
        direct = bool(info.get("is_im"))
        return ChannelRef("slack", channel_id, name, is_direct=direct, workspace_id=workspace)

    def changed(self, channel_id: str) -> None:
        self._members.pop(channel_id, None)

    def forget(self) -> None:
        self._members.clear()

    async def can_read(self, person: Participant, channel: ChannelRef) -> bool:
        """Whether ``person`` is a member of the conversation (a thread: of its channel)."""
        if not person.id:
            return False
        channel_id, _ = thread_of(channel)
        members = await self._members_of(channel_id)
        return members is not None and person.id in members

    async def _members_of(self, channel_id: str) -> frozenset[str] | None:
        kept = self._members.get(channel_id)
        if kept is not None and time.monotonic() - kept[0] < _MEMBERS_SECONDS:
            self._members.move_to_end(channel_id)
            return kept[1]
        try:
            members = await self._fetch(channel_id)
        except PlatformError as exc:
            logger.warning("Slack: %s", exc)
            return None  # not kept: asked again next time
        self._members[channel_id] = (time.monotonic(), members)
        self._members.move_to_end(channel_id)
        while len(self._members) > _CHANNELS:
            self._members.popitem(last=False)
        return members

    async def _fetch(self, channel_id: str) -> frozenset[str]:
        """Every page of ``conversations.members`` (up to ``_MEMBERS_MAX``)."""
        found: set[str] = set()
        cursor = ""
        while len(found) < _MEMBERS_MAX:
            page = await call(
                f"read the members of {channel_id}",
                self._client().conversations_members(
                    channel=channel_id, limit=_PAGE, cursor=cursor or None
                ),
            )
            found |= {str(m) for m in page.get("members", [])}
            cursor = str((page.get("response_metadata") or {}).get("next_cursor") or "")
            if not cursor:
                break
        return frozenset(found)
