"""Files tools make, kept under ``<data dir>/outputs/YYYY/MM/DDTHH:MM/`` (``001``'s layout).

Each file is at most ``max_file_bytes``; when all of them take more than
``max_total_bytes``, the oldest go first (the folders' names sort in time order). Writing
happens in a worker thread (``asyncio.to_thread``), so the total is kept under a lock.
"""

from __future__ import annotations

import logging
import mimetypes
import os
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from salon.config.models import OutputsConfig

__all__ = ["OutputDir", "file_name", "save_beside"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_NAME_CHARS = 80
_EXTENSIONS = {"image/jpeg": ".jpg", "image/png": ".png", "image/gif": ".gif"}


def file_name(label: str, mime: str, owner: str = "") -> str:
    """A file name safe on every platform and in Discord's ``attachment://`` links:
    ``owner-label.ext`` in letters, digits, ``.``, ``_`` and ``-``."""
    stem = _UNSAFE.sub("-", f"{owner}-{label}" if owner else label).strip("-.") or "file"
    extension = _EXTENSIONS.get(mime) or mimetypes.guess_extension(mime) or ".bin"
    if mimetypes.guess_type(stem)[0] == mime:  # "castle.jpeg" keeps its own extension
        stem, dot, own = stem.rpartition(".")
        extension = dot + own
    return stem[: _NAME_CHARS - len(extension)] + extension


class OutputDir:
    def __init__(
        self,
        data_dir: Path,
        config: OutputsConfig,
        *,
        timezone: str = "UTC",
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.root = data_dir / "outputs"
        self.config = config
        self._zone = ZoneInfo(timezone)
        self._now = now or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._total: int | None = None  # bytes under root, counted at the first save

    def save(self, name: str, data: bytes) -> Path | None:
        """Write ``data`` as a new file named ``name`` (``-2``… when taken) in this minute's
        folder; None when it is over ``max_file_bytes``. Blocking: run it in a thread."""
        if len(data) > self.config.max_file_bytes:
            return None
        folder = self.root / self._now().astimezone(self._zone).strftime("%Y/%m/%dT%H:%M")
        folder.mkdir(parents=True, exist_ok=True)
        path = _create(folder, name, data)
        with self._lock:
            if self._total is None:
                self._total = sum(size for _, size in self._files())
            else:
                self._total += len(data)
            if self._total > self.config.max_total_bytes:
                self._make_room(keep=path)
        return path

    def relative(self, path: Path) -> str:
        """``path`` as the model and people read it: from the data dir (``outputs/…``)."""
        return path.relative_to(self.data_dir).as_posix()

    def public_url(self, path: Path) -> str:
        """Where people can fetch ``path``, when ``outputs.url`` says where they are served."""
        if self.config.url is None:
            return ""
        return f"{self.config.url.rstrip('/')}/{path.relative_to(self.root).as_posix()}"

    def _files(self) -> Iterator[tuple[Path, int]]:
        """Every file, oldest first: folders in name order (their names are times),
        files in a folder by modification time."""
        for folder, dirs, files in os.walk(self.root):
            dirs.sort()
            found = []
            for name in files:
                path = Path(folder, name)
                try:
                    stat = path.stat()
                except OSError:
                    continue  # deleted meanwhile
                found.append((stat.st_mtime, path, stat.st_size))
            for _, path, size in sorted(found):
                yield path, size

    def _make_room(self, keep: Path) -> None:
        """Delete the oldest files until the total fits (recounting: another process of
        the same bot may share the directory)."""
        total = sum(size for _, size in self._files())
        for path, size in self._files():
            if total <= self.config.max_total_bytes:
                break
            if path == keep:
                continue
            try:
                path.unlink()
            except OSError as exc:
                logger.warning("outputs: could not delete %s: %s", path, exc)
                continue
            total -= size
            _remove_empty(path.parent, self.root)
        self._total = total


def save_beside(files: Sequence[str], owner: str, text: str) -> Path | None:
    """An answer's text as ``<owner>-answer.txt`` in the folder of the first of the files
    its tools made (``001``'s ``username-response_text.txt``); None without files.
    Blocking: run it in a thread. Counted in the total at the next recount."""
    if not files or not text:
        return None
    return _create(Path(files[0]).parent, file_name("answer", "text/plain", owner), text.encode())


def _create(folder: Path, name: str, data: bytes) -> Path:
    stem, dot, extension = name.rpartition(".")
    stem, extension = (stem, f".{extension}") if dot else (name, "")
    for number in range(1, 10_000):
        path = folder / (name if number == 1 else f"{stem}-{number}{extension}")
        try:
            with path.open("xb") as file:
                file.write(data)
        except FileExistsError:
            continue
        return path
    raise OSError(f"too many files named {name} in {folder}")


def _remove_empty(folder: Path, root: Path) -> None:
    while folder != root and folder.is_relative_to(root):
        try:
            folder.rmdir()
        except OSError:
            return  # not empty
        folder = folder.parent
