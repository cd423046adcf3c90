"""Logging for the CLI: console plus one file a day, every line passed through the redactor
and its control characters shown (salon.printable), as a terminal reading it would obey them.

Only ``salon.cli`` calls ``configure_logging``; library modules just ``getLogger(__name__)``.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

from salon.config import Redactor
from salon.printable import printable
from salon.trace import ACTIVATION

__all__ = [
    "ConsoleFormatter",
    "DailyFileHandler",
    "RedactingFormatter",
    "configure_logging",
    "set_level",
]

# ``activation``: " [act <id>]" on a line logged during an activation (its trace shows the
# same id), empty elsewhere.
FORMAT = "%(asctime)s %(levelname)s %(name)s%(activation)s: %(message)s"
SHORT_FORMAT = "%(levelname)s: %(message)s"


def _tag_activation(record: logging.LogRecord) -> None:
    """Read at formatting time, which is the logging call's own task and thread (no queue
    handler sits between), so the context variable is the activation's."""
    if not hasattr(record, "activation"):
        current = ACTIVATION.get()
        record.activation = f" [act {current}]" if current else ""


class RedactingFormatter(logging.Formatter):
    """Formats as usual, then removes every secret from the whole text, tracebacks included."""

    def __init__(self, redactor: Redactor, fmt: str = FORMAT) -> None:
        super().__init__(fmt)
        self.redactor = redactor

    def format(self, record: logging.LogRecord) -> str:
        _tag_activation(record)
        return printable(self.redactor(super().format(record)))


class ConsoleFormatter(RedactingFormatter):
    """One line per record: a failure shows its reason, never its traceback (that goes to
    the log file, when there is one)."""

    def __init__(self, redactor: Redactor, fmt: str, *, log_dir: Path | None) -> None:
        super().__init__(redactor, fmt)
        self.where = f"; details in {log_dir}" if log_dir is not None else ""

    def format(self, record: logging.LogRecord) -> str:
        saved = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            text = super().format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = saved
        error = saved[0][1] if saved[0] else None
        if error is not None:
            reason = str(error) or type(error).__name__
            text += printable(self.redactor(f" ({reason.splitlines()[0]}{self.where})"))
        return text


class DailyFileHandler(logging.FileHandler):
    """Writes to ``<dir>/<stem>-YYYY-MM-DD.log`` (UTC), opening a new file at midnight."""

    def __init__(self, directory: Path, stem: str) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._directory = directory
        self._stem = stem
        self._day = self._today()
        super().__init__(self._path(self._day), encoding="utf-8", delay=True)

    @staticmethod
    def _today() -> str:
        return datetime.now(UTC).strftime("%Y-%m-%d")

    def _path(self, day: str) -> Path:
        return self._directory / f"{self._stem}-{day}.log"

    def emit(self, record: logging.LogRecord) -> None:
        day = self._today()
        if day != self._day:
            self.acquire()
            try:
                self.close()
                self._day = day
                self.baseFilename = str(self._path(day).resolve())
            finally:
                self.release()
        super().emit(record)


def configure_logging(
    redactor: Redactor,
    *,
    level: str = "INFO",
    log_dir: Path | None = None,
    stem: str = "salon",
    short: bool = False,
) -> logging.Handler:
    """Console (one line per record) and, with ``log_dir``, a daily file with tracebacks.
    ``short`` drops the time and logger name from console lines (for ``salon chat``).
    Returns the console handler."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
        handler.close()
    console = logging.StreamHandler(sys.stderr)
    console.setFormatter(
        ConsoleFormatter(redactor, SHORT_FORMAT if short else FORMAT, log_dir=log_dir)
    )
    root.addHandler(console)
    if log_dir is not None:
        daily = DailyFileHandler(log_dir, stem)
        daily.setFormatter(RedactingFormatter(redactor))
        root.addHandler(daily)
    set_level(level)
    return console


def set_level(level: str) -> None:
    """The process's log level (at start, and live when a config edit changes
    ``log_level``); the HTTP and SDK loggers stay at WARNING or above."""
    root = logging.getLogger()
    root.setLevel(level)
    for noisy in ("httpx2", "httpx", "httpcore", "openai", "anthropic"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
