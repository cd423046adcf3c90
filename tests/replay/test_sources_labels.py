"""Reading recorded rooms and their labels; the irc-disentanglement corpus (Kummerfeld et
al., ACL 2019; CC BY 4.0) from ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from salon.replay.labels import labels_from_ids, labels_from_links, read_links, score
from salon.replay.sources import read_discord, read_irc

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "irc-disentanglement"
DEV = CORPUS / "dev" / "2004-11-15_03.raw.txt"
corpus = pytest.mark.skipif(not DEV.is_file(), reason="the shared corpus is not beside the repo")


def test_an_irc_log_keeps_line_numbers_kinds_and_passes_midnight(tmp_path: Path) -> None:
    log = tmp_path / "2026-01-02.log"
    log.write_text(
        "[23:59] <alice> bot: hi\n"
        "=== bob has joined #room\n"
        "[23:59:30] * bob waves\n"
        "[00:01] <@carol> morning\n"
    )
    room = read_irc(log)
    assert room.channel == "#room"
    assert [(x.index, x.kind, x.author) for x in room.lines] == [
        (0, "message", "alice"), (1, "system", "bob"), (2, "action", "bob"), (3, "message", "carol"),
    ]  # fmt: skip
    assert room.lines[2].text == "/me waves"
    assert room.lines[3].time.isoformat() == "2026-01-03T00:01:00+00:00"


def test_a_discord_export_gives_authors_replies_and_mentions(tmp_path: Path) -> None:
    export = {
        "channel": {"id": "9", "name": "general"},
        "messages": [
            {"id": "1", "type": "Default", "timestamp": "2026-01-02T10:00:00+00:00",
             "content": "hello", "author": {"id": "11", "name": "ann"}},
            {"id": "2", "type": "Reply", "timestamp": "2026-01-02T10:01:00+00:00",
             "content": "<@22> hi", "author": {"id": "12", "name": "ben", "isBot": False},
             "mentions": [{"id": "22"}], "reference": {"messageId": "1"}},
        ],
    }  # fmt: skip
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export))
    room = read_discord(path)
    assert room.channel == "#general"
    assert room.lines[1].reply_to_id == "1"
    assert room.lines[1].mentions == ("discord:22",)


@corpus
def test_reply_links_label_what_the_person_answered_and_leave_context_unlabelled() -> None:
    room = read_irc(DEV)
    links = read_links(DEV.with_name("2004-11-15_03.annotation.txt"))
    labels = labels_from_links(room.lines, links, "irc:hrdwrbob")
    assert all(labels[i] is None for i in range(1000))  # before the first annotated line
    answered = {a for a, b in links if a != b and room.lines[b].author == "HrdwrBoB"}
    others = {a for a in answered if a >= 1000 and room.lines[a].author != "HrdwrBoB"}
    assert others
    assert all(labels[i] is True for i in others)
    negatives = [i for i, label in labels.items() if label is False]
    assert negatives
    assert not set(negatives) & answered
    own = [x.index for x in room.lines if x.author == "HrdwrBoB" and x.index >= 1000]
    assert own
    assert all(labels[i] is None for i in own)
    system = [x.index for x in room.lines if x.kind == "system" and x.index >= 1000]
    assert all(labels[i] is None for i in system)


def test_scores_count_misses_both_ways(tmp_path: Path) -> None:
    log = tmp_path / "room.log"
    log.write_text("".join(f"[10:0{i}] <p{i}> line {i}\n" for i in range(5)))
    room = read_irc(log)
    labels = labels_from_ids(room.lines, ["1", "2"], "irc:nobody")
    result = score([(0, True), (1, True), (2, False), (3, False), (4, False)], labels)
    assert (result.precision, result.recall) == (0.5, 0.5)
    assert result.balanced_accuracy == pytest.approx((0.5 + 2 / 3) / 2)
    assert (result.spoke_unwanted, result.missed) == ([0], [2])
