"""The one exception tree of Salon.

    SalonError
    ├── ConfigError          a config file or secret is wrong; carries every problem found
    ├── ProviderError        an LLM call failed (after retries, where retrying made sense)
    │   └── RateLimited      the vendor said 429 / overloaded; ``retry_after`` if it told us
    ├── ToolError            a tool could not be run
    ├── PlatformError        a chat platform refused or failed
    │   └── PlatformRefused  it refused the bot's token or settings: only the operator can help
    └── StoreError           persistence failed

Third-party exceptions are re-raised as one of these where they enter Salon
(``raise ProviderError(...) from exc``), so callers never catch SDK types.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ConfigError",
    "ConfigProblem",
    "PlatformError",
    "PlatformRefused",
    "ProviderError",
    "RateLimited",
    "SalonError",
    "StoreError",
    "ToolError",
]


class SalonError(Exception):
    """Root of every error Salon raises on purpose."""


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One thing wrong with the configuration, located as precisely as we can."""

    file: str
    key_path: str
    reason: str
    line: int | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        key = self.key_path or "(top level)"
        return f"{where}: {key}: {self.reason}"


class ConfigError(SalonError):
    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ProviderError(SalonError):
    """An LLM call failed. ``status`` is the HTTP status when there was one."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        retryable: bool | None = None,
    ) -> None:
        self.provider = provider
        self.status = status
        self._retryable = retryable
        super().__init__(message)

    @property
    def retryable(self) -> bool:
        """Connection failures, timeouts and 5xx are worth another try; 4xx are not."""
        if self._retryable is not None:
            return self._retryable
        return self.status is None or self.status >= 500 or self.status in (408, 409)


class RateLimited(ProviderError):
    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = 429,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, provider=provider, status=status)
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        return True


class ToolError(SalonError):
    pass


class PlatformError(SalonError):
    """A chat platform refused or failed. ``transient``: another try may succeed (a 5xx,
    a lost connection, a timeout, a rate limit: ``retry_after`` seconds when it said)."""

    def __init__(
        self, message: str, *, transient: bool = False, retry_after: float | None = None
    ) -> None:
        self.transient = transient
        self.retry_after = retry_after
        super().__init__(message)


class PlatformRefused(PlatformError):
    """The platform refused what only the operator can change (a token, a setting of the
    bot's account): connecting again cannot help until they do."""


class StoreError(SalonError):
    pass


class CannotServe(SalonError):
    """The web server's socket cannot be had (the port is taken, the address is wrong)."""
