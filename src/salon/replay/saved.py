"""A replay's summary, kept beside the bot's data (``<data_dir>/replays/<time>.json``) for
the activity page's list of replays. The newest ``KEEP`` are kept; a summary that cannot
be written is said in one line and the replay's result stands."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["KEEP", "save_summary"]

KEEP = 50


def save_summary(directory: Path, summary: dict[str, Any]) -> Path | None:
    """Write ``summary`` (whole, never half: written aside, then renamed) and drop the
    oldest beyond ``KEEP``; the file, or None when it could not be written."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    try:
        directory.mkdir(parents=True, exist_ok=True)
        path = _free(directory, stamp)
        aside = path.with_suffix(".tmp")
        aside.write_text(json.dumps(summary, indent=1), encoding="utf-8")
        os.replace(aside, path)
        for old in sorted(directory.glob("*.json"))[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError as exc:
        print(f"warning: the replay's summary was not kept in {directory}: {exc}", file=sys.stderr)
        return None
    return path


def _free(directory: Path, stamp: str) -> Path:
    """A name not taken yet: two replays may end in the same second."""
    path = directory / f"{stamp}.json"
    number = 1
    while path.exists():
        path = directory / f"{stamp}-{number}.json"
        number += 1
    return path
