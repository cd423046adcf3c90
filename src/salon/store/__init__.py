"""Persistence behind the ``Store`` protocol."""

from salon.store.base import Store

__all__ = ["Store"]
