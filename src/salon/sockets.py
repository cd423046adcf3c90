"""Listening sockets for Salon's servers (the web page, ``salon tools serve --http``, Slack's
Request URL): bound by Salon itself, so a busy address is an ``OSError`` at start rather
than a failure inside a server's task, and a restarted server keeps the same socket."""

from __future__ import annotations

import socket

__all__ = ["bind", "url_host"]


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: any free port; IPv6 when ``host`` has a
    colon), not inherited by child processes."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


def url_host(host: str) -> str:
    """``host`` as a URL names it (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host
