"""``salon replay`` once its arguments are read: the source, the arms, the labels, the
run and its reports."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from salon.agent.conversation.sidecall import side_config
from salon.bots import data_dir, store_for
from salon.config import BotConfig, ConfigSet, load_config_dir
from salon.errors import ConfigError, ConfigProblem
from salon.model import Participant
from salon.printable import printable
from salon.replay.arms import Arm, arms_for, parse_arm_option
from salon.replay.calls import ArmCalls, provider_secrets
from salon.replay.engine import Replay, Row, me_for
from salon.replay.estimate import estimate, providers_used
from salon.replay.judge import Pair, Verdicts, judge_pairs, pairs_of
from salon.replay.labels import labels_from_ids, labels_from_links, read_ids, read_links
from salon.replay.report import Tally, html_report, misses, table, write_json_lines
from salon.replay.saved import save_summary
from salon.replay.sources import Recorded, read_source_file
from salon.replay.stored import bot_nick, parse_store_source, read_store

__all__ = ["replay_command"]


@dataclass
class _Plan:
    replay: Replay
    tally: Tally
    title: str
    judge: _Judge | None = None
    pairs: list[Pair] = field(default_factory=list)  # for the judge


@dataclass(frozen=True)
class _Judge:
    name: str
    config: BotConfig
    calls: ArmCalls


def replay_command(args: argparse.Namespace) -> int:
    configs = load_config_dir(args.dir)
    return asyncio.run(_replay(configs, args))


async def _replay(configs: ConfigSet, args: argparse.Namespace) -> int:
    key, config = configs.bot(args.bot)
    recorded, nick = await _source(configs, key, args)
    me = me_for(recorded, config, nick)
    arms = arms_for(configs.channel_configs(key), None, [parse_arm_option(a) for a in args.arm])
    labels = _labels(args, recorded, me)
    judge = _judge(config, arms, args)
    calls = _calls(arms, args)  # a missing key is refused here, before anything is sent
    if not args.dry_run and not await _affordable(recorded, arms, me, args, judge):
        return 2
    replay = Replay(recorded, arms, me, frozen=args.frozen, calls=lambda a: calls[a.name])
    title = f"salon replay: {key} as {me.name} in {recorded.channel}"
    plan = _Plan(replay, Tally([a.name for a in arms], labels), title, judge)
    try:
        kept = await _run(plan, args)
        verdicts = await _judged(plan, args)
    finally:
        await plan.replay.aclose()
        if judge is not None:
            await judge.calls.aclose()
    said = _judge_lines(plan, verdicts)
    save_summary(data_dir(configs.root, config) / "replays", _summary(plan, args, verdicts))
    if args.html is not None:
        page = html_report(plan.title, plan.tally, kept, said)
        args.html.write_text(page, encoding="utf-8")
    for line in [table(plan.tally, verdicts), *said, *misses(plan.tally)]:
        print(printable(line))
    return 0


async def _affordable(
    recorded: Recorded,
    arms: list[Arm],
    me: Participant,
    args: argparse.Namespace,
    judge: _Judge | None,
) -> bool:
    """Say what the real run will cost at most; False (said in one line) above --max-cost."""
    judging = judge.config if judge is not None else None
    found = await estimate(recorded, arms, me, frozen=args.frozen, judge=judging)
    print(printable(found.line()), file=sys.stderr)
    refusal = found.refusal(args.max_cost)
    if refusal is not None:
        print(printable(f"error: {refusal}"), file=sys.stderr)
    return refusal is None


def _judge(config: BotConfig, arms: list[Arm], args: argparse.Namespace) -> _Judge | None:
    """The judge ``--judge`` names: a provider of the bot's config, with its key."""
    if args.judge is None:
        return None
    reason = None
    if args.dry_run:
        reason = "the judge compares real answers: run without --dry-run"
    elif len(arms) < 2:
        reason = "the judge compares two arms: give at least two --arm"
    elif args.judge not in config.providers:
        known = ", ".join(sorted(config.providers))
        reason = f"no provider {args.judge!r} in the bot's providers ({known})"
    if reason is not None:
        raise ConfigError([ConfigProblem("(command line)", "--judge", reason)])
    judging = side_config(config, args.judge, None)
    secrets = provider_secrets(judging, {args.judge}, os.environ)
    return _Judge(args.judge, judging, ArmCalls(secrets))


async def _judged(plan: _Plan, args: argparse.Namespace) -> dict[tuple[str, str], Verdicts]:
    """Ask the judge about every pair (its lines go to --json's file too)."""
    judge = plan.judge
    if judge is None:
        return {}
    recorded = plan.replay.recorded
    verdicts, lines = await judge_pairs(plan.pairs, judge.config, judge.calls, recorded)
    if args.json is not None:
        with args.json.open("a", encoding="utf-8") as out:
            for line in [*lines, *(v.as_json() for v in verdicts.values())]:
                out.write(json.dumps(line) + "\n")
    return verdicts


def _summary(
    plan: _Plan, args: argparse.Namespace, verdicts: dict[tuple[str, str], Verdicts]
) -> dict[str, Any]:
    """What the activity page lists of this replay."""
    recorded = plan.replay.recorded
    labelled = plan.tally.labels is not None
    return {
        "title": plan.title,
        "bot": args.bot,
        "source": args.source,
        "channel": recorded.channel,
        "as": plan.replay.me.name,
        "mode": "frozen" if args.frozen else "live",
        "dry_run": bool(args.dry_run),
        "finished_at": time.time(),
        "lines": len(recorded.lines),
        "arms": [t.as_json(labelled) for t in plan.tally.arms.values()],
        "judge": [v.as_json() for v in verdicts.values()],
    }


def _judge_lines(plan: _Plan, verdicts: dict[tuple[str, str], Verdicts]) -> list[str]:
    if plan.judge is None:
        return []
    if not verdicts:
        return [f"judge {plan.judge.name}: no message where two arms both answered"]
    return [v.line(plan.judge.name) for v in verdicts.values()]


async def _source(
    configs: ConfigSet, key: str, args: argparse.Namespace
) -> tuple[Recorded, str | None]:
    if not args.source.startswith("store:"):
        return read_source_file(Path(args.source)), args.nick
    config = configs.bots[key]
    store = store_for(configs.root, config)
    await store.open()
    try:
        recorded = await read_store(store, key, parse_store_source(args.source))
    finally:
        await store.close()
    return recorded, args.nick or bot_nick(config, recorded)


def _calls(arms: list[Arm], args: argparse.Namespace) -> dict[str, ArmCalls]:
    """Each arm's calls: a dry run's, or its real providers with their keys."""
    if args.dry_run:
        return {arm.name: ArmCalls(None) for arm in arms}
    environ = os.environ
    return {
        arm.name: ArmCalls(provider_secrets(arm.config, providers_used(arm.config), environ))
        for arm in arms
    }


def _labels(
    args: argparse.Namespace, recorded: Recorded, me: Participant
) -> dict[int, bool | None] | None:
    if args.links is not None:
        if args.nick is None:
            reason = "--links labels the messages NICK answered: give --as NICK"
            raise ConfigError([ConfigProblem("(command line)", "--links", reason)])
        return labels_from_links(recorded.lines, read_links(args.links), me.id)
    if args.labels is not None:
        return labels_from_ids(recorded.lines, read_ids(args.labels), me.id)
    return None


async def _run(plan: _Plan, args: argparse.Namespace) -> list[list[Row]]:
    """Every line through every arm; the rows kept only for an HTML report."""
    kept: list[list[Row]] = []
    total = len(plan.replay.recorded.lines)
    done = 0
    with _json_out(args.json) as out:
        async for rows in plan.replay.rows():
            done += 1
            plan.tally.add(rows)
            if plan.judge is not None:
                plan.pairs.extend(pairs_of(rows, plan.replay.recorded))
            if out is not None:
                write_json_lines(out, rows, plan.tally)
            if args.html is not None:
                kept.append(rows)
            _progress(done, total)
        if out is not None:
            for totals in plan.tally.arms.values():
                out.write(json.dumps(totals.as_json(plan.tally.labels is not None)) + "\n")
    return kept


@contextlib.contextmanager
def _json_out(path: Path | None) -> Iterator[IO[str] | None]:
    if path is None:
        yield None
        return
    with path.open("w", encoding="utf-8") as out:
        yield out


def _progress(done: int, total: int) -> None:
    """A bar on a terminal's stderr, redrawn every 50 lines and at the end."""
    if not sys.stderr.isatty() or (done % 50 and done != total):
        return
    filled = 30 * done // max(total, 1)
    end = "\n" if done == total else ""
    print(f"\r[{'#' * filled}{'.' * (30 - filled)}] {done}/{total}", end=end, file=sys.stderr)
