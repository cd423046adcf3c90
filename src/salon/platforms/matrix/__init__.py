"""Matrix through mautrix (the ``matrix`` extra). Importing this package loads no mautrix:
``ADAPTER`` builds the platform for a bot on Matrix, and ``MatrixPlatform`` loads it when
first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from salon.platforms.matrix.adapter import ADAPTER
from salon.platforms.matrix.kept import ENCRYPTED_REFUSAL

if TYPE_CHECKING:
    from salon.platforms.matrix.platform import MatrixPlatform

__all__ = ["ADAPTER", "ENCRYPTED_REFUSAL", "MatrixPlatform"]


def __getattr__(name: str) -> Any:
    if name == "MatrixPlatform":
        from salon.platforms.matrix import platform

        return platform.MatrixPlatform
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
