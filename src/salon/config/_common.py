"""What the config models share: the strict base model, limits, and the checks of URLs,
environment variable names and waits."""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError, SchemaValidator, core_schema

from salon.model import Policy

__all__ = [
    "MAX_OUTPUT_TOKENS",
    "MAX_WAIT_SECONDS",
    "_ENV_NAME",
    "_ENV_NAME_RULE",
    "Endpoint",
    "ToolPolicy",
    "_Strict",
    "_check_env_names",
    "_check_wait",
    "_endpoint",
    "database_url_problem",
    "http_url_problem",
]

ToolPolicy = Policy

# pydantic's AnyHttpUrl is this validator of pydantic-core's; taken directly, it leaves
# pydantic.networks (and the importlib.metadata it loads) off a bot's start.
_HTTP_URL = SchemaValidator(core_schema.url_schema(allowed_schemes=["http", "https"]))

MAX_OUTPUT_TOKENS = 1_000_000
"""Bound on ``max_tokens``: today's largest output limits are near 128 000, so a bigger
number is a typo (an extra zero or two), not a wish."""

MAX_WAIT_SECONDS = 7 * 24 * 3600
"""Bound on every timeout and backoff: a wait of more than a week is a typo."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_HTTP_PREFIX = re.compile(r"https?://", re.IGNORECASE)
_HTTP_SCHEME = re.compile(r"\s*https?:", re.IGNORECASE)  # written, if badly: no hint
_ENV_NAME_RULE = (
    "must be the name of an environment variable (letters, digits and _, such as "
    "OPENAI_API_KEY); the value itself goes in that variable"
)


def http_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an HTTP endpoint, or None when it can. pydantic's URL type
    parses it (the WHATWG URL standard, as browsers and HTTP clients read URLs); the text
    itself must spell out ``http://`` or ``https://``, since it is handed on as written."""
    problem = "not an http(s) URL with a host"
    if not _HTTP_PREFIX.match(url):
        if not _HTTP_SCHEME.match(url) and "://" not in url and "@" not in url and url.strip():
            return f"{problem}: write http://{url}"
        return problem
    try:
        _HTTP_URL.validate_python(url)
    except ValidationError as exc:
        _, _, why = exc.errors()[0]["msg"].partition("valid URL, ")
        return f"{problem} ({why})" if why and why != "empty host" else problem
    return None


def database_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be Salon's database, or None: SQLite or PostgreSQL, and no
    password (it belongs in the variable ``database_password_env`` names)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "not a database URL"
    backend = parts.scheme.split("+")[0]
    if backend not in ("sqlite", "postgresql", "postgres"):
        return "must start with sqlite:/// or postgresql:// (e.g. postgresql://salon@db/salon)"
    if parts.password:
        return (
            "holds a password: remove it and set database_password_env to the name of an "
            "environment variable holding it"
        )
    if backend != "sqlite" and not parts.hostname:
        return "names no host: postgresql://USER@HOST:PORT/DATABASE"
    return None


def _endpoint(url: str) -> str:
    problem = http_url_problem(url)
    if problem:
        raise PydanticCustomError("http_url", problem)
    return url


Endpoint = Annotated[str, AfterValidator(_endpoint)]


def _check_env_names(value: object) -> None:
    """A ``*_env`` value (or each value of a mapping of them) names a variable."""
    if isinstance(value, str) and not _ENV_NAME.fullmatch(value):
        raise PydanticCustomError("env_name", _ENV_NAME_RULE)
    if isinstance(value, dict):
        for key, name in value.items():
            if not _ENV_NAME.fullmatch(name):
                raise PydanticCustomError("env_name", "{key}: " + _ENV_NAME_RULE, {"key": key})


def _check_wait(field: str, value: object) -> None:
    """Timeouts are more than 0 seconds, backoffs at least 0; neither above a week."""
    if not isinstance(value, int | float):
        return
    if "timeout" in field and value <= 0:
        raise PydanticCustomError("seconds", "must be more than 0 seconds")
    if value < 0:
        raise PydanticCustomError("seconds", "must not be negative")
    if value > MAX_WAIT_SECONDS:
        limit = f"must be at most {MAX_WAIT_SECONDS} seconds (a week)"
        raise PydanticCustomError("seconds", limit)


class _Strict(BaseModel):
    """The base of every config model: an unknown key is an error, a model is frozen, and
    the rules by field name below hold in every section."""

    # allow_inf_nan: YAML's .inf and .nan are never a sensible number of anything here.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _common_rules(cls, value: Any, info: ValidationInfo) -> Any:
        """Rules by field name, so fields added later follow them too."""
        name = info.field_name or ""
        if name.endswith("_env") or name == "env_from":
            _check_env_names(value)
        elif "timeout" in name or "backoff" in name:
            _check_wait(name, value)
        return value
