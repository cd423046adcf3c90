from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from salon.config import BotConfig
from tests.fakes.llm_server import LLMServer


@pytest.fixture
async def llm_server() -> AsyncIterator[LLMServer]:
    async with LLMServer() as server:
        yield server


def bot_config(**overrides: Any) -> BotConfig:
    """A valid bot config for unit tests; keyword arguments override any key."""
    data: dict[str, Any] = {
        "name": "Salon",
        "provider": "test",
        "providers": {"test": {"type": "openai", "model": "test-model", "backoff_initial": 0}},
    }
    data.update(overrides)
    return BotConfig.model_validate(data)


WriteConfig = Callable[..., Path]


@pytest.fixture
def write_config(tmp_path: Path) -> WriteConfig:
    """Write ``shared.yaml`` and ``bots/<name>.yaml`` files (dedented) into a temp dir."""

    def write(shared: str | None = None, **bots: str) -> Path:
        root = tmp_path / "config"
        (root / "bots").mkdir(parents=True, exist_ok=True)
        if shared is not None:
            (root / "shared.yaml").write_text(textwrap.dedent(shared), encoding="utf-8")
        for name, text in bots.items():
            (root / "bots" / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
        return root

    return write
