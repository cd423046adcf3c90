"""What the integrations need from the environment and the config directory.

One set of rules serves ``salon check`` (which says what to set) and the bot at start (which
leaves out an integration that cannot work). An integration that cannot work at all without
a missing key is an error for ``salon check`` and is simply not offered by a running bot; a
key that only upgrades an integration (AccuWeather over Open-Meteo, GreyNoise's enterprise
API over the community one) is a warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from salon.config.models import (
    BotConfig,
    ComfyUIIntegration,
    GreyNoiseIntegration,
    IntegrationConfig,
    PixelLabIntegration,
    SearchIntegration,
    WeatherIntegration,
)
from salon.errors import ConfigProblem

__all__ = [
    "PROMPT_PLACEHOLDER",
    "IntegrationFindings",
    "check_integrations",
    "integration_secrets",
    "load_workflow",
    "unavailable_reason",
]

PROMPT_PLACEHOLDER = "{{prompt}}"

Lookup = Callable[[str], str | None]
Locate = Callable[[str, str], ConfigProblem]


@dataclass(frozen=True)
class _Finding:
    key: str  # the key under integrations.<name>
    reason: str
    fatal: bool


@dataclass(frozen=True)
class IntegrationFindings:
    errors: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)


def integration_secrets(bot: BotConfig) -> list[tuple[str, str]]:
    """(key path, environment variable) of every key an enabled integration may use."""
    found: list[tuple[str, str]] = []
    for name, config in bot.integrations.configured().items():
        for key in ("api_key_env", "accuweather_api_key_env"):
            env_name = getattr(config, key, None)
            if env_name:
                found.append((f"integrations.{name}.{key}", env_name))
    return found


def load_workflow(path: Path) -> dict[str, Any]:
    """A ComfyUI workflow template; ValueError says what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read the workflow {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ValueError(f"the workflow {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise ValueError(f"the workflow {path} must be a JSON object of nodes (API format)")
    if PROMPT_PLACEHOLDER not in json.dumps(data):
        raise ValueError(f"the workflow {path} has no {PROMPT_PLACEHOLDER} placeholder")
    return data


def workflow_path(config: ComfyUIIntegration, root: Path) -> Path | None:
    if not config.workflow:
        return None
    path = Path(config.workflow).expanduser()
    return path if path.is_absolute() else root / path


def _key_finding(key: str, env_name: str, what: str, fatal: bool) -> _Finding:
    return _Finding(key, f"environment variable {env_name} is not set: {what}", fatal)


def _findings(name: str, config: IntegrationConfig, lookup: Lookup, root: Path) -> list[_Finding]:
    if isinstance(config, SearchIntegration | PixelLabIntegration) and not lookup(
        config.api_key_env
    ):
        what = f"the {name} tools are not offered (set it, or set enabled: false)"
        return [_key_finding("api_key_env", config.api_key_env, what, fatal=True)]
    if isinstance(config, WeatherIntegration):
        return _weather_findings(config, lookup)
    if isinstance(config, GreyNoiseIntegration):
        return _greynoise_findings(config, lookup)
    if isinstance(config, ComfyUIIntegration):
        return _comfyui_findings(config, root)
    return []


def _weather_findings(config: WeatherIntegration, lookup: Lookup) -> list[_Finding]:
    env_name = config.accuweather_api_key_env
    if config.provider == "accuweather" and not env_name:
        reason = "provider accuweather needs accuweather_api_key_env (e.g. ACCUWEATHER_API_KEY)"
        return [_Finding("accuweather_api_key_env", reason, fatal=True)]
    if env_name and not lookup(env_name):
        if config.provider == "accuweather":
            what = "the weather tools are not offered"
            return [_key_finding("accuweather_api_key_env", env_name, what, fatal=True)]
        what = "weather uses Open-Meteo instead of AccuWeather"
        return [_key_finding("accuweather_api_key_env", env_name, what, fatal=False)]
    return []


def _greynoise_findings(config: GreyNoiseIntegration, lookup: Lookup) -> list[_Finding]:
    env_name = config.api_key_env
    if config.api == "enterprise" and not env_name:
        reason = "the enterprise API needs api_key_env (e.g. GREYNOISE_API_KEY)"
        return [_Finding("api_key_env", reason, fatal=True)]
    if env_name and not lookup(env_name):
        if config.api == "enterprise":
            what = "the greynoise tools are not offered"
            return [_key_finding("api_key_env", env_name, what, fatal=True)]
        what = "GreyNoise's community API is used, without a key (a small daily quota)"
        return [_key_finding("api_key_env", env_name, what, fatal=False)]
    return []


def _comfyui_findings(config: ComfyUIIntegration, root: Path) -> list[_Finding]:
    path = workflow_path(config, root)
    if path is None:
        reason = "comfyui needs a workflow: the path of a workflow JSON exported in API format"
        return [_Finding("workflow", reason, fatal=True)]
    try:
        load_workflow(path)
    except ValueError as exc:
        return [_Finding("workflow", str(exc), fatal=True)]
    return []


def unavailable_reason(
    name: str, config: IntegrationConfig, lookup: Lookup, root: Path
) -> str | None:
    """Why this integration cannot be offered, or None when it can."""
    for finding in _findings(name, config, lookup, root):
        if finding.fatal:
            return finding.reason
    return None


def check_integrations(
    bot: BotConfig, lookup: Lookup, root: Path, locate: Locate
) -> IntegrationFindings:
    """Every problem and warning of the bot's integrations, blamed on the right file."""
    findings = IntegrationFindings()
    for name, config in bot.integrations.configured().items():
        if name in bot.mcp_servers:
            reason = f"an MCP server is also called {name!r}: rename it under mcp_servers"
            findings.errors.append(locate(f"integrations.{name}", reason))
        for finding in _findings(name, config, lookup, root):
            problem = locate(f"integrations.{name}.{finding.key}", finding.reason)
            (findings.errors if finding.fatal else findings.warnings).append(problem)
    return findings
