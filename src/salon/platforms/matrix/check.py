"""``salon check --live`` for a bot on Matrix: it logs in as the bot (``login.py``) and,
in each room it is in or is configured for, reads the power levels: one line for each
thing its level keeps it from doing (``powers.py``)."""

from __future__ import annotations

from pathlib import Path

from salon.config import BotConfig, MatrixConfig, Secrets
from salon.errors import PlatformError
from salon.platforms.matrix.api import Homeserver, q
from salon.platforms.matrix.login import log_in
from salon.platforms.matrix.powers import power_problems

__all__ = ["live_check"]

_ROOMS_MAX = 50  # rooms read; a bot in more is told how many were left out
_V3 = "/_matrix/client/v3"


async def live_check(config: BotConfig, secrets: Secrets, data_dir: Path) -> tuple[list[str], bool]:
    """The lines to print, and whether all is well. A configured room the bot has not
    joined yet is said, not failed: it joins at start."""
    matrix = config.platforms.matrix
    if matrix is None:
        return ["live: matrix: not configured"], True
    try:
        server = await log_in(matrix, secrets, data_dir)
    except PlatformError as exc:
        return [f"live: matrix: {exc}"], False
    try:
        return await _check(server, matrix)
    except PlatformError as exc:
        return [f"live: matrix: {exc}"], False
    finally:
        await server.close()


async def _check(server: Homeserver, config: MatrixConfig) -> tuple[list[str], bool]:
    me = (await server.call("GET", f"{_V3}/account/whoami")).get("user_id")
    if me != config.user_id:
        return [f"live: matrix: the token is for {me}, not {config.user_id}"], False
    answer = (await server.call("GET", f"{_V3}/joined_rooms")).get("joined_rooms")
    joined = {str(r) for r in answer} if isinstance(answer, list) else set()
    configured = {await _room_id(server, room) for room in config.rooms}
    rooms = sorted(joined | configured)
    lines, ok = [], True
    for room in rooms[:_ROOMS_MAX]:
        if room not in joined:
            lines.append(f"live: matrix: {room}: not joined yet (the bot joins it at start)")
            continue
        try:
            problems = await _problems(server, room, config)
        except PlatformError as exc:
            problems = [f"its power levels cannot be read: {exc}"]
        lines += [f"live: matrix: {room}: {problem}" for problem in problems]
        ok = ok and not problems
    if len(rooms) > _ROOMS_MAX:
        lines.append(f"live: matrix: {len(rooms) - _ROOMS_MAX} more rooms not checked")
    if ok:
        lines.append(f"live: matrix: ok, {me} in {len(joined)} rooms; power levels suffice")
    return lines, ok


async def _room_id(server: Homeserver, room: str) -> str:
    """A configured room as its id (an alias, ``#name:server``, looked up)."""
    if not room.startswith("#"):
        return room
    try:
        found = await server.call("GET", f"{_V3}/directory/room/{q(room)}")
    except PlatformError:
        return room
    return str(found.get("room_id") or room)


async def _problems(server: Homeserver, room: str, config: MatrixConfig) -> list[str]:
    levels = await server.state(room, "m.room.power_levels")
    members = (await server.call("GET", f"{_V3}/rooms/{q(room)}/joined_members")).get("joined")
    return power_problems(
        levels,
        bot=config.user_id,
        approval_level=config.approval_power_level,
        creators=await server.creators(room),
        members=set(members) if isinstance(members, dict) else None,
    )
