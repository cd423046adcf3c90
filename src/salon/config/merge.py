"""Deep merge of config layers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_layers"]


def merge_layers(layers: list[dict[str, Any]]) -> dict[str, Any]:
    """Deep-merge mappings, later layers winning; lists and scalars are replaced whole."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = _merge(merged, layer)
    return merged


def _merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out
