"""Allow, ask or deny: rules, annotations and defaults."""

from __future__ import annotations

from salon.tools.base import ToolSpec
from salon.tools.policy import decide, statically_denied
from tests.conftest import bot_config


def spec(
    name: str = "write", *, read_only: bool | None = None, destructive: bool | None = None
) -> ToolSpec:
    return ToolSpec(name, "files", name, "", {}, read_only=read_only, destructive=destructive)


SERVER = {"command": "files-server"}


def test_annotations_give_defaults() -> None:
    config = bot_config(mcp_servers={"files": SERVER}, default_tool_policy="deny")
    assert decide(spec(read_only=True), {}, config) == "allow"
    assert decide(spec(destructive=True), {}, config) == "ask"
    assert decide(spec(), {}, config) == "deny"


def test_server_policy_and_tool_rules_win_over_annotations() -> None:
    server = {
        **SERVER,
        "policy": "allow",
        "tools": {
            "write": [{"policy": "allow", "arguments": {"path": "/tmp/.*"}}, {"policy": "ask"}]
        },
    }
    config = bot_config(mcp_servers={"files": server})
    assert decide(spec(destructive=True), {"path": "/tmp/x"}, config) == "allow"
    assert decide(spec(destructive=True), {"path": "/etc/passwd"}, config) == "ask"
    assert decide(spec("read", destructive=True), {}, config) == "allow"  # the server's policy


def test_bot_rules_win_over_server_rules() -> None:
    config = bot_config(
        mcp_servers={"files": {**SERVER, "policy": "allow"}},
        tool_policies={"write": {"policy": "deny"}},
    )
    assert decide(spec(), {}, config) == "deny"
    assert statically_denied(spec(), config)


def test_a_deny_with_argument_rules_is_not_static() -> None:
    config = bot_config(
        mcp_servers={"files": SERVER},
        tool_policies={
            "write": [{"policy": "allow", "arguments": {"path": "/tmp/.*"}}, {"policy": "deny"}]
        },
    )
    assert not statically_denied(spec(), config)
    assert decide(spec(), {"path": "/tmp/a"}, config) == "allow"
    assert decide(spec(), {"path": "/home/a"}, config) == "deny"


def test_ask_admin_is_a_policy_of_its_own() -> None:
    config = bot_config(
        mcp_servers={"files": {**SERVER, "policy": "ask_admin"}},
        tool_policies={"write": {"policy": "ask_admin"}},
    )
    assert decide(spec(), {}, config) == "ask_admin"
    assert decide(spec("read"), {}, config) == "ask_admin"  # the server's policy
    assert not statically_denied(spec(), config)
