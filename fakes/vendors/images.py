"""Small real PNG files for the fakes to serve."""

from __future__ import annotations

import struct
import zlib

__all__ = ["tiny_png"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def tiny_png(width: int = 2, height: int = 2, shade: int = 200) -> bytes:
    """A grey RGB PNG of the given size; ``shade`` tells images apart."""
    row = b"\x00" + bytes([shade % 256, (shade * 3) % 256, (shade * 7) % 256]) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(row * height))
        + _chunk(b"IEND", b"")
    )
