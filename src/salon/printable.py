"""Text from people, models, tools and errors, made safe to print on a terminal.

A terminal obeys the control characters in what it is given: ESC starts sequences that set
the window title, clear the screen or draw links, CR overwrites a line. Everything Salon
prints that it did not write itself goes through ``printable``, which shows each control
character as ``\\xNN`` instead (newlines and tabs are kept, unless ``one_line``).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["printable", "printable_json"]

# C0, DEL and C1: every character of Unicode's category Cc.
_CONTROLS = (*range(0x20), *range(0x7F, 0xA0))
_SHOWN = {c: f"\\x{c:02x}" for c in _CONTROLS if chr(c) not in "\n\t"}
_SHOWN_ONE_LINE = {c: f"\\x{c:02x}" for c in _CONTROLS}
# JSON escapes C0 itself; DEL and C1 become \u escapes, which read back as the same text.
_JSON = {c: f"\\u{c:04x}" for c in range(0x7F, 0xA0)}


def printable(text: str, *, one_line: bool = False) -> str:
    """``text`` with its control characters shown as ``\\xNN``; ``one_line`` shows
    newlines and tabs that way too (for a table's cell). A Windows line end is a newline."""
    if one_line:
        return text.translate(_SHOWN_ONE_LINE)
    return text.replace("\r\n", "\n").translate(_SHOWN)


def printable_json(value: Any, *, indent: int | None = 2) -> str:
    """``value`` as JSON that prints safely and still parses to the same value."""
    return json.dumps(value, indent=indent, ensure_ascii=False).translate(_JSON)
