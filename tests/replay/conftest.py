from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A loopback port the config's platform and provider point at: nothing may connect."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    yield sock
    sock.close()
