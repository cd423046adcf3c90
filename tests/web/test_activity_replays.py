"""The activity page's replays (the summaries ``salon replay`` keeps beside the bot's data)
and, for a live activation that did not answer, why the bot stayed silent."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from salon.cli import main
from salon.trace import GateStep, LimitRefusal, PipelineRecord
from tests.web.conftest import Site
from tests.web.data import activation, llm_call
from tests.web.test_activity import sign_in

LOG = """\
[10:00] <ann> hi all
[10:01] <ben> salon: what is ls?
[10:02] <ann> thanks
"""


async def test_a_replay_the_command_kept_is_listed(site: Site, tmp_path: Path) -> None:
    log = tmp_path / "room.log"
    log.write_text(LOG)
    args = ["replay", str(site.root), "--bot", "salon", str(log), "--dry-run", "--frozen"]
    assert await asyncio.to_thread(main, args) == 0
    kept = list((tmp_path / "data" / "replays").glob("*.json"))
    assert len(kept) == 1
    assert json.loads(kept[0].read_text())["arms"][0]["spoke"] == 1
    assert (await site.client.get("/activity/replays")).status_code == 401
    await sign_in(site)
    assert 'href="/activity/replays"' in (await site.client.get("/activity")).text
    page = await site.client.get("/activity/replays")
    assert page.status_code == 200
    assert "<b>salon</b> as Salon" in page.text
    assert "room.log (frozen, dry run, 3 lines)" in page.text
    assert "<td>current</td><td>3</td><td>1</td><td>0</td><td>no price</td>" in page.text


async def test_replays_are_escaped_and_a_broken_file_is_left_out(
    site: Site, tmp_path: Path
) -> None:
    kept = tmp_path / "data" / "replays"
    kept.mkdir(parents=True)
    (kept / "20261201T000000Z.json").write_text("{not json")
    summary = {
        "bot": "salon", "as": "<b>x</b>", "source": "store:irc:#a<script>", "mode": "live",
        "dry_run": False, "finished_at": 1_790_000_000, "lines": 12,
        "arms": [{"arm": "haiku", "messages": 10, "spoke": 3, "flips": 1, "cost_usd": 0.0123,
                  "cache_read_share": 0.5, "precision": 0.5, "recall": 1.0,
                  "balanced_accuracy": 0.75}],
        "judge": [{"arms": ["now", "haiku"], "compared": 3, "wins": {"now": 1, "haiku": 2},
                   "split": 0, "agreement": 1.0}],
    }  # fmt: skip
    (kept / "20261202T000000Z.json").write_text(json.dumps(summary))
    await sign_in(site)
    page = (await site.client.get("/activity/replays")).text
    assert "<script>" not in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page
    assert "<td>haiku</td><td>10</td><td>3</td><td>1</td><td>$0.0123</td><td>50%</td>" in page
    assert "<td>75%</td>" in page  # balanced accuracy
    assert "judge: now vs haiku on 3 messages: preferred now 1, haiku 2, split 0" in page


async def test_a_silent_activation_says_why_in_words(site: Site) -> None:
    now = 1_790_000_000.0
    gated = activation(now, "anyone?", llm_call("anyone?", read=0, write=0, cost=0.0001))
    gated.outcome, gated.answer = "stopped", ""
    gated.pipeline = PipelineRecord(speak_gate=GateStep("quiet", "No."))
    limited = activation(now + 5, "again?", llm_call("again?", read=0, write=0, cost=0.0))
    limited.outcome, limited.answer = "stopped", ""
    limited.pipeline = PipelineRecord(refused=LimitRefusal("rate", "user:alice", now + 60))
    answered = activation(now + 9, "and?", llm_call("and?", read=0, write=0, cost=0.0))
    ids = await site.store.write_traces([gated, limited, answered])
    await sign_in(site)
    pages = [(await site.client.get(f"/activity/traces/{i}?fragment=1")).text for i in ids]
    assert "Stayed silent: the speak gate said no (&quot;No.&quot;)" in pages[0]
    assert "Stayed silent: a rate limit refused it (user:alice) until 2026-09-21" in pages[1]
    assert "Stayed silent" not in pages[2]
