"""PixelLab's v2 API on loopback: pixflux images, rotations, animations, characters.

As PixelLab's v2 docs (api.pixellab.ai/v2/llms.txt, pixellab.ai/docs) and its Python SDK
describe it: the key in ``Authorization: Bearer`` (401 ``{"detail": ...}`` otherwise); every
answer a bare JSON object (no envelope); images as ``{"type": "base64", "base64": ...,
"format": "png"}``; validation errors as 422 with a FastAPI ``detail`` list; pixflux's canvas
at least the area of 32x32 and at most that of 400x400 (``max_area``: 200x200 on the free
tier, 320x320 on tier 1); a character creation answers ``{background_job_id, character_id,
status}``, the job (``/background-jobs/{id}``) is ``processing`` until ``completed`` and is
cleaned up after it (404 from then on: ``forget_done_jobs``), and the character
(``/characters/{id}``) lists ``rotation_urls`` per direction (public files). Polls past the
rate limit are answered 429 with ``Retry-After`` (``throttle_polls``). Style fields
(``outline``, ``shading``, ``detail``), ``direction`` and the views take only the values of
the SDK's types (``pixellab/types.py``); any other is a 422 naming the field.
``animate-with-text`` draws 64x64 frames only (its ``image_size`` is 64 by 64, any other a
422) and always four of them: ``n_frames`` (2-20) is the length of the whole animation and
``start_frame_index`` (0-20) where these four start in it; each answer carries its price in
``usage`` (``animation_usd``). The fake also refuses a ``reference_image`` that is not the
``image_size`` (stricter than the docs say, so tests see what Salon sends).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import struct
from typing import Any

from aiohttp import web

from fakes.vendors.base import VendorFake, json_response
from fakes.vendors.images import tiny_png

__all__ = ["PixelLabFake"]

FOUR = ["south", "west", "east", "north"]
EIGHT = [*FOUR, "south-east", "north-east", "north-west", "south-west"]
VIEWS = ["side", "low top-down", "high top-down"]
CHOICES = {
    "outline": [
        "single color black outline",
        "single color outline",
        "selective outline",
        "lineless",
    ],
    "shading": [
        "flat shading",
        "basic shading",
        "medium shading",
        "detailed shading",
        "highly detailed shading",
    ],
    "detail": ["low detail", "medium detail", "highly detailed"],
    "direction": EIGHT,
    "view": VIEWS,
    "from_view": VIEWS,
    "to_view": VIEWS,
    "from_direction": EIGHT,
    "to_direction": EIGHT,
}


def _image(width: int, height: int, shade: int) -> dict[str, str]:
    data = base64.b64encode(tiny_png(width, height, shade)).decode()
    return {"type": "base64", "base64": data, "format": "png"}


def _size(body: dict[str, Any], key: str = "image_size") -> tuple[int, int] | None:
    size = body.get(key)
    if not isinstance(size, dict):
        return None
    return int(size.get("width", 0)), int(size.get("height", 0))


def _invalid(field: str, message: str) -> web.Response:
    return json_response(
        {"detail": [{"loc": ["body", field], "msg": message, "type": "value_error"}]}, 422
    )


def _unknown_choice(body: dict[str, Any]) -> web.Response | None:
    """A 422 for the first field whose value is not one PixelLab knows (null is absent)."""
    for field, allowed in CHOICES.items():
        value = body.get(field)
        if value is not None and value not in allowed:
            return _invalid(field, "Input should be " + ", ".join(repr(a) for a in allowed))
    return None


def _png_size(image: Any) -> tuple[int, int] | None:
    """The width and height in a base64 PNG's header (None for anything else)."""
    try:
        data = base64.b64decode(str(image.get("base64", "")).split(",")[-1], validate=True)
    except (AttributeError, binascii.Error, ValueError):
        return None
    if not data.startswith(b"\x89PNG") or len(data) < 24:
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _animation_refusal(body: dict[str, Any]) -> web.Response | None:
    """A 422 for what animate-with-text does not take, as PixelLab's schema says."""
    if _size(body) != (64, 64):
        return _invalid("image_size", "animate-with-text draws 64x64 frames only")
    if not body.get("action") or not body.get("description"):
        return _invalid("action", "field required")
    reference = body.get("reference_image")
    if not isinstance(reference, dict) or not reference.get("base64"):
        return _invalid("reference_image", "field required")
    if _png_size(reference) != (64, 64):
        return _invalid("reference_image", "the reference image must be 64x64 (image_size)")
    n_frames, start = body.get("n_frames"), body.get("start_frame_index")
    if n_frames is not None and not 2 <= int(n_frames) <= 20:
        return _invalid("n_frames", "Input should be between 2 and 20")
    if start is not None and not 0 <= int(start) <= 20:
        return _invalid("start_frame_index", "Input should be between 0 and 20")
    return None


class PixelLabFake(VendorFake):
    def __init__(self, key: str = "px-test-key") -> None:
        super().__init__()
        self.key = key
        self.polls_before_done = 2
        self.fail_jobs = False
        self.max_area = 400 * 400
        self.animation_usd = 0.02  # what one animate-with-text answer says it cost
        self.forget_done_jobs = False  # a finished job is gone: its polls are 404
        self.throttle_polls = 0  # the next polls answered 429
        self.retry_after = "1"
        self.jobs: dict[str, dict[str, Any]] = {}
        self.characters: dict[str, dict[str, Any]] = {}
        self.files: dict[str, bytes] = {}
        self._drawn: dict[str, dict[str, str | None]] = {}
        self._ids = itertools.count(1)
        self.route("POST", "/v2/create-image-pixflux", self._pixflux)
        self.route("POST", "/v2/rotate", self._rotate)
        self.route("POST", "/v2/animate-with-text", self._animate)
        self.route("POST", "/v2/create-character-with-4-directions", self._character)
        self.route("POST", "/v2/create-character-with-8-directions", self._character)
        self.route("GET", "/v2/background-jobs/{job_id}", self._job)
        self.route("GET", "/v2/characters/{character_id}", self._get_character)
        self.route("GET", "/files/{name}", self._file)

    def _refused(self, request: web.Request) -> web.Response | None:
        if request.headers.get("Authorization") == f"Bearer {self.key}":
            return None
        return json_response({"detail": "Invalid API token"}, 401)

    async def _pixflux(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        wrong = _unknown_choice(body)
        if wrong is not None:
            return wrong
        size = _size(body)
        if size is None or not 32 * 32 <= size[0] * size[1] <= self.max_area:
            return _invalid(
                "image_size", "the canvas area must be at least 32x32 and at most 400x400"
            )
        return json_response({"usage": {"type": "usd", "usd": 0.0079}, "image": _image(*size, 10)})

    async def _rotate(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        wrong = _unknown_choice(body)
        if wrong is not None:
            return wrong
        size = _size(body)
        if size is None or not all(16 <= s <= 200 for s in size):
            return _invalid("image_size", "width and height must be 16 to 200")
        if not isinstance(body.get("from_image"), dict) or not body["from_image"].get("base64"):
            return _invalid("from_image", "field required")
        shade = 20 + EIGHT.index(body.get("to_direction", "south"))
        return json_response(
            {"usage": {"type": "usd", "usd": 0.0079}, "image": _image(*size, shade)}
        )

    async def _animate(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        wrong = _unknown_choice(body) or _animation_refusal(body)
        if wrong is not None:
            return wrong
        start = int(body.get("start_frame_index") or 0)
        frames = [_image(64, 64, 60 + start + i) for i in range(4)]  # always four
        usage = {"type": "usd", "usd": self.animation_usd}
        return json_response({"usage": usage, "images": frames})

    async def _character(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        body = await request.json()
        wrong = _unknown_choice(body)
        if wrong is not None:
            return wrong
        size = _size(body)
        if size is None or not all(32 <= s <= 400 for s in size):
            return _invalid("image_size", "width and height must be 32 to 400")
        number = next(self._ids)
        character_id, job_id = f"char-{number}", f"job-{number}"
        directions = EIGHT if request.path.endswith("8-directions") else FOUR
        urls: dict[str, str | None] = dict.fromkeys(EIGHT)
        for i, direction in enumerate(directions):
            name = f"{character_id}-{direction}.png"
            self.files[name] = tiny_png(*size, 100 + i)
            urls[direction] = f"{self.base_url}/files/{name}"
        self._drawn[character_id] = urls  # shown once the job is done
        self.characters[character_id] = {
            "id": character_id,
            "name": body.get("description", "")[:50],
            "prompt": body.get("description", ""),
            "size": {"width": size[0], "height": size[1]},
            "directions": len(directions),
            "created_at": "2026-11-23T10:00:00Z",
            "animation_count": 0,
            "template_id": "mannequin",
            "status": "processing",
            "rotation_urls": dict.fromkeys(EIGHT),
        }
        self.jobs[job_id] = {
            "id": job_id,
            "character_id": character_id,
            "status": "processing",
            "created_at": "2026-11-23T10:00:00Z",
            "last_response": None,
            "polls": 0,
        }
        return json_response(
            {
                "background_job_id": job_id,
                "character_id": character_id,
                "status": "processing",
                "usage": {"type": "usd", "usd": 0.05},
            }
        )

    async def _job(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        if self.throttle_polls > 0:
            self.throttle_polls -= 1
            return web.Response(
                status=429,
                body=b'{"detail": "Too many requests"}',
                content_type="application/json",
                headers={"Retry-After": self.retry_after},
            )
        job = self.jobs.get(request.match_info["job_id"])
        if job is None:
            return json_response({"detail": "Job not found"}, 404)
        job["polls"] += 1
        if job["polls"] > self.polls_before_done:
            self._finish(job)
            if self.forget_done_jobs and job["status"] == "completed":
                del self.jobs[request.match_info["job_id"]]  # cleaned up before this poll
                return json_response({"detail": "Job not found"}, 404)
        hidden = ("polls", "character_id")
        return json_response({k: v for k, v in job.items() if k not in hidden})

    def _finish(self, job: dict[str, Any]) -> None:
        character = self.characters[job["character_id"]]
        if self.fail_jobs:
            job["status"] = character["status"] = "failed"
            job["last_response"] = {"detail": "generation failed: content policy"}
            return
        job["status"] = character["status"] = "completed"
        character["rotation_urls"] = self._drawn[job["character_id"]]

    async def _get_character(self, request: web.Request) -> web.Response:
        refused = self._refused(request)
        if refused is not None:
            return refused
        character = self.characters.get(request.match_info["character_id"])
        if character is None:
            return json_response({"detail": "Character not found"}, 404)
        job = next((j for j in self.jobs.values() if j["character_id"] == character["id"]), None)
        if job is not None and job["status"] == "processing":  # time passes for every look
            job["polls"] += 1
            if job["polls"] > self.polls_before_done:
                self._finish(job)
        return json_response(character)

    async def _file(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["name"])
        if data is None:
            return web.Response(status=404)
        return web.Response(body=data, content_type="image/png")
