"""PixelLab's ``animate-with-text``: what it takes, how frames are asked for, what it cost.

PixelLab's v2 docs (``api.pixellab.ai/v2/docs``) give the endpoint one size, 64x64, and
say its model always draws four frames: ``n_frames`` (2-20) is the length of the whole
animation and ``start_frame_index`` where the four drawn start in it. So a source of
another size is fitted to 64x64 first (``_pixels.fit_square``: nearest neighbour by a whole
factor, centred), and eight frames are two requests (starting at 0 and 4), each paid for.
PixelLab publishes no price per endpoint; each answer says what it cost (``usage.usd``),
and the tool's text gives the sum.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from salon.integrations._http import VendorError
from salon.integrations._images import ImageStore, StoredImage
from salon.integrations._pixels import GIF_FASTEST_MS, animated_gif, fit_square, gif_frame_ms
from salon.integrations._server import content_result, expect_shape, image_block
from salon.tools.native import Result

__all__ = [
    "MOST_FRAMES",
    "PER_REQUEST",
    "SIDE",
    "Animation",
    "Drawn",
    "draw",
    "reference",
    "shown",
]

SIDE = 64  # the only image_size animate-with-text takes
PER_REQUEST = 4  # frames its model draws per request, whatever n_frames says
MOST_FRAMES = 20  # n_frames' maximum

Post = Callable[[str, dict[str, Any]], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Drawn:
    """PixelLab's frames in order (its image objects), and each request's price (None:
    the answer did not say)."""

    frames: list[Any]
    costs: list[float | None]


@dataclass(frozen=True, slots=True)
class Animation:
    """The frames kept by id, each request's price, and how the source was fitted to 64x64
    ("px1 is 32x32: scaled up 2x"; None when it was 64x64 already)."""

    frames: list[StoredImage]
    costs: list[float | None]
    fitted: str | None


async def reference(data: bytes, mime_type: str) -> tuple[dict[str, str], str | None]:
    """The source as the 64x64 ``reference_image`` PixelLab takes, and how it was fitted."""
    fitted, how = await asyncio.to_thread(fit_square, data, SIDE)
    kind = "png" if how else mime_type.removeprefix("image/")
    encoded = base64.b64encode(fitted).decode("ascii")
    return {"type": "base64", "base64": encoded, "format": kind}, how


async def draw(post: Post, body: dict[str, Any], frames: int) -> Drawn:
    """``frames`` (a multiple of four) drawn four at a time, one paid request each."""
    drawn = Drawn([], [])
    for start in range(0, frames, PER_REQUEST):
        window = {"n_frames": frames, "start_frame_index": start}
        answer = await post("animate-with-text", body | window)
        with expect_shape("PixelLab"):
            drawn.frames.extend(answer["images"])
            drawn.costs.append(_usd(answer))
    if not drawn.frames:
        raise VendorError("PixelLab sent no animation frames; try again")
    return drawn


def _usd(answer: Any) -> float | None:
    usage = answer.get("usage")
    usd = usage.get("usd") if isinstance(usage, dict) else None
    return float(usd) if isinstance(usd, int | float) else None


def _speed(fps: int) -> str:
    """``fps`` as the GIF plays it: GIF holds whole hundredths, and 20 ms at least."""
    ms = gif_frame_ms(fps)
    if ms * fps == 1000:
        return f"{fps} fps"
    if ms == GIF_FASTEST_MS and ms * fps > 1000:
        return f"{fps} fps (GIF frames of {ms} ms, the shortest players show: {1000 // ms} fps)"
    return f"{fps} fps (GIF frames of {ms} ms)"


def _cost(costs: Sequence[float | None]) -> str:
    requests = f"{len(costs)} request" + ("s" if len(costs) != 1 else "")
    known = [c for c in costs if c is not None]
    if len(known) < len(costs):
        return f"- cost: not stated by PixelLab ({requests})"
    return f"- cost: ${sum(known):.4f} for {requests.replace(' ', ' PixelLab ', 1)}"


async def shown(store: ImageStore, title: str, made: Animation, play: tuple[int, bool]) -> Result:
    """The frames as one GIF (kept by id too) and the listing the model reads: what was
    made, at what speed, from what, at what cost. ``title`` is "px1 doing 'walk'"."""
    fps, loop = play
    data = await asyncio.to_thread(animated_gif, [f.data for f in made.frames], fps, loop)
    first = made.frames[0]
    gif = store.add(data, "image/gif", (SIDE, SIDE), first.description, first.direction)
    played = "looping" if loop else "played once"
    lines = [
        f"{title}: {len(made.frames)} frames of {SIDE}x{SIDE} at {_speed(fps)}, {played}:",
        f"- animation: {gif.id}",
        "- frames: " + ", ".join(f.id for f in made.frames),
    ]
    if made.fitted:
        lines.append(f"- {made.fitted} for PixelLab, which animates {SIDE}x{SIDE} only")
    lines.append(_cost(made.costs))
    picture = image_block(gif.data, gif.mime_type, name="animation")
    return content_result("\n".join(lines), [picture])
