"""``salon replay``: run a bot over a recorded room offline and report what it would have
decided, said and cost, side by side for one or more arms (see docs/REPLAY.md). The
replay's modules load only when the command runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_replay_parser", "run_replay"]

_USAGE = (
    "salon replay [DIR] --bot NAME SOURCE [--as NICK] [--arm NAME=FILE.yaml]... [--frozen]\n"
    "             [--dry-run] [--labels FILE | --links FILE] [--max-cost USD]\n"
    "             [--judge PROVIDER] [--json FILE] [--html FILE]"
)


class _Intermixed(argparse.ArgumentParser):
    """Positionals may come before and after the options (``DIR --bot x SOURCE``), which
    plain argparse refuses once it has matched the first run of positionals."""

    _inside = False

    def parse_known_args(  # type: ignore[override]
        self, args: Any = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self._inside:  # the intermixed parse calls back in here
            return super().parse_known_args(args, namespace)
        self._inside = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._inside = False


def add_replay_parser(sub: Any) -> None:
    replay = sub.add_parser(
        "replay", usage=_USAGE, help="what a bot would have said in a recorded room, and cost"
    )
    replay.__class__ = _Intermixed
    # [DIR] SOURCE as one list: argparse gives a lone first word to SOURCE, and then
    # refuses SOURCE after the options ("salon replay DIR --bot x SOURCE").
    replay.add_argument("where", nargs="+", metavar="[DIR] SOURCE",
                        help="the config directory (default: here), then store:CHANNEL_KEY"
                        "[@SINCE..UNTIL], an IRC log, or a DiscordChatExporter .json")  # fmt: skip
    replay.add_argument("--bot", required=True, help="the bot whose config is replayed")
    replay.add_argument("--as", dest="nick", metavar="NICK", help="the bot plays this person")
    arm_help = "a config overlay to compare (repeat); default: the bot as is"
    replay.add_argument(
        "--arm", action="append", default=[], metavar="NAME=FILE.yaml", help=arm_help
    )
    frozen_help = "the room stays as recorded (default: live, answers join it)"
    replay.add_argument("--frozen", action="store_true", help=frozen_help)
    dry_help = "a canned model, and each vendor's billing rules for cost"
    replay.add_argument("--dry-run", action="store_true", help=dry_help)
    labels = replay.add_mutually_exclusive_group()
    labels.add_argument("--labels", type=Path, metavar="FILE", help="ids to speak at")
    labels.add_argument("--links", type=Path, metavar="FILE", help="'A B -' reply links")
    replay.add_argument("--max-cost", type=float, metavar="USD", help="refuse to start above")
    replay.add_argument("--judge", metavar="PROVIDER", help="compare two arms' answers blind")
    replay.add_argument("--json", type=Path, metavar="FILE", help="JSON lines out")
    replay.add_argument("--html", type=Path, metavar="FILE", help="a self-contained report")


def run_replay(args: argparse.Namespace) -> int:
    from salon.replay.command import replay_command

    if len(args.where) > 2:
        print("error: salon replay takes [DIR] SOURCE: two words at most", file=sys.stderr)
        return 2
    args.dir = Path(args.where[0]) if len(args.where) == 2 else Path()
    args.source = args.where[-1]
    return replay_command(args)
