"""``salon check`` without the printing: every bot of a directory, its secrets, its
integrations. The CLI and the web configurator share it, so both judge a config alike."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from salon.config.integrations import check_integrations
from salon.config.loader import ConfigSet
from salon.config.secrets import Secrets, resolve_secrets
from salon.errors import ConfigError, ConfigProblem

__all__ = ["CheckReport", "check_bots"]


@dataclass
class CheckReport:
    lines: list[str] = field(default_factory=list)  # "ok: …" and "warning: …", in order
    problems: list[ConfigProblem] = field(default_factory=list)
    ready: list[tuple[str, Secrets]] = field(default_factory=list)  # bots whose secrets are set


def check_bots(configs: ConfigSet, environ: Mapping[str, str]) -> CheckReport:
    """Judge every bot of an already loaded directory as ``salon check`` does."""
    report = CheckReport()
    for key in sorted(configs.bots):
        config = configs.bots[key]
        try:
            secrets = resolve_secrets(config, environ, configs.locator(key))
        except ConfigError as exc:
            report.problems.extend(exc.problems)
            continue
        report.ready.append((key, secrets))
        model = config.model_name()
        report.lines.append(f"ok: bot {key} ({config.name}) via {config.provider}, model {model}")
        found = check_integrations(config, secrets.get, configs.root, configs.locator(key))
        report.lines.extend(f"warning: {warning}" for warning in found.warnings)
        report.problems.extend(found.errors)
    return report
