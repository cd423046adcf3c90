"""The Slack adapter. Importing this package loads no Slack SDK: ``ADAPTER`` builds the
platform, and ``live_check`` checks the tokens, only for a bot with a ``platforms.slack``
section (the ``slack`` extra)."""

from salon.platforms.slack.adapter import ADAPTER, live_check

__all__ = ["ADAPTER", "live_check"]
