"""``salon trace``: what bots saw, sent, cost and did, read from the store.

``list`` shows recent activations (newest first, filtered), ``show`` one whole trace (by
its number or by the link of the Discord message that asked), ``request`` the exact
request JSON of one of its calls, ``cost`` the totals per bot, channel, user or day.
"""

from __future__ import annotations

import json
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

from salon.printable import printable, printable_json
from salon.store.sql import TracePart
from salon.trace import TraceSummary, money

__all__ = ["cost", "list_traces", "request", "show"]

_THINKING_SHOWN = 200  # characters of a call's reasoning on its one line
_MESSAGE_LINK = re.compile(r"https?://\S+/channels/[^/]+/\d+/(\d+)/?$")
_ACTIVATION_ID = re.compile(r"[0-9a-f]{12}")


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _table(rows: list[list[str]], out: TextIO) -> None:
    rows = [[printable(cell, one_line=True) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        out.write("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        out.write("\n")


async def list_traces(
    traces: TracePart, *, out: TextIO | None = None, limit: int = 30, **filters: str | None
) -> int:
    out = out or sys.stdout  # the one of the moment, not of the import
    found = await traces.list_traces(limit=limit, **filters)  # type: ignore[arg-type]
    if not found:
        out.write("no traces yet\n")
        return 0
    rows = [_HEADER, *(_row(t) for t in found)]
    _table(rows, out)
    return 0


_HEADER = ["ID", "WHEN (UTC)", "BOT", "CHANNEL", "OUTCOME", "MODEL", "TOKENS in/out/read/write"]
_HEADER += ["COST", "READ (EXPECTED)", "CACHE BREAK"]


def _row(t: TraceSummary) -> list[str]:
    tokens = f"{t.input_tokens}/{t.output_tokens}/{t.cache_read_tokens}/{t.cache_write_tokens}"
    read = f"{_share(t.read_share)} ({_share(t.expected_read_share)})"
    outcome = t.outcome if t.outcome != "error" else f"error: {(t.error or '')[:40]}"
    return [
        str(t.id),
        _when(t.started_at),
        t.bot,
        t.channel,
        outcome,
        t.model or "-",
        tokens,
        money(t.cost),
        read,
        t.cache_break or "-",
    ]


async def _find(traces: TracePart, ref: str) -> int | None:
    if ref.isdigit():
        return int(ref)
    if _ACTIVATION_ID.fullmatch(ref.strip()):  # the id a log line carries: [act <id>]
        found = await traces.trace_for_message(f"activation:{ref.strip()}")
        if found is not None:
            return found
    link = _MESSAGE_LINK.match(ref.strip())
    return await traces.trace_for_message(link[1] if link else ref)


async def show(traces: TracePart, ref: str, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the one of the moment, not of the import
    trace_id = await _find(traces, ref)
    found = await traces.get_trace(trace_id) if trace_id is not None else None
    if found is None:
        print(f"error: no trace {ref!r} (see salon trace list)", file=sys.stderr)
        return 2
    summary, body = found

    def write(text: str) -> None:
        out.write(printable(text))  # people's, models' and tools' text: escapes shown

    when = _when(summary.started_at)
    write(f"trace #{summary.id}: {summary.bot} in {summary.channel}, {when} UTC\n")
    if body.get("activation"):
        write(f"activation {body['activation']} (its log lines carry [act {body['activation']}])\n")
    write(f"outcome: {summary.outcome}")
    write(f" ({body.get('error_kind')}: {summary.error})\n" if summary.error else "\n")
    for trigger in body.get("triggers", []):
        link = f"  {trigger['link']}" if trigger.get("link") else ""
        late = f" ({trigger['delivery']})" if trigger.get("delivery") else ""
        write(f"asked by {trigger['author']}: {trigger['text']!r}{late}{link}\n")
    write(f"config: {', '.join(body.get('layers') or ['(defaults)'])}\n")
    for step, decided in (body.get("pipeline") or {}).items():
        write(f"pipeline: {step}: {json.dumps(decided, ensure_ascii=False)}\n")
    timings = body.get("timings", {})
    write("timings: " + ", ".join(f"{k} {v:.0f} ms" for k, v in timings.items()) + "\n")
    for number, call in enumerate(body.get("calls", []), 1):
        _show_call(number, call, write)
    for tool in body.get("tools", []):
        _show_tool(tool, write)
    if body.get("answer"):
        write(f"\nanswer:\n{body['answer']}\n")
    for note in body.get("notes", []):
        write(f"note: {note}\n")
    write(f"\ncost {money(summary.cost)}, cache read {_share(summary.read_share)} billed, ")
    write(f"{_share(summary.expected_read_share)} expected\n")
    return 0


def _show_call(number: int, call: dict[str, Any], write: Any) -> None:
    prompt = call["input_tokens"] + call["cache_read_tokens"] + call["cache_write_tokens"]
    billed = call["cache_read_tokens"] / prompt if prompt else None
    write(f"\ncall {number} ({call['kind']}): {call['provider']} {call['model']}")
    first, total = call.get("first_token_ms"), call.get("total_ms")
    write(f", first token {first:.0f} ms" if first is not None else "")
    write(f", {total:.0f} ms in all\n" if total is not None else "\n")
    reasoning = call.get("reasoning_tokens") or 0
    spent = f" ({reasoning} reasoning)" if reasoning else ""
    write(
        f"  tokens: {call['input_tokens']} in, {call['output_tokens']} out{spent}, "
        f"{call['cache_read_tokens']} read from cache, {call['cache_write_tokens']} written; "
        f"cost {money(call.get('cost'))}\n"
    )
    expected = _share(call.get("expected_read_share"))
    write(f"  cache read: {_share(billed)} billed, {expected} expected\n")
    divergence = call.get("divergence")
    if divergence:
        where = f" at message {divergence['index']}" if divergence["index"] >= 0 else ""
        which = f" ({divergence['message_id']})" if divergence.get("message_id") else ""
        write(f"  prefix: {divergence['cause']}{where}{which}\n")
    if call.get("cache_write_wasted_tokens"):
        unread = call["cache_write_wasted_tokens"]
        write(f"  cache waste: {unread} tokens the previous call wrote were never read\n")
    if call.get("cache_ttls"):
        why = f" ({call['cache_reason']})" if call.get("cache_reason") else ""
        write(f"  cache ttl: {', '.join(call['cache_ttls'])}{why}\n")
    for flag in call.get("flags", []):
        write(f"  ! {flag}\n")
    if call.get("thinking"):
        tokens = f"{reasoning} tokens, " if reasoning else ""
        write(f"  thinking ({tokens}{_folded(call['thinking'])}\n")
    if call.get("error"):
        write(f"  error: {call['error']}\n")


def _folded(text: str, limit: int = _THINKING_SHOWN) -> str:
    """Reasoning folded to one line: its length, then its start."""
    line = " ".join(text.split())
    start = line if len(line) <= limit else line[: limit - 1] + "…"
    return f"{len(text)} characters): {start}"


def _show_tool(tool: dict[str, Any], write: Any) -> None:
    write(f"\ntool {tool['name']} ({tool['verdict']}, {tool['duration_ms']:.0f} ms)\n")
    write(f"  arguments: {json.dumps(tool['arguments'], ensure_ascii=False)}\n")
    approval = tool.get("approval")
    if approval:
        by = approval["by"] or "nobody"
        write(f"  approval: {approval['answer']} by {by} at {approval['at']}\n")
    for asked in tool.get("asked") or ():
        by = asked["by"] or "nobody"
        write(f"  {asked['server']} asked: {asked['message']} -> {asked['answer']} by {by}\n")
    result = tool["result"]
    write(f"  result{' (error)' if tool['is_error'] else ''}: {result[:500]}\n")


async def request(traces: TracePart, ref: str, *, call: int = 1, out: TextIO | None = None) -> int:
    out = out or sys.stdout  # the one of the moment, not of the import
    trace_id = await _find(traces, ref)
    found = await traces.get_trace(trace_id) if trace_id is not None else None
    calls = found[1].get("calls", []) if found else []
    if not 1 <= call <= len(calls):
        what = f"no call {call} in trace {ref}" if found else f"no trace {ref!r}"
        print(f"error: {what}", file=sys.stderr)
        return 2
    out.write(printable_json(calls[call - 1]["request"]) + "\n")
    return 0


async def cost(
    traces: TracePart,
    *,
    by: Literal["bot", "channel", "user", "day"] = "day",
    days: float | None = None,
    out: TextIO | None = None,
) -> int:
    out = out or sys.stdout  # the one of the moment, not of the import
    since = time.time() - days * 86400 if days else None
    rows = await traces.cost_by(by, since=since)
    if not rows:
        out.write("no traces yet\n")
        return 0
    table = [
        [
            by.upper(),
            "ACTIVATIONS",
            "INPUT",
            "OUTPUT",
            "CACHE READ",
            "CACHE WRITE",
            "COST",
            "WASTED",
        ]
    ]
    for row in rows:
        table.append(
            [
                row.key,
                str(row.activations),
                str(row.input_tokens),
                str(row.output_tokens),
                str(row.cache_read_tokens),
                str(row.cache_write_tokens),
                money(row.cost),
                str(row.cache_write_wasted_tokens),
            ]
        )
    total = sum(r.cost for r in rows)
    wasted = str(sum(r.cache_write_wasted_tokens for r in rows))
    activations = str(sum(r.activations for r in rows))
    table.append(["total", activations, "", "", "", "", money(total), wasted])
    _table(table, out)
    return 0
