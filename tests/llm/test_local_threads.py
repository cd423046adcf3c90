"""How many CPU threads the local model runs on: every usable CPU, less one on a machine of
four or fewer, so that the event loop, the platforms and the rest of the machine keep a
core (on two cores, two threads stalled whenever another process wanted one)."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from salon.config import ProviderConfig
from salon.llm import local
from salon.llm.local import default_threads


def _cpus(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(count)), raising=False)


@pytest.mark.parametrize(("cpus", "threads"), [(1, 1), (2, 1), (4, 3), (5, 5), (16, 16)])
def test_a_small_machine_keeps_a_core_free(
    monkeypatch: pytest.MonkeyPatch, cpus: int, threads: int
) -> None:
    _cpus(monkeypatch, cpus)
    assert default_threads() == threads


def _load(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **settings: Any) -> dict[str, Any]:
    """The arguments the model is loaded with (llama-cpp-python replaced by a recorder)."""
    loaded: list[dict[str, Any]] = []

    class Llama:
        def __init__(self, **kwargs: Any) -> None:
            loaded.append(kwargs)

    module = types.ModuleType("llama_cpp")
    module.Llama = Llama  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llama_cpp", module)
    config = ProviderConfig(type="local", model="smol", **settings)
    local._load_llama(tmp_path / "model.gguf", config, "local")
    (kwargs,) = loaded
    return kwargs


def test_the_model_loads_with_a_core_free_on_two_cpus(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _cpus(monkeypatch, 2)
    assert _load(monkeypatch, tmp_path)["n_threads"] == 1


def test_threads_set_in_the_config_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _cpus(monkeypatch, 2)
    assert _load(monkeypatch, tmp_path, threads=2)["n_threads"] == 2
