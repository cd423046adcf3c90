"""Run benchmarks and print their figures as a table, or as JSON lines with --json."""

from __future__ import annotations

import argparse
import asyncio
import platform
import sys
from collections.abc import Awaitable, Callable

from bench import (
    activation,
    cache_alarm,
    caching,
    catchup,
    chatlog,
    discord_cpu,
    discord_history,
    faults,
    floor_parts,
    integrations,
    kill9,
    load,
    local,
    matrix_cpu,
    memory,
    otel,
    pipeline,
    postgres,
    replay,
    rooms,
    slack_cpu,
    tools,
    trace_store,
    traces,
)
from bench.figures import Figure

BENCHES: dict[str, Callable[[], Awaitable[list[Figure]]]] = {
    "activation_overhead": activation.run,
    "trace_overhead": activation.trace_overhead,
    "thinking_overhead": activation.thinking_overhead,
    "otel_overhead": otel.run,
    "overhead_growth": activation.growth,
    "tool_call": tools.run,
    "chatlog": chatlog.run,
    "history_requests": discord_history.run,
    "discord_cpu": discord_cpu.run,
    "floor_parts": floor_parts.run,
    "matrix_cpu": matrix_cpu.run,  # a real Synapse (matrix-synapse, the dev extra)
    "slack_cpu": slack_cpu.run,
    "cache_billing": caching.run,
    "cache_thinking": caching.thinking,
    "cache_alarm_detect_answers": cache_alarm.run,
    "faults": faults.run,
    "kill9": kill9.run,
    "catchup_gaps": catchup.gaps,
    "catchup_startup_cpu_ratio": catchup.startup_cpu,
    "load": load.run,
    "trace_query": traces.run,
    "trace_store": trace_store.run,
    "pipeline_overhead": pipeline.pipeline_overhead,
    "evaluator_tokens_saved": pipeline.evaluator_savings,
    "integrations": integrations.run,
    "memory_leaks": memory.memory_leaks,
    "cache_read_share_memory": memory.cache_read_share_memory,
    "cache_read_share_tools": memory.cache_read_share_tools,
    "reach_leaks": memory.reach_leaks,
    "rooms": rooms.run,
    "recall_p50_ms": memory.recall_p50,
    "memory_overhead_ratio": memory.memory_overhead,
    # These need a PostgreSQL server: scripts/with-postgres .venv/bin/python -m bench pg_ schedule
    "pg_activation_overhead": postgres.activation_ratio,
    "pg_chatlog_search": postgres.chatlog_search,
    "schedule_claims": postgres.claims,
    "local": local.run,
    "replay_messages_per_s": replay.messages_per_s,  # needs ../shared/data beside the repo
    "replay_speak_balanced_accuracy_rules": replay.speak_balanced_accuracy,
    "replay_cache_cost_vs_best_fixed_real": replay.cache_cost_vs_best_fixed,
    "replay_cost_per_answer_ratio_naive": replay.cost_per_answer_naive,
}


def _selected(names: list[str]) -> list[str]:
    if not names:
        return list(BENCHES)
    chosen = [b for b in BENCHES if any(b.startswith(n) or n.startswith(b) for n in names)]
    unknown = [n for n in names if not any(b.startswith(n) or n.startswith(b) for b in BENCHES)]
    if unknown:
        sys.exit(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(BENCHES)}")
    return chosen


def _table(figures: list[Figure]) -> str:
    rows = [("figure", "value", "unit", "target", "ok")]
    rows += [
        (f.name, f"{f.value:.6g}", f.unit, f.target_text(), "yes" if f.ok else "NO")
        for f in figures
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", help="benchmarks or figure names to run (default: all)")
    parser.add_argument("--json", action="store_true", help="one JSON object per figure and line")
    args = parser.parse_args()
    figures: list[Figure] = []
    for name in _selected(args.names):
        figures.extend(asyncio.run(BENCHES[name]()))
    if args.json:
        for figure in figures:
            print(figure.json())
    else:
        print(f"# {platform.node()} {platform.machine()} Python {platform.python_version()}")
        print(_table(figures))
    return 0 if all(f.ok for f in figures) else 1


if __name__ == "__main__":
    raise SystemExit(main())
