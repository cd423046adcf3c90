"""Pictures made from PixelLab's images with Pillow: a sprite sheet of rotations, an
animated GIF of animation frames. PixelLab sends single images only; the seed's tools gave
a sheet and a GIF, so Salon assembles them here (in a thread: Pillow is not async).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import PIL.Image

__all__ = ["animated_gif", "sprite_sheet"]


def _open(data: bytes) -> PIL.Image.Image:
    with PIL.Image.open(io.BytesIO(data)) as image:
        return image.convert("RGBA")


def sprite_sheet(rows: Sequence[Sequence[bytes]], cell: tuple[int, int]) -> bytes:
    """A PNG grid: one row per view, one column per direction, each cell ``cell`` pixels."""
    columns = max(len(row) for row in rows)
    sheet = PIL.Image.new("RGBA", (columns * cell[0], len(rows) * cell[1]), (0, 0, 0, 0))
    for y, row in enumerate(rows):
        for x, data in enumerate(row):
            sheet.paste(_open(data), (x * cell[0], y * cell[1]))
    out = io.BytesIO()
    sheet.save(out, format="PNG")
    return out.getvalue()


def animated_gif(frames: Sequence[bytes], fps: int, loop: bool) -> bytes:
    """The frames as a GIF shown ``fps`` frames a second, forever or once. GIF counts time
    in hundredths of a second, so each frame's time is rounded to that."""
    pictures = [_open(f) for f in frames]
    options: dict[str, object] = {"duration": round(1000 / fps), "disposal": 2}
    if loop:
        options["loop"] = 0  # the Netscape block: 0 is forever; without it, played once
    out = io.BytesIO()
    pictures[0].save(out, format="GIF", save_all=True, append_images=pictures[1:], **options)
    return out.getvalue()
