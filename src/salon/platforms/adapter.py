"""What an adapter package gives the registry (``Adapter``), and what the app hands it to
build a platform (``BuildContext``): the bot's names, config and secrets, the store parts a
platform may use, and the bot's answers to the commands a platform offers.

Importing this module loads no platform library: an adapter imports its own in ``build``
and ``live_check``, so a bot loads only the libraries of the platforms it is on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from salon.config import BotConfig, PlatformsConfig, Secrets
from salon.model import ChannelRef, Participant
from salon.platforms.base import ChatLog, MonitorStore, Platform
from salon.platforms.notes import NotesBook

__all__ = [
    "ActivityLink",
    "Adapter",
    "BuildContext",
    "Commands",
    "Cursors",
    "GenerateCommand",
    "LiveCheck",
    "MonitorStore",
    "SchedulesCommand",
]

Section = TypeVar("Section")  # the adapter's model under ``platforms:`` (``DiscordConfig``, …)


class Cursors(Protocol):
    """Positions kept per bot by name (``SQLStore.delivery``)."""

    async def cursor(self, bot: str, name: str) -> str | None: ...

    async def save_cursor(self, bot: str, name: str, value: str) -> None: ...


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


@dataclass(frozen=True)
class Commands:
    """The bot's answers to the commands platforms offer (``salon.bot_commands.BotCommands``);
    ``generate`` is None when ``/generate`` is not offered."""

    schedules: SchedulesCommand
    generate: GenerateCommand | None
    activity: ActivityLink


@dataclass(frozen=True)
class BuildContext:
    """What a platform is built from. ``config`` is the bot's config at the build;
    ``current`` gives it as reloaded since (for what a platform reads while it runs)."""

    bot: str  # the bot's key
    config: BotConfig
    current: Callable[[], BotConfig]
    secrets: Secrets
    data_dir: Path
    chat_log: ChatLog
    monitors: MonitorStore
    cursors: Cursors
    commands: Commands
    memory: NotesBook | None


class LiveCheck(Protocol):
    """``salon check --live`` for one platform: the lines to print, and whether all is well."""

    async def __call__(
        self, config: BotConfig, secrets: Secrets, data_dir: Path
    ) -> tuple[list[str], bool]: ...


def _any_channel(section: object, channel_id: str) -> str | None:
    return None


@dataclass(frozen=True)
class Adapter(Generic[Section]):
    """One platform as the app and ``salon check`` know it: its ``name`` (its platform's
    ``name``, the channel keys' prefix), where its section is in ``platforms:``, how its
    platform is built (``unattended``: by ``salon run``; the terminal only by ``salon
    chat``), its live check, ``target_problem``: why a schedule may not post in one of its
    channels (the channel id after ``name:``), or None; and ``operated``: who writes there
    is the bot's operator (the terminal), as with ``salon tools call``."""

    name: str
    section: Callable[[PlatformsConfig], Section | None]
    build: Callable[[Section, BuildContext], Platform]
    live_check: LiveCheck | None = None
    target_problem: Callable[[Section, str], str | None] = _any_channel
    unattended: bool = True
    operated: bool = False

    def configured(self, config: BotConfig) -> bool:
        """Whether the bot's config puts it on this platform."""
        return self.section(config.platforms) is not None

    def platform(self, context: BuildContext) -> Platform | None:
        """The bot's platform here, when its config puts it here."""
        section = self.section(context.config.platforms)
        return None if section is None else self.build(section, context)

    def check_target(self, config: BotConfig, channel_id: str) -> str | None:
        """Why a schedule may not post in ``channel_id`` here, or None."""
        section = self.section(config.platforms)
        return None if section is None else self.target_problem(section, channel_id)
