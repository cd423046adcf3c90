"""Matrix in the registry. mautrix and aiohttp load only when a bot on Matrix is built or
checked: this module imports neither."""

from __future__ import annotations

from pathlib import Path

from salon.config import BotConfig, MatrixConfig, PlatformsConfig, Secrets
from salon.platforms.adapter import Adapter, BuildContext
from salon.platforms.base import Platform
from salon.platforms.matrix.kept import Kept

__all__ = ["ADAPTER"]


def _section(platforms: PlatformsConfig) -> MatrixConfig | None:
    return platforms.matrix


def _build(config: MatrixConfig, context: BuildContext) -> Platform:
    from salon.platforms.matrix.platform import MatrixPlatform

    kept = Kept(context.cursors, context.bot, lambda: context.current().catch_up.max_age)
    return MatrixPlatform(context.config.name, config, context.secrets, context.data_dir, kept=kept)


async def _live_check(
    config: BotConfig, secrets: Secrets, data_dir: Path
) -> tuple[list[str], bool]:
    from salon.platforms.matrix.check import live_check

    return await live_check(config, secrets, data_dir)


ADAPTER = Adapter(name="matrix", section=_section, build=_build, live_check=_live_check)
