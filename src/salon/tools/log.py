"""The tool-use log: every call and result, one JSONL file per bot, channel and UTC hour.

Files are written before a result reaches the model (flushed and fsynced), never rewritten,
and kept. At start the recent files seed an in-memory cache; from then on the cache alone
answers which calls belong in a channel's context, and drops calls older than the oldest
message the context still holds.

A call whose reach someone answered later could not read is *sealed*: a line
``{"sealed": ...}`` after it says so, and from then on every request shows its placeholder,
whoever reads, so the channel's prompt prefix changes once, not with each reader.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from salon.model import Reach, Thought, ToolCall, ToolRecord, ToolResult, clean_text
from salon.tools.reach import derived

__all__ = ["ToolLog", "ToolRecord", "record_from", "record_line", "shortened"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_CACHE_PER_CHANNEL = 2000
_SEALS_KEPT = 100_000  # sealed calls remembered (each a short key)


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name).strip("._") or "_"


class ToolLog:
    def __init__(self, root: Path, bot: str) -> None:
        self.root = root / _safe(bot)
        self._cache: dict[str, deque[ToolRecord]] = {}
        self._sealed: OrderedDict[str, None] = OrderedDict()

    def path_for(self, channel: str, when: datetime) -> Path:
        return self.root / _safe(channel) / f"{when.astimezone(UTC):%Y-%m-%dT%H}.jsonl"

    def append(self, record: ToolRecord) -> None:
        """Write durably, then remember. Raises OSError if the disk refuses."""
        line = record_line(record)
        safe = clean_text(line)
        if safe is not line:  # a lone surrogate (no encoder takes it) is kept as U+FFFD,
            record = record_from(safe)  # and remembered as a restart reads it
        path = self.path_for(record.channel, record.time)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(safe + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        self._remember(record)

    def sealed(self, record: ToolRecord) -> bool:
        """Whether ``record`` is shown as its placeholder to everyone from now on."""
        return _seal_key(record) in self._sealed

    def seal(self, record: ToolRecord, now: datetime | None = None) -> None:
        """Show ``record`` as its placeholder to everyone from now on, after a restart
        too. A disk that refuses costs the seal, logged, never the answer."""
        key = _seal_key(record)
        if key in self._sealed:
            return
        self._keep_seal(key)
        line = json.dumps({"sealed": key}, ensure_ascii=False)
        path = self.path_for(record.channel, now or datetime.now(UTC))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
        except OSError:
            logger.exception("could not write a seal to the tool log of %s", record.channel)

    def _keep_seal(self, key: str) -> None:
        self._sealed[key] = None
        if len(self._sealed) > _SEALS_KEPT:
            self._sealed.popitem(last=False)

    def _remember(self, record: ToolRecord) -> None:
        queue = self._cache.setdefault(record.channel, deque(maxlen=_CACHE_PER_CHANNEL))
        queue.append(record)

    def seed(self, hours: float, now: datetime | None = None) -> int:
        """Load the files of the last ``hours`` into the cache; returns how many records."""
        if not self.root.is_dir() or hours <= 0:
            return 0
        cutoff = (now or datetime.now(UTC)) - timedelta(hours=hours)
        first_name = f"{cutoff:%Y-%m-%dT%H}.jsonl"
        loaded = 0
        for path in sorted(self.root.glob("*/*.jsonl")):
            if path.name < first_name:
                continue
            loaded += self._load(path, cutoff)
        return loaded

    def _load(self, path: Path, cutoff: datetime) -> int:
        count = 0
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                if line.startswith('{"sealed"'):
                    self._keep_seal(str(json.loads(line)["sealed"]))
                    continue
                record = derived(record_from(line))
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning("skipping bad tool-log line %s:%d: %s", path, number, exc)
                continue
            if record.time >= cutoff:
                self._remember(record)
                count += 1
        return count

    def for_channel(
        self, channel: str, oldest: datetime | None, result_chars: int | None = None
    ) -> list[ToolRecord]:
        """Cached calls of a channel, dropping those older than ``oldest`` for good; with
        ``result_chars``, each result cut to that many characters (the file and the cache
        keep it whole)."""
        queue = self._cache.get(channel)
        if not queue:
            return []
        if oldest is not None:
            while queue and queue[0].time < oldest:
                queue.popleft()
        if result_chars is None:
            return list(queue)
        return [shortened(record, result_chars) for record in queue]

    def channels(self) -> Sequence[str]:
        return list(self._cache)


def _seal_key(record: ToolRecord) -> str:
    return f"{record.time.isoformat()}|{record.call.id}"


def shortened(record: ToolRecord, chars: int) -> ToolRecord:
    """The record with its result cut to ``chars`` characters, saying how much is left out."""
    content = record.result.content
    if len(content) <= chars:
        return record
    cut = f"{content[:chars]}… [{len(content) - chars} more characters not shown]"
    return replace(record, result=replace(record.result, content=cut))


def record_line(record: ToolRecord) -> str:
    """The record as one line of the log (JSON)."""
    call, result = record.call, record.result
    data: dict[str, Any] = {
        "time": record.time.isoformat(),
        "channel": record.channel,
        "after_message_id": record.after_message_id,
        "call": {"id": call.id, "name": call.name, "arguments": call.arguments},
        "result": {"content": result.content, "is_error": result.is_error},
    }
    if record.thoughts:
        data["thoughts"] = [_thought_json(t) for t in record.thoughts]
    if record.reach is not None:
        data["reach"] = asdict(record.reach)
    if record.said:
        data["said"] = record.said
    if record.posted_as:
        data["posted_as"] = list(record.posted_as)
    if record.same_turn:
        data["same_turn"] = True
    return json.dumps(data, ensure_ascii=False)


def record_from(line: str) -> ToolRecord:
    """A record from its line; ValueError, KeyError or TypeError when it is not one."""
    data: dict[str, Any] = json.loads(line)
    call = data["call"]
    result = data["result"]
    return ToolRecord(
        time=datetime.fromisoformat(data["time"]),
        channel=str(data["channel"]),
        after_message_id=data.get("after_message_id"),
        call=ToolCall(str(call["id"]), str(call["name"]), dict(call["arguments"])),
        result=ToolResult(str(call["id"]), str(result["content"]), bool(result["is_error"])),
        thoughts=tuple(_thought_from(t) for t in data.get("thoughts") or ()),
        reach=_reach_from(data.get("reach")),
        said=str(data.get("said") or ""),
        posted_as=tuple(str(v) for v in data.get("posted_as") or ()),
        same_turn=bool(data.get("same_turn")),
    )


def _reach_from(data: dict[str, Any] | None) -> Reach | None:
    if not data:
        return None
    return Reach(
        askers=tuple(str(v) for v in data.get("askers") or ()),
        shown=str(data.get("shown") or "(not shown here)"),
        channels=tuple(str(v) for v in data.get("channels") or ()),
        personal=bool(data.get("personal")),
        notes=bool(data.get("notes")),
    )


_THOUGHT_FIELDS = ("vendor", "model", "text", "signature", "redacted", "call_id", "details")


def _thought_json(thought: Thought) -> dict[str, str]:
    """The fields a thought has set (an empty field is left out)."""
    return {name: value for name in _THOUGHT_FIELDS if (value := getattr(thought, name))}


def _thought_from(data: dict[str, Any]) -> Thought:
    return Thought(**{name: str(data.get(name) or "") for name in _THOUGHT_FIELDS})
