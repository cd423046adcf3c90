"""The ``links`` key: entries, defaults, bounds, and how a pinned config layers it."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from salon.config import ChannelConfigs, PinnedConfig
from tests.conftest import bot_config


def test_entries_take_ids_as_numbers_and_have_defaults() -> None:
    config = bot_config(links=[{"channel": 123, "where": [456, "direct"]}])
    (entry,) = config.links
    assert (entry.channel, entry.where) == ("123", ["456", "direct"])
    assert (entry.mode, entry.messages, entry.characters) == ("recent", 20, 4000)


@pytest.mark.parametrize(
    "links",
    [
        [{"channel": "a b"}],
        [{"channel": "x", "mode": "summary"}],
        [{"channel": "x", "messages": 0}],
        [{"channel": f"c{n}"} for n in range(9)],
    ],
)
def test_bad_entries_are_refused(links: list[dict[str, object]]) -> None:
    with pytest.raises(ValidationError):
        bot_config(links=links)


def test_a_pinned_config_replaces_the_layers_links() -> None:
    base = bot_config(links=[{"channel": "discord:1"}])
    configs = ChannelConfigs(base, shared={}, bot=base.model_dump(exclude_unset=True))
    pinned = PinnedConfig("m1", ".config\n---\nlinks:\n  - channel: 2\n    mode: digest")
    resolved = configs.resolve(None, [pinned])
    assert [(e.channel, e.mode) for e in resolved.config.links] == [("2", "digest")]
