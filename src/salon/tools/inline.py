"""Encoded data inside tool text: data URIs and long base64 runs.

A model must never read them (``000``'s known pitfall: a base64 image in the prompt made the
model time out, and it costs tokens for nothing). ``split_inline`` finds them in a text,
decoded, so the hub can keep them as files; ``scrub`` replaces them with a short
placeholder where nothing is kept (the arguments a model wrote, a trace).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["MIN_RUN", "Blob", "describe", "image_type", "scrub", "split_inline"]

MIN_RUN = 256  # characters: a shorter base64-looking word is an id or a hash, left alone

_DATA_URI = re.compile(
    r"data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[\w.+-]+=[\w.+\"-]+)*;base64,"
    r"(?P<data>[A-Za-z0-9+/_=-]*)"  # "=" inside too: glued pieces are still not for models
)
_RUN = re.compile(rf"(?<![\w+/=-])[A-Za-z0-9+/][A-Za-z0-9+/=]{{{MIN_RUN - 1},}}(?![\w+/=-])")
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True, slots=True)
class Blob:
    """Decoded data found in a text; ``mime`` as declared or recognised, else ""."""

    mime: str
    data: bytes
    encoded_chars: int


def image_type(data: bytes) -> str:
    """The image type ``data`` starts like (PNG, JPEG, GIF, WebP), else ""."""
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return ""


def _decode(text: str) -> bytes | None:
    text = text.replace("-", "+").replace("_", "/")  # the URL-safe alphabet too
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None


def _matches(text: str) -> Iterator[tuple[int, int, Blob]]:
    """(start, end, blob) of each encoded stretch; a blob's data is empty when it does not
    decode."""
    taken: list[tuple[int, int]] = []
    if "base64," in text:
        for found in _DATA_URI.finditer(text):
            data = _decode(found["data"]) or b""
            taken.append((found.start(), found.end()))
            yield found.start(), found.end(), Blob(found["mime"] or "", data, len(found["data"]))
    if len(text) < MIN_RUN:
        return
    for found in _RUN.finditer(text):
        if any(start <= found.start() < end for start, end in taken):
            continue  # part of a data URI already
        data = _decode(found.group()) or b""
        yield found.start(), found.end(), Blob(image_type(data), data, len(found.group()))


def split_inline(text: str) -> list[str | Blob]:
    """``text`` cut at every data URI and long base64 run: plain stretches and decoded
    blobs, in order. A text without any comes back as ``[text]``."""
    if "base64," not in text and len(text) < MIN_RUN:
        return [text]
    parts: list[str | Blob] = []
    at = 0
    for start, end, blob in sorted(_matches(text), key=lambda m: m[0]):
        parts.extend((text[at:start], blob))
        at = end
    parts.append(text[at:])
    return [p for p in parts if p != ""]


def describe(blob: Blob) -> str:
    """A placeholder for data that is not kept."""
    kind = blob.mime or "encoded data"
    return f"[{kind}: {blob.encoded_chars} base64 characters left out]"


def scrub(text: str) -> str:
    """``text`` with every data URI and long base64 run replaced by a short placeholder."""
    parts = split_inline(text)
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return "".join(p if isinstance(p, str) else describe(p) for p in parts)
