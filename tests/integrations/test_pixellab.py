"""PixelLab: sprites polled to completion, pixflux images, rotations and animations by id."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import aiohttp
import PIL.Image
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult

from fakes.vendors.base import Reply
from fakes.vendors.images import tiny_png
from fakes.vendors.pixellab import PixelLabFake
from salon.config import PixelLabIntegration
from salon.integrations._pixels import fit_square
from salon.integrations.pixellab import build_pixellab_server
from tests.integrations.conftest import ManualClock, connect, images_of, secrets_of, text_of


def _server(
    fake: PixelLabFake, tmp_path: Path, clock: ManualClock, key: str = "px-test-key"
) -> MCPServer:
    config = PixelLabIntegration(base_url=fake.base_url, poll_interval=0.01)
    return build_pixellab_server(
        config, lookup=secrets_of({"PIXELLAB_API_KEY": key}), root=tmp_path, clock=clock
    )


async def test_a_sprite_in_four_directions_is_polled_to_completion(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    steps: list[str | None] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        steps.append(message)

    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool(
            "generate_sprite", {"description": "a knight", "size": 64}, progress_callback=progress
        )
    text = text_of(result)
    assert not result.is_error, text
    base = pixellab.base_url
    assert text.splitlines() == [
        "Sprite 'a knight', 64x64, 4 directions (PixelLab character char-1):",
        f"- south: px1 <{base}/files/char-1-south.png>",
        f"- west: px2 <{base}/files/char-1-west.png>",
        f"- east: px3 <{base}/files/char-1-east.png>",
        f"- north: px4 <{base}/files/char-1-north.png>",
    ]
    images = images_of(result)
    assert [base64.b64decode(i.data) for i in images] == [
        tiny_png(64, 64, 100 + i) for i in range(4)
    ]
    assert [i.meta for i in images] == [
        {"salon/name": d, "salon/url": f"{base}/files/char-1-{d}.png"}
        for d in ("south", "west", "east", "north")
    ]
    assert steps == ["PixelLab is drawing (processing)", "PixelLab is drawing (processing)"]
    created = pixellab.requests[0]
    assert created.path == "/v2/create-character-with-4-directions"
    assert created.body == {"description": "a knight", "image_size": {"width": 64, "height": 64}}
    assert [r.path for r in pixellab.requests[1:4]] == ["/v2/background-jobs/job-1"] * 3
    files = pixellab.seen("/files/")
    assert len(files) == 4
    assert all("authorization" not in r.headers for r in files)  # the key stays with the API
    assert all(r.headers["authorization"] == "Bearer px-test-key" for r in pixellab.seen("/v2/"))


async def test_eight_directions(pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool(
            "generate_sprite", {"description": "a slime", "directions": 8, "size": 32, "seed": 3}
        )
    assert len(images_of(result)) == 8
    assert pixellab.requests[0].path == "/v2/create-character-with-8-directions"
    assert pixellab.requests[0].body["seed"] == 3
    assert "- south-west: px8" in text_of(result)


async def test_a_sprite_below_pixellabs_smallest_size_is_refused_before_a_request(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool("generate_sprite", {"description": "a bat", "size": 16})
    assert result.is_error
    assert "Input should be 32, 64 or 128" in text_of(result)
    assert pixellab.requests == []


async def test_the_default_sprite_size_is_the_smallest_pixellab_draws(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool("generate_sprite", {"description": "a bat"})
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("Sprite 'a bat', 32x32, 4 directions")
    assert pixellab.requests[0].body["image_size"] == {"width": 32, "height": 32}


async def test_pixflux_under_its_minimum_area_is_refused_before_a_request(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        small = await client.call_tool(
            "generate_image_pixflux", {"description": "a coin", "width": 16, "height": 16}
        )
        narrow = await client.call_tool(
            "generate_image_pixflux", {"description": "a pole", "width": 16, "height": 64}
        )
    assert small.is_error
    assert text_of(small) == (
        "PixelLab draws pixflux images of at least 32x32 pixels in area (width x height at "
        "least 1024); 16x16 is 256"
    )
    assert not narrow.is_error, text_of(narrow)  # 16x64 is the area of 32x32
    assert [r.body["image_size"] for r in pixellab.requests] == [{"width": 16, "height": 64}]


async def test_a_rate_limited_poll_waits_as_told_and_the_sprite_is_kept(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    pixellab.throttle_polls = 1
    steps: list[str | None] = []
    values: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        steps.append(message)
        values.append(value)

    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool(
            "generate_sprite", {"description": "a knight"}, progress_callback=progress
        )
    assert not result.is_error, text_of(result)
    assert len(images_of(result)) == 4
    assert steps[0] == "PixelLab asks to slow down; checking again in 1 seconds"
    assert values == sorted(set(values))  # MCP progress only grows
    polls = pixellab.seen("/v2/background-jobs/")
    assert len(polls) == 4  # the refused one, then the three the job takes
    assert len(pixellab.seen("/v2/create-character")) == 1  # never paid for twice


async def test_a_job_cleaned_up_after_completion_is_read_from_its_character(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    pixellab.forget_done_jobs = True
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool("generate_sprite", {"description": "a knight"})
    assert not result.is_error, text_of(result)
    assert len(images_of(result)) == 4
    assert [r.path for r in pixellab.seen("/v2/")][-2:] == [
        "/v2/background-jobs/job-1",
        "/v2/characters/char-1",
    ]


async def test_a_job_gone_early_is_followed_through_its_character(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    pixellab.script(
        "/v2/background-jobs/{job_id}", Reply(status=404, json={"detail": "Job not found"})
    )
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool("generate_sprite", {"description": "a knight"})
    assert not result.is_error, text_of(result)
    assert len(images_of(result)) == 4
    looks = [r.path for r in pixellab.seen("/v2/characters/")]
    assert len(looks) == 3  # processing, processing, completed


async def test_a_job_gone_whose_character_failed_says_so(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    pixellab.fail_jobs = True
    pixellab.script(
        "/v2/background-jobs/{job_id}", Reply(status=404, json={"detail": "Job not found"})
    )
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool("generate_sprite", {"description": "a knight"})
    assert result.is_error
    assert text_of(result) == "PixelLab could not make the sprite (failed)"


async def test_a_job_and_character_both_gone_are_said_plainly(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    pixellab.script(
        "/v2/background-jobs/{job_id}", Reply(status=404, json={"detail": "Job not found"})
    )
    pixellab.script(
        "/v2/characters/{character_id}", Reply(status=404, json={"detail": "Character not found"})
    )
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool("generate_sprite", {"description": "a knight"})
    assert result.is_error
    assert text_of(result) == (
        "PixelLab no longer knows the sprite's job or its character char-1; look for it "
        "among your characters on pixellab.ai before asking again"
    )


async def test_a_failed_sprite_job(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    pixellab.fail_jobs = True
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        result = await client.call_tool("generate_sprite", {"description": "a knight"})
    assert result.is_error
    assert (
        text_of(result) == "PixelLab could not make the sprite: generation failed: content policy"
    )


async def test_pixflux_then_rotate_and_animate_by_id(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        made = await client.call_tool(
            "generate_image_pixflux", {"description": "a fox", "no_background": True}
        )
        turned = await client.call_tool(
            "rotate_sprite", {"image_id": "px1", "to_directions": ["east", "north", "east"]}
        )
        moving = await client.call_tool("animate_sprite", {"image_id": "px1", "action": "walk"})
    assert text_of(made) == "Pixel art 'a fox', 64x64:\n- image: px1"
    assert pixellab.requests[0].body == {
        "description": "a fox",
        "image_size": {"width": 64, "height": 64},
        "no_background": True,
        "isometric": False,
    }
    assert text_of(turned).splitlines() == [
        "px1 turned (64x64):",
        "- sprite sheet (2 directions x 1 view): px4",
        "- east: px2",
        "- north: px3",
    ]
    with PIL.Image.open(io.BytesIO(base64.b64decode(images_of(turned)[0].data))) as sheet:
        assert sheet.size == (128, 64)
        assert sheet.convert("RGB").getpixel((0, 0)) == (22, 66, 154)  # east's shade
    assert text_of(moving).splitlines() == [
        "px1 doing 'walk': 4 frames of 64x64 at 8 fps (GIF frames of 120 ms), looping:",
        "- animation: px9",
        "- frames: px5, px6, px7, px8",
        "- cost: $0.0200 for 1 PixelLab request",
    ]
    assert [i.meta for i in images_of(moving)] == [{"salon/name": "animation"}]
    animate = pixellab.seen("/v2/animate-with-text")[0]
    assert animate.body["description"] == "a fox"
    assert animate.body["direction"] == "east"  # a pixflux image faces no known way
    assert (
        animate.body["reference_image"]["base64"] == base64.b64encode(tiny_png(64, 64, 10)).decode()
    )


async def test_unknown_ids_are_refused_before_a_request(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        missing = await client.call_tool(
            "rotate_sprite", {"image_id": "px9", "to_directions": ["east"]}
        )
        unknown = await client.call_tool("animate_sprite", {"image_id": "px7", "action": "walk"})
    assert text_of(missing).startswith("there is no image 'px9'")
    assert text_of(unknown).startswith("there is no image 'px7'")
    assert pixellab.requests == []


async def test_vendor_refusals(pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock) -> None:
    async with connect(_server(pixellab, tmp_path, clock, key="bad")) as client:
        refused = await client.call_tool("generate_image_pixflux", {"description": "a fox"})
    assert text_of(refused) == (
        "PixelLab refused the request (HTTP 401): Invalid API token; check the key in PIXELLAB_API_KEY"
    )
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        await client.call_tool(
            "generate_image_pixflux", {"description": "a tower", "width": 300, "height": 300}
        )
        too_big = await client.call_tool(
            "rotate_sprite", {"image_id": "px1", "to_directions": ["west"]}
        )
    assert text_of(too_big) == "PixelLab rotates images up to 200x200"


async def test_generation_tools_are_not_read_only(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == {
        "generate_sprite",
        "generate_image_pixflux",
        "rotate_sprite",
        "animate_sprite",
    }
    for tool in tools:
        assert tool.annotations is not None
        assert tool.annotations.read_only_hint is False
        assert tool.annotations.destructive_hint is False
        assert tool.annotations.open_world_hint is True
    sprite = next(t for t in tools if t.name == "generate_sprite")
    assert sprite.input_schema["properties"]["size"]["enum"] == [32, 64, 128]
    assert "ctx" not in sprite.input_schema["properties"]


async def test_sprite_style_and_pixflux_options_reach_pixellab_by_their_names(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    style = {"outline": "lineless", "shading": "flat shading", "detail": "low detail"}
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        sprite = await client.call_tool("generate_sprite", {"description": "a bat", **style})
        image = await client.call_tool(
            "generate_image_pixflux",
            {"description": "a fox", **style, "direction": "west", "view": "side"},
        )
        wrong = await client.call_tool(
            "generate_image_pixflux", {"description": "a fox", "outline": "thick"}
        )
    assert not sprite.is_error, text_of(sprite)
    assert not image.is_error, text_of(image)
    created = pixellab.seen("/v2/create-character-with-4-directions")[0]
    assert {k: created.body[k] for k in style} == style
    assert created.body["image_size"] == {"width": 32, "height": 32}  # 000's default size
    pixflux = pixellab.seen("/v2/create-image-pixflux")[0]
    assert {k: pixflux.body[k] for k in (*style, "direction", "view")} == {
        **style,
        "direction": "west",
        "view": "side",
    }
    assert wrong.is_error
    assert "single color black outline" in text_of(wrong)  # the choices are named
    assert len(pixellab.seen("/v2/create-image-pixflux")) == 1


async def test_the_fake_refuses_a_style_pixellab_does_not_know(pixellab: PixelLabFake) -> None:
    body = {"description": "a fox", "image_size": {"width": 32, "height": 32}, "detail": "max"}
    headers = {"Authorization": "Bearer px-test-key"}
    async with aiohttp.ClientSession() as session:
        for path in ("create-image-pixflux", "create-character-with-4-directions"):
            url = f"{pixellab.base_url}/v2/{path}"
            async with session.post(url, json=body, headers=headers) as answer:
                assert answer.status == 422
                assert (await answer.json())["detail"][0]["loc"] == ["body", "detail"]


async def test_rotate_up_to_sixteen_angles_with_a_sprite_sheet(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    eight = [
        "south",
        "west",
        "east",
        "north",
        "south-east",
        "north-east",
        "north-west",
        "south-west",
    ]
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        await client.call_tool(
            "generate_image_pixflux", {"description": "a fox", "width": 32, "height": 32}
        )
        turned = await client.call_tool(
            "rotate_sprite",
            {"image_id": "px1", "to_directions": eight, "to_views": ["side", "high top-down"]},
        )
        too_many = await client.call_tool(
            "rotate_sprite",
            {
                "image_id": "px1",
                "to_directions": eight,
                "to_views": ["side", "low top-down", "high top-down"],
            },
        )
    assert not turned.is_error, text_of(turned)
    rotations = pixellab.seen("/v2/rotate")
    assert len(rotations) == 16
    assert {(r.body["to_direction"], r.body["to_view"]) for r in rotations} == {
        (d, v) for d in eight for v in ("side", "high top-down")
    }
    assert all(r.body["from_view"] == "side" for r in rotations)
    lines = text_of(turned).splitlines()
    assert lines[1] == "- sprite sheet (8 directions x 2 views): px18"
    assert lines[2] == "- south, side: px2"
    sheet = images_of(turned)
    assert len(sheet) == 1  # one sheet in the channel, not sixteen images
    assert sheet[0].meta == {"salon/name": "sprite sheet"}
    with PIL.Image.open(io.BytesIO(base64.b64decode(sheet[0].data))) as picture:
        assert picture.size == (8 * 32, 2 * 32)
    assert too_many.is_error
    assert (
        text_of(too_many)
        == "PixelLab rotations: at most 16 angles at once (8 directions x 3 views is 24)"
    )
    assert len(pixellab.seen("/v2/rotate")) == 16


async def test_animate_makes_a_gif_at_the_asked_speed_and_loop(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        await client.call_tool("generate_image_pixflux", {"description": "a fox"})
        looping = await client.call_tool(
            "animate_sprite", {"image_id": "px1", "action": "walk", "fps": 10}
        )
        once = await client.call_tool(
            "animate_sprite", {"image_id": "px1", "action": "jump", "fps": 4, "loop": False}
        )
        too_fast = await client.call_tool(
            "animate_sprite", {"image_id": "px1", "action": "run", "fps": 61}
        )
    assert text_of(looping).splitlines() == [
        "px1 doing 'walk': 4 frames of 64x64 at 10 fps, looping:",
        "- animation: px6",
        "- frames: px2, px3, px4, px5",
        "- cost: $0.0200 for 1 PixelLab request",
    ]
    assert text_of(once).startswith("px1 doing 'jump': 4 frames of 64x64 at 4 fps, played once:")
    gifs = images_of(looping)
    assert [(g.mime_type, g.meta) for g in gifs] == [("image/gif", {"salon/name": "animation"})]
    with PIL.Image.open(io.BytesIO(base64.b64decode(gifs[0].data))) as gif:
        assert gif.n_frames == 4
        assert gif.info["duration"] == 100
        assert gif.info["loop"] == 0  # forever
    with PIL.Image.open(io.BytesIO(base64.b64decode(images_of(once)[0].data))) as gif:
        assert gif.info["duration"] == 250
        assert "loop" not in gif.info  # played once
    assert too_fast.is_error
    assert "less than or equal to 60" in text_of(too_fast)
    assert len(pixellab.seen("/v2/animate-with-text")) == 2


def _gif(result: CallToolResult) -> PIL.Image.Image:
    return PIL.Image.open(io.BytesIO(base64.b64decode(images_of(result)[0].data)))


def _rgb(shade: int) -> tuple[int, int, int]:
    """The colour of ``tiny_png(..., shade)``."""
    return shade % 256, (shade * 3) % 256, (shade * 7) % 256


async def test_the_knight_just_made_is_animated_at_the_size_pixellab_takes(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        knight = await client.call_tool("generate_sprite", {"description": "a knight"})
        moving = await client.call_tool("animate_sprite", {"image_id": "px1", "action": "walk"})
    assert not knight.is_error, text_of(knight)
    assert not moving.is_error, text_of(moving)
    assert text_of(moving).splitlines() == [
        "px1 doing 'walk': 4 frames of 64x64 at 8 fps (GIF frames of 120 ms), looping:",
        "- animation: px9",
        "- frames: px5, px6, px7, px8",
        "- px1 is 32x32: scaled up 2x for PixelLab, which animates 64x64 only",
        "- cost: $0.0200 for 1 PixelLab request",
    ]
    sent = pixellab.seen("/v2/animate-with-text")[0].body
    assert sent["image_size"] == {"width": 64, "height": 64}
    assert (sent["n_frames"], sent["start_frame_index"]) == (4, 0)
    assert (sent["description"], sent["action"]) == ("a knight", "walk")
    assert (sent["direction"], sent["view"]) == ("south", "side")  # px1 faces south
    picture = base64.b64decode(sent["reference_image"]["base64"])
    with PIL.Image.open(io.BytesIO(picture)) as reference:
        assert reference.size == (64, 64)
        assert reference.convert("RGB").getpixel((63, 63)) == _rgb(100)  # the south view
    with _gif(moving) as gif:
        assert (gif.n_frames, gif.size) == (4, (64, 64))
        assert gif.info["duration"] == 120  # 8 fps as near as GIF's hundredths go
        assert gif.info["loop"] == 0


async def test_more_frames_are_asked_four_at_a_time_and_their_costs_added(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        await client.call_tool("generate_image_pixflux", {"description": "a fox"})
        moving = await client.call_tool(
            "animate_sprite", {"image_id": "px1", "action": "jump", "frames": 8, "fps": 12}
        )
        odd = await client.call_tool(
            "animate_sprite", {"image_id": "px1", "action": "jump", "frames": 6}
        )
    assert text_of(moving).splitlines() == [
        "px1 doing 'jump': 8 frames of 64x64 at 12 fps (GIF frames of 80 ms), looping:",
        "- animation: px10",
        "- frames: px2, px3, px4, px5, px6, px7, px8, px9",
        "- cost: $0.0400 for 2 PixelLab requests",
    ]
    asked = pixellab.seen("/v2/animate-with-text")
    assert [(r.body["n_frames"], r.body["start_frame_index"]) for r in asked] == [(8, 0), (8, 4)]
    with _gif(moving) as gif:
        assert gif.n_frames == 8
        for index in range(8):  # the second request's frames follow the first's
            gif.seek(index)
            assert gif.convert("RGB").getpixel((0, 0)) == _rgb(60 + index)
    assert odd.is_error
    assert "multiple of 4" in text_of(odd)
    assert len(pixellab.seen("/v2/animate-with-text")) == 2


async def test_images_of_other_sizes_are_fitted_to_64_pixels_to_animate(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        await client.call_tool("generate_sprite", {"description": "a giant", "size": 128})
        await client.call_tool(
            "generate_image_pixflux", {"description": "a pole", "width": 16, "height": 64}
        )
        giant = await client.call_tool("animate_sprite", {"image_id": "px1", "action": "stomp"})
        pole = await client.call_tool("animate_sprite", {"image_id": "px5", "action": "sway"})
    assert not giant.is_error, text_of(giant)
    assert "- px1 is 128x128: scaled down 2x for PixelLab, which animates 64x64 only" in (
        text_of(giant).splitlines()
    )
    assert "- px5 is 16x64: centred on 64x64 for PixelLab, which animates 64x64 only" in (
        text_of(pole).splitlines()
    )
    for request in pixellab.seen("/v2/animate-with-text"):
        picture = base64.b64decode(request.body["reference_image"]["base64"])
        with PIL.Image.open(io.BytesIO(picture)) as reference:
            assert reference.size == (64, 64)


async def test_a_gif_faster_than_players_show_is_said_as_it_plays(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        await client.call_tool("generate_image_pixflux", {"description": "a bee"})
        buzzing = await client.call_tool(
            "animate_sprite", {"image_id": "px1", "action": "buzz", "fps": 60}
        )
    assert text_of(buzzing).splitlines()[0] == (
        "px1 doing 'buzz': 4 frames of 64x64 at 60 fps (GIF frames of 20 ms, the shortest "
        "players show: 50 fps), looping:"
    )
    with _gif(buzzing) as gif:
        assert gif.info["duration"] == 20  # 10 ms would be shown at 100 ms by browsers


async def test_the_cost_is_said_when_pixellab_leaves_it_out(
    pixellab: PixelLabFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(pixellab, tmp_path, clock)) as client:
        await client.call_tool("generate_image_pixflux", {"description": "a fox"})
        pixellab.script(
            "/v2/animate-with-text",
            Reply(
                json={
                    "images": [
                        {"type": "base64", "base64": base64.b64encode(tiny_png(64, 64, 1)).decode()}
                    ]
                    * 4
                }
            ),
        )
        moving = await client.call_tool("animate_sprite", {"image_id": "px1", "action": "walk"})
    assert not moving.is_error, text_of(moving)
    assert text_of(moving).splitlines()[-1] == "- cost: not stated by PixelLab (1 request)"


def test_scaling_up_for_animation_keeps_pixel_art_crisp() -> None:
    board = PIL.Image.new("RGBA", (32, 32))
    board.putdata(
        [
            (255, 0, 0, 255) if (x + y) % 2 else (0, 0, 255, 255)
            for y in range(32)
            for x in range(32)
        ]
    )
    out = io.BytesIO()
    board.save(out, format="PNG")
    fitted, how = fit_square(out.getvalue(), 64)
    assert how == "scaled up 2x"
    with PIL.Image.open(io.BytesIO(fitted)) as picture:
        assert picture.size == (64, 64)
        colours = {c for _, c in picture.convert("RGBA").getcolors(64 * 64) or []}
        assert colours == {(255, 0, 0, 255), (0, 0, 255, 255)}  # no blended pixels
        red, blue = (255, 0, 0, 255), (0, 0, 255, 255)
        assert [picture.getpixel((x, y)) for x, y in ((2, 0), (3, 0), (2, 1), (3, 1))] == [red] * 4
        assert picture.getpixel((4, 0)) == blue  # each source pixel is a 2x2 block


async def test_the_fake_animates_64x64_only(pixellab: PixelLabFake) -> None:
    headers = {"Authorization": "Bearer px-test-key"}
    small = {"type": "base64", "base64": base64.b64encode(tiny_png(32, 32)).decode()}
    large = {"type": "base64", "base64": base64.b64encode(tiny_png(64, 64)).decode()}
    base = {"description": "a knight", "action": "walk"}
    refused = {
        "image_size": {**base, "image_size": {"width": 32, "height": 32}, "reference_image": small},
        "reference_image": {
            **base,
            "image_size": {"width": 64, "height": 64},
            "reference_image": small,
        },
        "n_frames": {
            **base,
            "image_size": {"width": 64, "height": 64},
            "reference_image": large,
            "n_frames": 24,
        },
    }
    async with aiohttp.ClientSession() as session:
        url = f"{pixellab.base_url}/v2/animate-with-text"
        for field, body in refused.items():
            async with session.post(url, json=body, headers=headers) as answer:
                assert answer.status == 422, field
                assert (await answer.json())["detail"][0]["loc"] == ["body", field]
