"""Who a tool call runs for and where (``Caller``): built once per call by the tool runner,
never from the model's arguments.

A native tool takes it as a parameter annotated ``Caller`` (``salon.tools.native``). Two
places still carry it as plain arguments (``CALLER_ARGUMENTS``): an MCP server whose
``ServerSpec.hidden_arguments`` name some of them gets those filled in, and a native set
served over MCP (``salon tools serve``) reads them from its client, since an MCP call
carries nothing else. There the roles are one comma-separated string.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from salon.errors import ToolError
from salon.model import ChannelRef, Participant

__all__ = ["CALLER_ARGUMENTS", "Caller"]

CALLER_ARGUMENTS: dict[str, tuple[type, object]] = {
    "channel": (str, ""),
    "requester_id": (str, ""),
    "requester_name": (str, ""),
    "requester_roles": (str, ""),
    "requester_identity": (str, ""),
    "channel_guild": (str, ""),
    "channel_direct": (bool, False),
    "channel_name": (str, ""),
    "message_id": (str, ""),
}
"""The caller as plain arguments: each name, its type and its value when not given."""


@dataclass(frozen=True, slots=True)
class Caller:
    """The channel a call was made in (None: none, as for ``salon tools serve`` without
    one), the person it runs for with their roles and identity (for an answer to several
    people, ``activation.joint``: no id, the roles all hold) and the message it answers."""

    channel: ChannelRef | None = None
    requester: Participant = field(default_factory=lambda: Participant("", ""))
    message_id: str = ""

    @property
    def channel_key(self) -> str:
        return self.channel.key if self.channel is not None else ""

    @property
    def platform(self) -> str:
        return self.channel.platform if self.channel is not None else ""

    def asked_in(self) -> ChannelRef:
        """The channel the call was made in; a tool error the model reads when none."""
        if self.channel is None:
            raise ToolError("channel is required (e.g. terminal:local or irc:#salon)")
        return self.channel

    def arguments(self) -> dict[str, object]:
        """The caller as ``CALLER_ARGUMENTS``."""
        where, who = self.channel, self.requester
        return {
            "channel": self.channel_key,
            "requester_id": who.id,
            "requester_name": who.name,
            "requester_roles": ",".join(who.roles),
            "requester_identity": who.identity,
            "channel_guild": (where.guild_id if where else None) or "",
            "channel_direct": where.is_direct if where else False,
            "channel_name": where.name if where else "",
            "message_id": self.message_id,
        }

    @classmethod
    def from_arguments(cls, given: Mapping[str, object]) -> Caller:
        """The caller an MCP client described with ``CALLER_ARGUMENTS`` (any left out are
        empty)."""
        text = {k: str(given.get(k) or "") for k in CALLER_ARGUMENTS}
        channel = None
        if text["channel"]:
            platform, _, channel_id = text["channel"].partition(":")
            channel = ChannelRef(
                platform,
                channel_id,
                name=text["channel_name"],
                is_direct=bool(given.get("channel_direct")),
                guild_id=text["channel_guild"] or None,
            )
        roles = tuple(r for r in text["requester_roles"].split(",") if r)
        requester = Participant(
            text["requester_id"],
            text["requester_name"],
            roles=roles,
            identity=text["requester_identity"],
        )
        return cls(channel, requester, text["message_id"])
