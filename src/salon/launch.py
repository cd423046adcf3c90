"""The ``salon`` command's entry point (and ``python -m salon``'s).

Loading Salon and its libraries creates a few hundred thousand objects that live as long as
the process, and the cyclic garbage collector would walk them again and again while they
load. It is paused here; ``salon.cli`` turns it back on once start-up is over, with what
was loaded until then frozen out of its walks (``gc.freeze``): every later collection is
cheaper too. The garbage cycles made while it was paused (about two thousand objects) are
left, which costs less than collecting once.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    gc.disable()
    from salon.cli import main as run

    return run(argv)
