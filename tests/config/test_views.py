"""The parts' records of a config (salon.config.views) follow the config they came from."""

from __future__ import annotations

import dataclasses
from functools import cached_property
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import pytest
from pydantic import BaseModel

from salon.config import models, views
from salon.config.models import BotConfig
from salon.config.views import (
    Derived,
    In,
    RenderSettings,
    Shaping,
    Visibility,
    WindowSettings,
)


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


RECORDS = (Visibility, WindowSettings, Shaping, RenderSettings)


def _as_recorded(annotation: Any) -> Any:
    """A record holds a list setting as a tuple, so the record stays immutable."""
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        return tuple[item, ...]  # type: ignore[valid-type]
    return annotation


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.__name__)
def test_every_record_field_is_the_setting_of_that_name(record: type[Any]) -> None:
    """A record field is a BotConfig field of the same name and type, or another record."""
    hints = get_type_hints(record, vars(views))
    for field in dataclasses.fields(record):
        setting = BotConfig.model_fields.get(field.name)
        if setting is None:
            made = getattr(BotConfig, field.name, None)
            assert isinstance(made, cached_property), field.name
            assert hints[field.name] == get_type_hints(made.func, vars(models))["return"]
        else:
            assert hints[field.name] == _as_recorded(setting.annotation), field.name


class _Toy(BaseModel):
    kept: Annotated[int, In(Visibility)] = 1
    unread: int = 2


def test_a_record_and_its_model_that_disagree_are_refused() -> None:
    """A setting marked for a record it is missing from, or a record field no setting
    fills, is an error at import rather than a record that silently lacks it."""
    with pytest.raises(TypeError) as caught:
        Derived(Visibility, _Toy)
    assert str(caught.value) == (
        "Visibility of _Toy: kept is marked for it but is not one of its fields; "
        "ignore_dot_messages is neither a field marked for it nor a record the model makes; "
        "hiding_reactions is neither a field marked for it nor a record the model makes"
    )
