"""Config YAML is read with limits: no aliases, bounded depth and size, no duplicate keys."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from salon.config import ChannelConfigs, PinnedConfig, load_config_dir
from salon.errors import ConfigError
from tests.conftest import WriteConfig, bot_config

SHARED = """\
providers:
  local: {type: openai, model: small, base_url: "http://127.0.0.1:9/v1"}
provider: local
"""

# 725 bytes of YAML that expand to 9**9 strings when aliases are followed.
BILLION_LAUGHS = (
    'provider: local\nextra: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(
        f"{b}: &{b} [*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a},*{a}]\n"
        for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
)

DEEP = "[" * 2000 + "]" * 2000


def problems_of(root: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config_dir(root)
    return [str(p) for p in caught.value.problems]


def test_billion_laughs_is_refused_without_expanding(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper=BILLION_LAUGHS)
    tracemalloc.start()
    try:
        found = problems_of(root)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(found) == 1
    assert "helper.yaml:2: extra: YAML anchors (&) and aliases (*) are not supported" in found[0]
    assert peak < 5_000_000


def test_an_alias_alone_is_refused_at_its_line(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="system_prompt: hi\nstop_sequences:\n  - *nowhere\n")
    (problem,) = problems_of(root)
    assert "helper.yaml:3: stop_sequences.0: YAML anchors (&) and aliases (*)" in problem


def test_deep_nesting_in_a_file_is_a_file_line_error(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper=f"system_prompt: hi\nstop_sequences: {DEEP}\n")
    (problem,) = problems_of(root)
    assert "helper.yaml:2: stop_sequences: nested deeper than 64 levels" in problem


def test_duplicate_keys_name_the_key_and_both_lines(write_config: WriteConfig) -> None:
    root = write_config(
        SHARED,
        helper="max_tokens: 5\nplatforms:\n  terminal:\n    user_name: a\n    user_name: b\nmax_tokens: 7\n",
    )
    found = problems_of(root)
    assert len(found) == 2
    assert any(
        "helper.yaml:5: platforms.terminal.user_name: set twice, first on line 4" in p
        for p in found
    )
    assert any("helper.yaml:6: max_tokens: set twice, first on line 1" in p for p in found)


def test_an_oversized_file_is_refused_unread(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="system_prompt: " + "x" * 1_100_000 + "\n")
    (problem,) = problems_of(root)
    assert "helper.yaml: (top level): larger than 1000000 bytes" in problem


def test_problems_of_every_file_are_collected(write_config: WriteConfig) -> None:
    root = write_config(
        SHARED + "a: 1\na: 2\n", one=BILLION_LAUGHS, two=f"stop_sequences: {DEEP}\n"
    )
    found = problems_of(root)
    assert [p.split(":")[0].rsplit("/", 1)[-1] for p in found] == [
        "shared.yaml",
        "one.yaml",
        "two.yaml",
    ]


def resolve_pin(write_config: WriteConfig, body: str) -> tuple[int, dict[str, str]]:
    resolver = load_config_dir(write_config(SHARED, muse="max_tokens: 9\n")).channel_configs("muse")
    pinned = [
        PinnedConfig("bad", ".config\n---\n" + body),
        PinnedConfig("ok", ".config\nmode: prefill"),
    ]
    resolved = resolver.resolve(None, pinned)
    assert resolved.config.mode == "prefill"  # the other pin still applies
    return resolved.config.max_tokens, dict(resolved.rejected)


def test_a_deeply_nested_pin_is_rejected_with_a_reason(write_config: WriteConfig) -> None:
    max_tokens, rejected = resolve_pin(write_config, f"max_tokens: 1\nstop_sequences: {DEEP}")
    assert max_tokens == 9
    assert rejected == {"bad": "line 2: stop_sequences: nested deeper than 64 levels"}


def test_a_pin_with_aliases_is_rejected(write_config: WriteConfig) -> None:
    max_tokens, rejected = resolve_pin(
        write_config, BILLION_LAUGHS.replace("provider: local\n", "")
    )
    assert max_tokens == 9
    assert rejected["bad"].startswith(
        "line 1: extra: YAML anchors (&) and aliases (*) are not supported"
    )


def test_a_pin_with_a_duplicate_key_is_rejected(write_config: WriteConfig) -> None:
    max_tokens, rejected = resolve_pin(write_config, "max_tokens: 1\nmax_tokens: 2")
    assert max_tokens == 9
    assert rejected == {"bad": "line 2: max_tokens: set twice, first on line 1"}


def test_an_oversized_pin_is_rejected(write_config: WriteConfig) -> None:
    _, rejected = resolve_pin(write_config, "system_prompt: " + "x" * 20_000)
    assert rejected == {"bad": "longer than 20000 characters"}


def test_a_control_character_is_an_error_not_a_crash(write_config: WriteConfig) -> None:
    root = write_config(SHARED, helper="max_tokens: 5\nsystem_prompt: a\x07b\n")
    (problem,) = problems_of(root)
    assert "helper.yaml:2: (top level): invalid YAML: character #x0007 is not allowed" in problem


def test_a_control_character_in_a_pin_is_a_rejection(write_config: WriteConfig) -> None:
    _, rejected = resolve_pin(write_config, "max_tokens: 1\nsystem_prompt: \x00")
    assert rejected == {"bad": "line 2: invalid YAML: character #x0000 is not allowed"}


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("ab:-[]{}&*!?|>#'\",\n\t 1.%@`\x00\x07\ufffe")), max_size=80
    )
)
def test_no_pin_text_escapes_the_resolver(body: str) -> None:
    resolver = ChannelConfigs(bot_config())
    resolved = resolver.resolve(None, [PinnedConfig("p", ".config\n" + body)])
    assert all(isinstance(reason, str) and reason for _, reason in resolved.rejected)
