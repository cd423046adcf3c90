"""Who may run which tool: allow, ask (or ask_admin: someone else must approve) or deny.

Order of precedence: the bot's ``tool_policies`` for the exposed name, then the server's
``tools`` rules, then the server's ``policy``, then the tool's MCP annotations (read-only ->
allow, destructive -> ask), then the bot's ``default_tool_policy``. A rule with
``arguments`` applies only when every named argument fully matches its pattern.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from salon.config import BotConfig, ToolPolicy, ToolRule
from salon.model import Policy
from salon.tools.base import ToolSpec

__all__ = ["decide", "statically_denied"]


def _matches(rule: ToolRule, arguments: Mapping[str, Any]) -> bool:
    for name, pattern in rule.arguments.items():
        value = arguments.get(name)
        if value is None or re.fullmatch(pattern, str(value)) is None:
            return False
    return True


def _first_rule(
    rules: ToolRule | list[ToolRule] | None, arguments: Mapping[str, Any]
) -> ToolPolicy | None:
    if rules is None:
        return None
    for rule in rules if isinstance(rules, list) else [rules]:
        if _matches(rule, arguments):
            return rule.policy
    return None


def decide(tool: ToolSpec, arguments: Mapping[str, Any], config: BotConfig) -> ToolPolicy:
    server = config.mcp_servers.get(tool.server)
    found = _first_rule(config.tool_policies.get(tool.name), arguments)
    if found is None and server is not None:
        found = _first_rule(server.tools.get(tool.remote_name), arguments)
        found = found or server.policy
    if found is not None:
        return found
    if tool.read_only:
        return Policy.ALLOW
    if tool.destructive:
        return Policy.ASK
    return config.default_tool_policy


def statically_denied(tool: ToolSpec, config: BotConfig) -> bool:
    """Denied whatever the arguments: such a tool is not even offered to the model."""
    return decide(tool, {}, config) == "deny" and not _has_argument_rules(tool, config)


def _has_argument_rules(tool: ToolSpec, config: BotConfig) -> bool:
    server = config.mcp_servers.get(tool.server)
    candidates = [config.tool_policies.get(tool.name)]
    if server is not None:
        candidates.append(server.tools.get(tool.remote_name))
    for rules in candidates:
        if rules is None:
            continue
        for rule in rules if isinstance(rules, list) else [rules]:
            if rule.arguments:
                return True
    return False
