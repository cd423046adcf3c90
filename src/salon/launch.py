"""The ``salon`` command's entry point (and ``python -m salon``'s).

Loading Salon and its libraries creates a few hundred thousand objects that live as long as
the process, and the cyclic garbage collector would walk them again and again while they
load. It is paused here; ``salon.cli`` turns it back on once start-up is over, with what
was loaded until then frozen out of its walks (``gc.freeze``): every later collection is
cheaper too. The garbage cycles made while it was paused (about two thousand objects) are
left, which costs less than collecting once.

pydantic looks for plugins (entry points of the group ``pydantic``) when it builds its first
model, reading the metadata of every installed distribution: 7-14 ms of CPU with 150 of
them, 2-3 % of a bot's start. No feature of Salon is such a plugin, so the search is
skipped, unless the operator sets ``PYDANTIC_DISABLE_PLUGINS`` (empty: disable none), in
which case pydantic reads it as usual.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    gc.disable()
    _skip_pydantic_plugins()
    from salon.cli import main as run

    return run(argv)


def _skip_pydantic_plugins() -> None:
    if "PYDANTIC_DISABLE_PLUGINS" in os.environ:
        return
    from pydantic.plugin import _loader

    if _loader._plugins is None:  # found none: its cache, read before any search
        _loader._plugins = {}
