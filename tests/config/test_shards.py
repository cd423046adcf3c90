"""Discord shard settings: checked at load; ``--shards`` and ``shards_per_process`` decide
which shards each process of ``salon run`` runs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from salon.config.models import DiscordConfig
from salon.config.shards import parse_shards, shard_groups, with_shards
from salon.errors import ConfigError
from tests.conftest import bot_config


def sharded(**discord: Any) -> Any:
    return bot_config(platforms={"discord": {"shard_count": 8, **discord}})


def test_shard_ids_are_checked_against_the_count() -> None:
    for wrong, reason in (
        ({"shard_ids": [0, 8]}, "[8] are not in 0 .. 7"),
        ({"shard_ids": [1, 1]}, "names a shard twice"),
        ({"shard_ids": []}, "is empty"),
        ({"shard_count": None, "shard_ids": [0]}, "needs shard_count"),
        ({"shard_count": None, "shards_per_process": 2}, "needs shard_count"),
    ):
        with pytest.raises(ValidationError, match=re.escape(reason)):
            DiscordConfig.model_validate({"shard_count": 8} | wrong)


def test_gateway_and_api_urls_are_checked() -> None:
    with pytest.raises(ValidationError, match="ws:// or wss://"):
        DiscordConfig(gateway_url="http://127.0.0.1:1/gateway")
    with pytest.raises(ValidationError, match="write http://"):
        DiscordConfig(api_base_url="127.0.0.1:8080/api/v10")
    ok = DiscordConfig(api_base_url="http://nirn:8080/api/v10", gateway_url="wss://gw.example")
    assert ok.gateway_url == "wss://gw.example"


def test_parse_shards_reads_ranges_and_lists() -> None:
    assert parse_shards("0-3") == [0, 1, 2, 3]
    assert parse_shards("4,5") == [4, 5]
    assert parse_shards("0-1, 6, 1") == [0, 1, 6]
    for wrong in ("a", "3-1", ""):
        with pytest.raises(ConfigError, match="--shards"):
            parse_shards(wrong)


def test_salon_run_splits_this_machines_shards_into_processes() -> None:
    assert shard_groups(bot_config()) == [[]]  # not sharded: one process, as configured
    assert shard_groups(sharded()) == [list(range(8))]
    assert shard_groups(sharded(shards_per_process=3)) == [[0, 1, 2], [3, 4, 5], [6, 7]]
    mine = sharded(shard_ids=[4, 5, 6, 7], shards_per_process=2)
    assert shard_groups(mine) == [[4, 5], [6, 7]]
    assert shard_groups(sharded(shards_per_process=2), "0-3") == [[0, 1], [2, 3]]


def test_shards_override_is_checked_like_the_config() -> None:
    assert with_shards(sharded(), "6-7").platforms.discord.shard_ids == [6, 7]  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match=r"not in 0 \.\. 7"):
        with_shards(sharded(), "7-8")
    with pytest.raises(ConfigError, match="shard_count"):
        with_shards(bot_config(), "0")
