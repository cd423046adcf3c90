"""PixelLab pixel art: sprites facing several directions, images, rotations, animations.

PixelLab's v2 API (``https://api.pixellab.ai/v2``, ``Authorization: Bearer`` key); its
answers are bare JSON objects. A sprite is a character made by
``create-character-with-4-directions`` (or 8): a background job, polled every
``poll_interval`` seconds until it is done, then the character's ``rotation_urls`` are
downloaded (without the key: they are public files). The sprite is paid for once the job is
queued, so polling never gives it up lightly: a 429 is waited out (its Retry-After), and a
404 (PixelLab cleans finished jobs up) sends Salon to the character itself. Sprites start at
32 px and pixflux at the area of 32x32, PixelLab's smallest; smaller is refused before any
request. Images are returned as MCP image content and kept (a bounded number) under short
ids such as ``px3``, which ``rotate_sprite`` and ``animate_sprite`` take instead of image
data: pixels never pass through the model. Rotations come back as one sprite sheet and
animations as one animated GIF (``_pixels``), as the seed's tools gave them; an image of
any size is animated, fitted to the 64x64 PixelLab animates (``_animation``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from salon.config import PixelLabIntegration
from salon.integrations import _animation as animation
from salon.integrations._discipline import Clock, Discipline
from salon.integrations._http import VendorError, VendorHttp
from salon.integrations._images import ImageStore, StoredImage
from salon.integrations._pixels import sprite_sheet
from salon.integrations._server import (
    GENERATES,
    Lookup,
    content_result,
    expect_shape,
    guarded,
    image_block,
)
from salon.tools.base import Progress
from salon.tools.native import Result, ToolSet

__all__ = ["ImageStore", "PixelLab", "StoredImage", "build_pixellab_server"]

logger = logging.getLogger(__name__)

SERVICE = "PixelLab"
Direction = Literal[
    "south", "south-east", "east", "north-east", "north", "north-west", "west", "south-west"
]
View = Literal["side", "low top-down", "high top-down"]
# PixelLab's style choices, by its own names (its SDK's types; anything else is a 422)
Outline = Literal[
    "single color black outline", "single color outline", "selective outline", "lineless"
]
Shading = Literal[
    "flat shading", "basic shading", "medium shading", "detailed shading", "highly detailed shading"
]
Detail = Literal["low detail", "medium detail", "highly detailed"]
FOUR: tuple[Direction, ...] = ("south", "west", "east", "north")
EIGHT: tuple[Direction, ...] = (*FOUR, "south-east", "north-east", "north-west", "south-west")
_DONE = {"completed", "complete", "done", "success", "succeeded", "finished"}
_FAILED = {"failed", "error", "errored", "cancelled", "canceled"}
_ROTATE_MAX = 200
_MOST_ANGLES = 16  # rotations in one call (000's limit): each is one paid request
_PIXFLUX_MIN_AREA = 32 * 32  # pixflux refuses (422) a smaller canvas
_LONGEST_WAIT = 60.0  # seconds: a Retry-After beyond this is not believed

Report = Callable[[float, float | None, str], Awaitable[None]]


def _decode(image: Any, max_bytes: int) -> tuple[bytes, str]:
    """A ``{"type": "base64", "base64": ..., "format": "png"}`` image (or a data URI)."""
    if isinstance(image, dict):
        text, kind = str(image["base64"]), str(image.get("format") or "png")
    else:
        text, kind = str(image), "png"
    if text.startswith("data:"):
        header, _, text = text.partition(",")
        kind = header[5:].split(";")[0].removeprefix("image/") or kind
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("an image that is not base64") from None
    if len(data) > max_bytes:
        raise VendorError(f"PixelLab sent an image larger than {max_bytes} bytes; not kept")
    return data, f"image/{kind}"


def _encoded(image: StoredImage) -> dict[str, str]:
    return {
        "type": "base64",
        "base64": base64.b64encode(image.data).decode("ascii"),
        "format": image.mime_type.removeprefix("image/"),
    }


class PixelLab:
    def __init__(self, http: VendorHttp, config: PixelLabIntegration, key: str) -> None:
        self.http = http
        self.config = config
        self.base = (config.base_url or "https://api.pixellab.ai").rstrip("/") + "/v2"
        self.store = ImageStore(config.kept_images)
        self._auth = {"Authorization": f"Bearer {key}"}  # API calls only, never file downloads

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        return await self.http.post_json(f"{self.base}/{path}", body, headers=self._auth)

    async def _get(self, path: str) -> Any:
        return await self.http.get_json(f"{self.base}/{path}", headers=self._auth)

    async def _patient_get(self, path: str, polls: _Polls) -> Any:
        """A GET about work already paid for: PixelLab's rate limit is waited out, not
        reported as a failure (the queue's timeout still bounds the whole call)."""
        while True:
            try:
                return await self._get(path)
            except VendorError as exc:
                if exc.status != 429:
                    raise
                told = exc.retry_after if exc.retry_after is not None else 0.0
                await polls.slow_down(min(max(told, self.config.poll_interval), _LONGEST_WAIT))

    def _keep(
        self, image: Any, size: tuple[int, int], description: str, direction: str | None = None
    ) -> StoredImage:
        with expect_shape(SERVICE):
            data, kind = _decode(image, self.config.max_image_bytes)
        return self.store.add(data, kind, size, description, direction)

    async def pixflux(
        self, description: str, size: tuple[int, int], options: dict[str, Any]
    ) -> StoredImage:
        area = size[0] * size[1]
        if area < _PIXFLUX_MIN_AREA:
            raise VendorError(
                "PixelLab draws pixflux images of at least 32x32 pixels in area (width x height "
                f"at least {_PIXFLUX_MIN_AREA}); {size[0]}x{size[1]} is {area}"
            )
        body = {"description": description, "image_size": {"width": size[0], "height": size[1]}}
        body |= {k: v for k, v in options.items() if v is not None}
        answer = await self._post("create-image-pixflux", body)
        with expect_shape(SERVICE):
            return self._keep(answer["image"], size, description, options.get("direction"))

    async def rotate(
        self, image: StoredImage, start: tuple[Direction, View], to: tuple[Direction, View]
    ) -> StoredImage:
        body = {
            "image_size": {"width": image.width, "height": image.height},
            "from_image": _encoded(image),
            "from_direction": start[0],
            "to_direction": to[0],
            "from_view": start[1],
            "to_view": to[1],
        }
        answer = await self._post("rotate", body)
        with expect_shape(SERVICE):
            size = (image.width, image.height)
            return self._keep(answer["image"], size, image.description, to[0])

    async def animate(
        self, image: StoredImage, action: str, facing: tuple[Direction, View], frames: int
    ) -> animation.Animation:
        picture, how = await animation.reference(image.data, image.mime_type)
        body = {
            "image_size": {"width": animation.SIDE, "height": animation.SIDE},
            "description": image.description,
            "action": action,
            "reference_image": picture,
            "direction": facing[0],
            "view": facing[1],
        }
        drawn = await animation.draw(self._post, body, frames)
        size = (animation.SIDE, animation.SIDE)
        with expect_shape(SERVICE):
            kept = [self._keep(f, size, image.description, facing[0]) for f in drawn.frames]
        fitted = f"{image.id} is {image.width}x{image.height}: {how}" if how else None
        return animation.Animation(kept, drawn.costs, fitted)

    async def sprite(
        self, description: str, count: int, size: int, options: dict[str, Any], report: Report
    ) -> tuple[str, list[tuple[StoredImage, str | None]]]:
        """(how it was made, [(image, public url)]) for each direction."""
        body = {"description": description, "image_size": {"width": size, "height": size}}
        body |= {k: v for k, v in options.items() if v is not None}
        job = await self._post(f"create-character-with-{count}-directions", body)
        with expect_shape(SERVICE):
            character_id, job_id = str(job["character_id"]), str(job["background_job_id"])
        character = await self._finished(job_id, character_id, _Polls(report))
        with expect_shape(SERVICE):
            urls: dict[str, str] = {d: u for d, u in character["rotation_urls"].items() if u}
        made: list[tuple[StoredImage, str | None]] = []
        for direction in (d for d in EIGHT if d in urls):
            data, kind = await self.http.get_bytes(
                urls[direction], max_bytes=self.config.max_image_bytes
            )
            image = self.store.add(data, kind or "image/png", (size, size), description, direction)
            made.append((image, urls[direction]))
        if not made:
            raise VendorError(
                "PixelLab finished the sprite but sent no direction images; try again"
            )
        return f"PixelLab character {character_id}", made

    async def _finished(self, job_id: str, character_id: str, polls: _Polls) -> dict[str, Any]:
        """The character once its job is done. PixelLab cleans finished jobs up, so a job
        that is no longer there (404) is followed through the character itself."""
        try:
            await self._wait(job_id, polls)
        except VendorError as exc:
            if exc.status != 404:
                raise
            logger.info("PixelLab job %s is gone; following character %s", job_id, character_id)
        while True:
            try:
                character = await self._patient_get(f"characters/{character_id}", polls)
            except VendorError as exc:
                if exc.status != 404:
                    raise
                raise VendorError(
                    f"PixelLab no longer knows the sprite's job or its character {character_id}; "
                    "look for it among your characters on pixellab.ai before asking again"
                ) from None
            with expect_shape(SERVICE):
                status = str(character.get("status") or "completed").lower()
                if status in _FAILED:
                    raise VendorError(f"PixelLab could not make the sprite ({status})")
                if status in _DONE:
                    return dict(character)
            await polls.tick(status, self.config.poll_interval)

    async def _wait(self, job_id: str, polls: _Polls) -> None:
        """Poll a background job until it is done; the queue's timeout bounds the wait."""
        while True:
            job = await self._patient_get(f"background-jobs/{job_id}", polls)
            with expect_shape(SERVICE):
                status = str(job["status"]).lower()
                if status in _DONE:
                    return
                if status in _FAILED:
                    last = job.get("last_response") or {}
                    said = last.get("detail") or last.get("error") or "no reason given"
                    raise VendorError(f"PixelLab could not make the sprite: {said}")
            await polls.tick(status, self.config.poll_interval)


class _Polls:
    """The progress of a sprite: one report (always a larger number, as MCP wants) per look
    that found it still being drawn, or per wait PixelLab asked for."""

    def __init__(self, report: Report) -> None:
        self._report = report
        self._count = 0

    async def tick(self, status: str, interval: float) -> None:
        await self._say(f"PixelLab is drawing ({status})", interval)

    async def slow_down(self, wait: float) -> None:
        await self._say(f"PixelLab asks to slow down; checking again in {wait:g} seconds", wait)

    async def _say(self, message: str, then_wait: float) -> None:
        self._count += 1
        await self._report(self._count, None, message)
        await asyncio.sleep(then_wait)


Made = list[tuple[str, StoredImage, str | None]]  # (label, image, public url)


def _shown(title: str, made: Made) -> Result:
    """The listing for the model (label, id, url) and the images, named, for the channel."""
    lines = [title]
    images = []
    for label, image, url in made:
        lines.append(f"- {label}: {image.id}" + (f" <{url}>" if url else ""))
        images.append(image_block(image.data, image.mime_type, name=label, url=url))
    return content_result("\n".join(lines), images)


def _directions(made: list[tuple[StoredImage, str | None]]) -> Made:
    return [(image.direction or "image", image, url) for image, url in made]


def build_pixellab_server(
    config: PixelLabIntegration, *, lookup: Lookup, root: Path, clock: Clock
) -> ToolSet:
    key = lookup(config.api_key_env)
    if not key:  # salon.config.integrations keeps such a config from being built
        raise ValueError(f"pixellab needs its key in {config.api_key_env}")
    http = VendorHttp(SERVICE, timeout=config.timeout, key_hint=f"the key in {config.api_key_env}")
    lab = PixelLab(http, config, key)
    discipline = Discipline(SERVICE, config, clock)
    server = ToolSet(
        "pixellab",
        instructions="Pixel art from PixelLab: sprites, images, rotations, animations. "
        "Images are shown in the channel; refer to them by their ids (px3).",
        resources=[http],
    )
    _add_generation_tools(server, lab, discipline)
    _add_editing_tools(server, lab, discipline)
    return server


def _add_generation_tools(server: ToolSet, lab: PixelLab, discipline: Discipline) -> None:
    @server.tool(annotations=GENERATES, structured_output=False)
    async def generate_sprite(  # noqa: PLR0917 - the model passes these by name
        progress: Progress,
        description: Annotated[str, Field(min_length=1, max_length=2000)],
        directions: Literal[4, 8] = 4,
        size: Annotated[
            Literal[32, 64, 128], Field(description="pixels per side; 32 is PixelLab's smallest")
        ] = 32,
        view: View | None = None,
        outline: Outline | None = None,
        shading: Shading | None = None,
        detail: Detail | None = None,
        seed: Annotated[int | None, Field(ge=0, le=2**31)] = None,
    ) -> Result:
        """A game sprite of a character or object facing 4 or 8 directions (takes up to a few
        minutes), in a style (outline, shading, detail). Each direction's image is shown and
        gets an id for rotate/animate."""

        async def run() -> Result:
            options = {"view": view, "seed": seed} | _style(outline, shading, detail)
            how, made = await discipline.run(
                lambda: lab.sprite(description, directions, size, options, progress)
            )
            title = f"Sprite {description!r}, {size}x{size}, {len(made)} directions ({how}):"
            return _shown(title, _directions(made))

        return await guarded(SERVICE, run)

    @server.tool(annotations=GENERATES, structured_output=False)
    async def generate_image_pixflux(  # noqa: PLR0917 - the model passes these by name
        description: Annotated[str, Field(min_length=1, max_length=2000)],
        width: Annotated[int, Field(ge=16, le=400)] = 64,
        height: Annotated[int, Field(ge=16, le=400)] = 64,  # and width x height >= 32x32
        no_background: bool = False,
        isometric: bool = False,
        outline: Outline | None = None,
        shading: Shading | None = None,
        detail: Detail | None = None,
        direction: Direction | None = None,
        view: View | None = None,
        seed: Annotated[int | None, Field(ge=0, le=2**31)] = None,
    ) -> Result:
        """One pixel art image (at least the area of 32x32, at most 400x400), optionally
        isometric or on a transparent background, in a style (outline, shading, detail),
        facing a direction. The image is shown and gets an id."""

        async def run() -> Result:
            options = {
                "no_background": no_background,
                "isometric": isometric,
                "direction": direction,
                "view": view,
                "seed": seed,
            } | _style(outline, shading, detail)
            image = await discipline.run(lambda: lab.pixflux(description, (width, height), options))
            title = f"Pixel art {description!r}, {width}x{height}:"
            return _shown(title, [("image", image, None)])

        return await guarded(SERVICE, run)


def _style(outline: str | None, shading: str | None, detail: str | None) -> dict[str, Any]:
    return {"outline": outline, "shading": shading, "detail": detail}


def _source(lab: PixelLab, image_id: str) -> StoredImage:
    """An image PixelLab can start from: a GIF Salon made is not one."""
    image = lab.store.get(image_id)
    if image.mime_type == "image/gif":
        raise VendorError(f"{image.id} is an animation; use one of its frames' ids")
    return image


def _add_editing_tools(server: ToolSet, lab: PixelLab, discipline: Discipline) -> None:
    @server.tool(annotations=GENERATES, structured_output=False)
    async def rotate_sprite(
        image_id: Annotated[str, Field(min_length=2, max_length=20, description="e.g. px3")],
        to_directions: Annotated[list[Direction], Field(min_length=1, max_length=8)],
        to_views: Annotated[
            list[View] | None, Field(max_length=3, description="camera views; default: from_view")
        ] = None,
        from_direction: Direction = "south",
        from_view: View = "side",
    ) -> Result:
        """The same sprite turned to other directions and camera views (up to 16 angles),
        from an earlier image id, shown as one sprite sheet (a row per view)."""

        async def run() -> Result:
            image = _source(lab, image_id)
            if max(image.width, image.height) > _ROTATE_MAX:
                raise VendorError(f"PixelLab rotates images up to {_ROTATE_MAX}x{_ROTATE_MAX}")
            directions = list(dict.fromkeys(to_directions))
            views = list(dict.fromkeys(to_views or [from_view]))
            if len(directions) * len(views) > _MOST_ANGLES:
                raise VendorError(
                    f"PixelLab rotations: at most {_MOST_ANGLES} angles at once ({len(directions)} "
                    f"directions x {len(views)} views is {len(directions) * len(views)})"
                )

            async def turn_all() -> list[list[StoredImage]]:
                start = (from_direction, from_view)
                return [[await lab.rotate(image, start, (d, v)) for d in directions] for v in views]

            rows = await discipline.run(turn_all)
            return await _sheet_result(lab, image, rows, views)

        return await guarded(SERVICE, run)

    @server.tool(annotations=GENERATES, structured_output=False)
    async def animate_sprite(  # noqa: PLR0917 - the model passes these by name
        image_id: Annotated[str, Field(min_length=2, max_length=20, description="e.g. px3")],
        action: Annotated[str, Field(min_length=1, max_length=500, description="e.g. walk")],
        direction: Annotated[
            Direction | None, Field(description="default: the image's own (else east)")
        ] = None,
        view: View = "side",
        frames: Annotated[
            int,
            Field(
                ge=4,
                le=animation.MOST_FRAMES,
                multiple_of=animation.PER_REQUEST,
                description="4 per paid PixelLab request",
            ),
        ] = animation.PER_REQUEST,
        fps: Annotated[int, Field(ge=1, le=60, description="frames per second")] = 8,
        loop: Annotated[bool, Field(description="play forever (else once)")] = True,
    ) -> Result:
        """An animated GIF of an image (a sprite's direction, any size: PixelLab animates
        64x64, so it is scaled to that) doing an action (walk, jump, attack): ``frames``
        frames, four per paid PixelLab request, each kept by id, at ``fps`` frames a second,
        looping or played once. The result says what PixelLab charged."""

        async def run() -> Result:
            image = _source(lab, image_id)
            facing = (direction or _facing(image), view)
            made = await discipline.run(lambda: lab.animate(image, action, facing, frames))
            return await animation.shown(
                lab.store, f"{image.id} doing {action!r}", made, (fps, loop)
            )

        return await guarded(SERVICE, run)


def _facing(image: StoredImage) -> Direction:
    """The way a kept image faces, when Salon knows it (a sprite's direction), else east."""
    return next((d for d in EIGHT if d == image.direction), "east")


async def _sheet_result(
    lab: PixelLab, image: StoredImage, rows: list[list[StoredImage]], views: list[View]
) -> Result:
    """The rotations listed by id, and shown as one sheet (a single one is shown as is)."""
    turned = [(r, view) for row, view in zip(rows, views, strict=True) for r in row]
    if len(turned) == 1:
        return _shown(
            f"{image.id} turned ({image.width}x{image.height}):",
            _directions([(turned[0][0], None)]),
        )
    cell = (image.width, image.height)
    data = await asyncio.to_thread(sprite_sheet, [[r.data for r in row] for row in rows], cell)
    size = (cell[0] * len(rows[0]), cell[1] * len(rows))
    sheet = lab.store.add(data, "image/png", size, image.description)
    grid = f"{len(rows[0])} directions x {len(rows)} view" + ("s" if len(rows) > 1 else "")
    lines = [
        f"{image.id} turned ({image.width}x{image.height}):",
        f"- sprite sheet ({grid}): {sheet.id}",
    ]
    several = len(views) > 1
    for turn, view in turned:
        lines.append(f"- {turn.direction}" + (f", {view}" if several else "") + f": {turn.id}")
    picture = image_block(sheet.data, sheet.mime_type, name="sprite sheet")
    return content_result("\n".join(lines), [picture])
