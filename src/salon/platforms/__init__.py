"""Chat platforms behind the ``Platform`` protocol."""

from salon.platforms.base import ChatLog, EventSink, Platform

__all__ = ["ChatLog", "EventSink", "Platform"]
