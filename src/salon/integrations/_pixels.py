"""Pictures made from PixelLab's images with Pillow: a sprite sheet of rotations, an
animated GIF of animation frames, a source fitted to the one size an endpoint takes.
PixelLab sends single images only; the seed's tools gave a sheet and a GIF, so Salon
assembles them here (in a thread: Pillow is not async).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import PIL.Image

__all__ = ["GIF_FASTEST_MS", "animated_gif", "fit_square", "gif_frame_ms", "sprite_sheet"]

# GIF counts hundredths of a second, and browsers show a frame of 10 ms or less for 100 ms
GIF_FASTEST_MS = 20


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


def gif_frame_ms(fps: int) -> int:
    """A frame's time at ``fps`` as a GIF holds it: whole hundredths, at least 20 ms."""
    return max(GIF_FASTEST_MS, 10 * round(100 / fps))


def animated_gif(frames: Sequence[bytes], fps: int, loop: bool) -> bytes:
    """The frames as a GIF shown ``fps`` frames a second (``gif_frame_ms``), forever or once."""
    pictures = [_open(f) for f in frames]
    options: dict[str, object] = {"duration": gif_frame_ms(fps), "disposal": 2}
    if loop:
        options["loop"] = 0  # the Netscape block: 0 is forever; without it, played once
    out = io.BytesIO()
    pictures[0].save(out, format="GIF", save_all=True, append_images=pictures[1:], **options)
    return out.getvalue()


def fit_square(data: bytes, side: int) -> tuple[bytes, str | None]:
    """The picture as a ``side`` x ``side`` PNG, and how it was changed (None: not at all).
    It is scaled by a whole factor with nearest neighbour, so pixel art stays crisp (each
    pixel a block, no blended colours), then centred on a transparent canvas if need be."""
    picture = _open(data)
    longest = max(picture.size)
    changes = []
    if longest != side and (longest > side or side // longest > 1):
        up = longest < side
        factor = side // longest if up else -(-longest // side)
        width, height = picture.size
        scaled = (width * factor, height * factor) if up else (width // factor, height // factor)
        picture = picture.resize(
            (max(1, scaled[0]), max(1, scaled[1])), PIL.Image.Resampling.NEAREST
        )
        changes.append(f"scaled {'up' if up else 'down'} {factor}x")
    if picture.size != (side, side):
        canvas = PIL.Image.new("RGBA", (side, side), (0, 0, 0, 0))
        canvas.paste(picture, ((side - picture.width) // 2, (side - picture.height) // 2))
        picture = canvas
        changes.append(f"centred on {side}x{side}")
    if not changes:
        return data, None
    out = io.BytesIO()
    picture.save(out, format="PNG")
    return out.getvalue(), " and ".join(changes)
