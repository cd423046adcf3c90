"""The parts' records of a config (salon.config.views) follow the config they came from."""

from __future__ import annotations

from salon.config.models import BotConfig


def _config(**overrides: object) -> BotConfig:
    fields: dict[str, object] = {
        "name": "Muse",
        "provider": "p",
        "model": "m",
        "providers": {"p": {"type": "openai"}},
    }
    return BotConfig.model_validate(fields | overrides)


def test_each_record_carries_the_keys_it_names() -> None:
    config = _config(max_tokens=77, hiding_reactions=["🙈"], recency_window_messages=9)
    assert config.render.max_tokens == 77
    assert config.render.name == "Muse"
    assert config.visibility.hiding_reactions == ("🙈",)
    assert config.window.recency_window_messages == 9
    assert config.window.visibility == config.visibility


def test_a_copy_with_changes_gets_records_of_its_own() -> None:
    """A cached record copied along with the model would keep the old values."""
    config = _config(max_tokens=77)
    assert config.render.max_tokens == 77  # made and cached on the original
    changed = config.model_copy(update={"max_tokens": 5, "ignore_dot_messages": False})
    assert changed.render.max_tokens == 5
    assert changed.visibility.ignore_dot_messages is False
    assert config.render.max_tokens == 77


def test_the_records_are_not_keys_of_the_yaml() -> None:
    dumped = _config().model_dump()
    assert not {"render", "window", "visibility"} & dumped.keys()
