"""What people and the operator are told of an activation: one line to the log per request
and per reply (cut; whole under DEBUG), and failure reasons a channel may read, with the
machine's addresses and paths taken out."""

from __future__ import annotations

import logging
import re

from salon.agent.activation import Activation

__all__ = ["ERROR_TEXT_LIMIT", "log_reply", "log_request", "public_text"]

logger = logging.getLogger("salon.agent.dispatch")  # the lines keep the name they always had

ERROR_TEXT_LIMIT = 300

# What a channel must not see of the machine: network addresses (a socket's ('host', port),
# URLs, [IPv6]:port, IPv4 with or without a port, host.name:port) and file paths.
_ADDRESS = re.compile(
    r"\(\s*'[^']*'\s*,\s*\d+(?:\s*,\s*\d+)*\s*\)"
    r"|\b[A-Za-z][\w+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;!?)]"
    r"|\[[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*\](?::\d+)?"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?\b"
    r"|\b(?:localhost|[\w-]+(?:\.[\w-]+)+):\d{1,5}\b"
)
_PATH = re.compile(r"(?<![\w.~/-])(?:~|\.{1,2})?(?:/[\w.@%+-]+){2,}/?|\b[A-Za-z]:\\[^\s'\"]+")


def public_text(text: str) -> str:
    """``text`` with addresses and paths taken out, for a line shown in a channel."""
    return _PATH.sub("<path>", _ADDRESS.sub("<address>", text))


_REQUEST_CHARS = 100  # of what was asked, in the log line (whole under DEBUG)
_REPLY_CHARS = 200  # of the answer


def _cut(text: str, limit: int) -> str:
    if logger.isEnabledFor(logging.DEBUG) or len(text) <= limit:
        return text
    return text[:limit] + "…"


def log_request(activation: Activation) -> None:
    """One line per activation: who asked what (the activation id is on every line)."""
    trigger = activation.trigger
    if trigger is not None:
        text = _cut(trigger.text, _REQUEST_CHARS)
        logger.info("request from %s in %s: %r", trigger.author.name, activation.channel.key, text)
    else:
        logger.info("request in %s: a scheduled task", activation.channel.key)


def log_reply(activation: Activation, answer: str) -> None:
    if answer:
        logger.info("reply in %s: %r", activation.channel.key, _cut(answer, _REPLY_CHARS))
    else:
        logger.info("no reply in %s", activation.channel.key)
