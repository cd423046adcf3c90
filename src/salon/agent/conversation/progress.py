"""A tool call's progress shown in its channel while it runs (``Platform.progress``)."""

from __future__ import annotations

import asyncio
import logging

from salon.model import ChannelRef
from salon.platforms.base import Platform

__all__ = ["ProgressRelay"]

logger = logging.getLogger("salon.agent.conversation.toolrunner")  # its lines kept their name

_PROGRESS_DRAIN = 10.0  # seconds the last progress report may take at a call's end


def _progress_text(name: str, progress: float, total: float | None, message: str | None) -> str:
    share = f"{progress / total:.0%}" if total else ""
    detail = f"{message} ({share})" if message and share else message or share or f"{progress:g}"
    return f"⏳ {name}: {detail}"


class ProgressRelay:
    """One call's progress on its way to the platform. ``report`` (the MCP callback) only
    notes the latest text: an in-process server waits for its callback, so a slow platform
    must never hold up the tool. One pump task shows reports one at a time; reports that
    arrive meanwhile are folded into the newest."""

    def __init__(self, platform: Platform, channel: ChannelRef, name: str, key: str) -> None:
        self._platform, self._channel, self._name, self._key = platform, channel, name, key
        self._latest = ""
        self._wake = asyncio.Event()
        self._closing = False
        self._pump: asyncio.Task[None] | None = None

    async def report(self, progress: float, total: float | None, message: str | None) -> None:
        self._latest = _progress_text(self._name, progress, total, message)
        self._wake.set()
        if self._pump is None and not self._closing:
            self._pump = asyncio.create_task(self._show(), name=f"progress {self._key}")

    async def _show(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            if not self._closing:
                await self._tell(self._latest, done=False)

    async def _tell(self, text: str, *, done: bool) -> None:
        try:
            await self._platform.progress(self._channel, self._key, text, done=done)
        except Exception:  # progress is a courtesy; the call goes on
            logger.exception("could not show the progress of %s", self._name)

    def abandon(self) -> None:
        if self._pump is not None:
            self._pump.cancel()

    async def finish(self, seconds: float, *, failed: bool) -> None:
        """Let the report being shown finish, then show the end (when anything was shown)."""
        if self._pump is None:
            return
        self._closing = True
        self._wake.set()
        try:
            await asyncio.wait_for(self._pump, _PROGRESS_DRAIN)
        except TimeoutError:
            logger.warning("progress of %s: the platform took too long", self._name)
        end = "failed" if failed else "done"
        await self._tell(
            f"{'⚠️' if failed else '✅'} {self._name}: {end} in {seconds:.0f} s", done=True
        )
