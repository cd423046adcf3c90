"""OpenTelemetry export of Salon's traces and the GenAI client metrics (the ``otel`` extra).

``spans`` turns a finished activation into spans and metric points (plain data, no SDK);
``export`` hands them to the OpenTelemetry SDK's OTLP exporters on a worker thread.
``otel_export`` builds a bot's export when its config has an ``otel:`` section, and only
then imports the SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from salon.config import BotConfig, Secrets
from salon.errors import ConfigError, ConfigProblem

if TYPE_CHECKING:
    from salon.otel.export import OtelExport

__all__ = ["otel_export"]


def otel_export(bot: str, config: BotConfig, secrets: Secrets) -> OtelExport | None:
    """The bot's OpenTelemetry export when its config has an enabled ``otel:`` section; the
    SDK is imported only then."""
    if config.otel is None or not config.otel.enabled:
        return None
    try:
        from salon.otel.export import OtelExport
    except ImportError as exc:
        reason = (
            f"the OpenTelemetry packages are not installed ({exc.name}); "
            "install Salon with its otel extra: pip install 'salon[otel]'"
        )
        raise ConfigError([ConfigProblem("", "otel", reason)]) from exc
    types = {name: provider.type for name, provider in config.providers.items()}
    headers = {name: secrets.get(var) or "" for name, var in config.otel.headers_env.items()}
    return OtelExport(
        config.otel,
        bot=bot,
        provider_types=types,
        headers=headers,
        redact=secrets.redactor(),
    )
