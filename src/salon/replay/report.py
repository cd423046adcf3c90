"""What a replay reports: per-arm totals, the flips between arms, the labels' scores;
as JSON lines, a terminal table and a self-contained HTML page.

JSON lines (``--json``): one per message and arm (``arm``, ``index``, ``id``, ``time``,
``author``, ``text``, ``decision``, ``why``, ``answer``, ``input_tokens``,
``cache_read_tokens``, ``cache_write_tokens``, ``output_tokens``, ``cost_usd``,
``side_cost_usd``, ``first_token_s``, ``error``, ``label``), then one per arm with
``"summary": true`` (``arm``, ``messages``, ``spoke``, ``flips``, ``cost_usd``,
``side_cost_usd``, the token totals, ``cache_read_share``, ``first_token_s_median``,
``errors``, and with labels ``labelled``, ``precision``, ``recall``,
``balanced_accuracy``, ``missed``, ``spoke_unwanted``). The judge's lines follow
(``salon.replay.judge``).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from salon.model import Usage
from salon.replay.engine import Row
from salon.replay.judge import Verdicts
from salon.replay.labels import Score

__all__ = ["ArmTotals", "Tally", "html_report", "row_json", "table"]


@dataclass
class ArmTotals:
    arm: str
    messages: int = 0
    spoke: int = 0
    flips: int = 0  # lines where this arm decided otherwise than the first arm
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = 0.0
    ceiling_usd: float | None = 0.0  # had every answer run to max_tokens
    side_cost_usd: float | None = 0.0  # the speak gate's and the evaluator's calls
    first_tokens: list[float] = field(default_factory=list)  # seconds, a real run's answers
    errors: int = 0  # answers a real provider failed
    score: Score = field(default_factory=Score)

    @property
    def first_token_median(self) -> float | None:
        found = sorted(self.first_tokens)
        return found[len(found) // 2] if found else None

    @property
    def cache_read_share(self) -> float | None:
        u = self.usage
        prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens
        return u.cache_read_tokens / prompt if prompt else None

    def as_json(self, labelled: bool) -> dict[str, Any]:
        u = self.usage
        out: dict[str, Any] = {
            "summary": True,
            "arm": self.arm,
            "messages": self.messages,
            "spoke": self.spoke,
            "flips": self.flips,
            "cost_usd": _round(self.cost_usd),
            "side_cost_usd": _round(self.side_cost_usd),
            "input_tokens": u.input_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_share": _round(self.cache_read_share, 4),
            "first_token_s_median": _round(self.first_token_median, 3),
            "errors": self.errors,
        }
        if labelled:
            s = self.score
            out |= {
                "labelled": s.labelled,
                "precision": _round(s.precision, 4),
                "recall": _round(s.recall, 4),
                "balanced_accuracy": _round(s.balanced_accuracy, 4),
                "missed": s.missed,
                "spoke_unwanted": s.spoke_unwanted,
            }
        return out


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


class Tally:
    """Totals per arm, added to one line at a time."""

    def __init__(self, arms: Sequence[str], labels: Mapping[int, bool | None] | None) -> None:
        self.arms = {name: ArmTotals(name) for name in arms}
        self.labels = labels
        self.lines = 0

    def add(self, rows: Sequence[Row]) -> None:
        self.lines += 1
        first = rows[0].decision if rows else ""
        for row in rows:
            totals = self.arms[row.arm]
            if row.line.kind == "system":
                continue
            totals.messages += 1
            spoke = row.decision == "speak"
            totals.spoke += spoke
            totals.flips += row.decision != first
            totals.usage = totals.usage + row.usage
            totals.cost_usd = _plus(totals.cost_usd, row.cost_usd)
            totals.ceiling_usd = _plus(totals.ceiling_usd, row.ceiling_usd)
            totals.side_cost_usd = _plus(totals.side_cost_usd, row.side_cost_usd)
            if row.first_token_s is not None:
                totals.first_tokens.append(row.first_token_s)
            totals.errors += bool(row.error)
            if self.labels is not None:
                totals.score.add(row.line.index, spoke, self.labels.get(row.line.index))

    def label(self, index: int) -> bool | None:
        return None if self.labels is None else self.labels.get(index)


def row_json(row: Row, label: bool | None) -> dict[str, Any]:
    line, u = row.line, row.usage
    return {
        "arm": row.arm,
        "index": line.index,
        "id": line.id,
        "time": line.time.isoformat(),
        "author": line.author,
        "text": line.text,
        "decision": row.decision,
        "why": row.why,
        "answer": row.answer,
        "input_tokens": u.input_tokens,
        "cache_read_tokens": u.cache_read_tokens,
        "cache_write_tokens": u.cache_write_tokens,
        "cache_write_1h_tokens": u.cache_write_1h_tokens,
        "output_tokens": u.output_tokens,
        "cost_usd": _round(row.cost_usd, 8),
        "side_cost_usd": _round(row.side_cost_usd, 8),
        "first_token_s": _round(row.first_token_s, 3),
        "error": row.error,
        "label": label,
    }


def write_json_lines(out: IO[str], rows: Sequence[Row], tally: Tally) -> None:
    for row in rows:
        out.write(json.dumps(row_json(row, tally.label(row.line.index))) + "\n")


def table(tally: Tally, verdicts: Mapping[tuple[str, str], Verdicts] | None = None) -> str:
    """The per-arm totals as a terminal table; with the judge's ``verdicts``, each other
    arm's pair with the first: how often the judge preferred it, and agreed with itself."""
    labelled = tally.labels is not None
    timed = any(t.first_tokens for t in tally.arms.values())
    head = ["arm", "messages", "spoke", "flips", "cost USD", "cache read"]
    head += ["1st token"] if timed else []
    head += ["judged", "preferred", "agreement"] if verdicts else []
    if labelled:
        head += ["precision", "recall", "bal. acc."]
    rows = [head]
    first = next(iter(tally.arms), "")
    for t in tally.arms.values():
        share = t.cache_read_share
        row = [
            t.arm,
            str(t.messages),
            str(t.spoke),
            str(t.flips),
            "no price" if t.cost_usd is None else f"{t.cost_usd:.4f}",
            "-" if share is None else f"{share:.0%}",
        ]
        if timed:
            median = t.first_token_median
            row.append("-" if median is None else f"{median:.2f} s")
        if verdicts:
            row += _judged(verdicts.get((first, t.arm)), t.arm)
        if labelled:
            s = t.score
            row += [_pct(s.precision), _pct(s.recall), _pct(s.balanced_accuracy)]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def _judged(found: Verdicts | None, arm: str) -> list[str]:
    """The judge's columns for an arm's pair with the first (none for the first arm)."""
    if found is None:
        return ["-", "-", "-"]
    wins, other = found.wins.get(arm, 0), found.wins.get(found.arms[0], 0)
    return [str(found.compared), f"{wins} vs {other}", _pct(found.agreement)]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def misses(tally: Tally, limit: int = 20) -> list[str]:
    """The labelled misses of each arm, both ways, a few of each."""
    out = []
    for t in tally.arms.values():
        s = t.score
        if s.missed:
            out.append(f"{t.arm}: silent where it should speak: {_few(s.missed, limit)}")
        if s.spoke_unwanted:
            out.append(f"{t.arm}: spoke where it should not: {_few(s.spoke_unwanted, limit)}")
    return out


def _few(indexes: list[int], limit: int) -> str:
    shown = ", ".join(str(i) for i in indexes[:limit])
    return shown + (f" … ({len(indexes)} in all)" if len(indexes) > limit else "")


_STYLE = (
    "body{font:14px system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}"
    ".answer{white-space:pre-wrap;margin-top:4px}"
    ".speak{background:#dfd}.flip{outline:2px solid #c60}.sys{color:#888}"
)


def html_report(
    title: str, tally: Tally, lines: Sequence[Sequence[Row]], notes: Sequence[str] = ()
) -> str:
    """One page, no outside file: the totals (and ``notes``: the judge's lines), then every
    line with each arm's decision, why, and answer."""
    arms = list(tally.arms)
    summary = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in t.as_json(False).values())
        + "</tr>"
        for t in tally.arms.values()
    )  # fmt: skip
    head = "".join(f"<th>{html.escape(k)}</th>" for k in ArmTotals("").as_json(False))
    body = "".join(_html_line(rows, tally) for rows in lines)
    arm_heads = "".join(f"<th>{html.escape(a)}</th>" for a in arms)
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style><h1>{html.escape(title)}</h1>"
        f"<table><tr>{head}</tr>{summary}</table>"
        + "".join(f"<p>{html.escape(note)}</p>" for note in notes)
        + "<h2>Messages</h2>"
        f"<table><tr><th>#</th><th>time</th><th>who</th><th>text</th><th>label</th>{arm_heads}</tr>"
        f"{body}</table>"
    )


def _html_line(rows: Sequence[Row], tally: Tally) -> str:
    line = rows[0].line
    flip = len({r.decision for r in rows}) > 1
    label = tally.label(line.index)
    cells = "".join(
        f"<td class='{r.decision}{' flip' if flip else ''}' title='{html.escape(r.why)}'>"
        f"{r.decision}<br><small>{html.escape(r.why)}</small>"
        + (f"<div class=answer>{html.escape(r.answer)}</div>" if r.answer else "")
        + "</td>"
        for r in rows
    )
    css = " class=sys" if line.kind == "system" else ""
    return (
        f"<tr{css}><td>{line.index}</td><td>{line.time:%H:%M:%S}</td>"
        f"<td>{html.escape(line.author)}</td><td>{html.escape(line.text)}</td>"
        f"<td>{'' if label is None else label}</td>{cells}</tr>"
    )
