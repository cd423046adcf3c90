"""A real Synapse homeserver for the Matrix tests: PyPI's ``matrix-synapse`` (the ``dev``
extra), on a free 127.0.0.1 port, SQLite in a temp dir, no federation, registration only
by shared secret (the admin API's ``/_synapse/admin/v1/register``).

Without the package the Matrix tests are skipped, unless ``SALON_REQUIRE_SYNAPSE`` is set
(CI sets it): then they fail, naming what is missing.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REQUIRE_ENV = "SALON_REQUIRE_SYNAPSE"
SERVER_NAME = "salon.test"
_START_TIMEOUT = 120.0  # a cold start on a busy two-core machine takes tens of seconds

# Generous rate limits: the tests send faster than people do. ``relaxed=False`` makes
# sending messages tight instead (a test of waiting out M_LIMIT_EXCEEDED).
_RELAXED = {"per_second": 1000, "burst_count": 1000}
_TIGHT = {"per_second": 2, "burst_count": 3}


@dataclass(frozen=True)
class Account:
    user_id: str
    access_token: str
    password: str


def synapse_available() -> None:
    """Skip (or fail, where required) when matrix-synapse is not installed."""
    if importlib.util.find_spec("synapse") is not None:
        return
    reason = "matrix-synapse is not installed (pip install -e '.[dev]')"
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{reason}; {REQUIRE_ENV} says the Matrix tests must run")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _config(directory: Path, port: int, shared_secret: str, *, relaxed: bool) -> dict[str, Any]:
    limits = _RELAXED
    config: dict[str, Any] = {
        "server_name": SERVER_NAME,
        "pid_file": str(directory / "homeserver.pid"),
        "listeners": [
            {
                "port": port,
                "bind_addresses": ["127.0.0.1"],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(directory / "homeserver.db")}},
        "log_config": str(directory / "log.yaml"),
        "media_store_path": str(directory / "media"),
        "registration_shared_secret": shared_secret,
        "enable_registration": False,
        "report_stats": False,
        "macaroon_secret_key": secrets.token_hex(16),
        "form_secret": secrets.token_hex(16),
        "signing_key_path": str(directory / "signing.key"),
        "trusted_key_servers": [],
        "federation_domain_whitelist": [],
        "suppress_key_server_warning": True,
        "enable_metrics": False,
        "url_preview_enabled": False,
        "presence": {"enabled": False},
    }
    config["rc_message"] = limits if relaxed else _TIGHT
    config["rc_3pid_validation"] = limits
    config["rc_login"] = {"address": limits, "account": limits, "failed_attempts": limits}
    config["rc_joins"] = {"local": limits, "remote": limits}
    config["rc_invites"] = {"per_room": limits, "per_user": limits, "per_issuer": limits}
    return config


def _log_config(directory: Path) -> dict[str, Any]:
    return {
        "version": 1,
        "formatters": {"plain": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
        "handlers": {
            "file": {
                "class": "logging.FileHandler",
                "formatter": "plain",
                "filename": str(directory / "homeserver.log"),
            }
        },
        "root": {"level": "WARNING", "handlers": ["file"]},
        "disable_existing_loggers": False,
    }


class Synapse:
    """One homeserver process; ``start`` waits for ``/_matrix/client/versions``."""

    def __init__(self, directory: Path, *, relaxed: bool = True) -> None:
        self.directory = directory
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._secret = secrets.token_hex(16)
        self._relaxed = relaxed
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        from signedjson.key import generate_signing_key, write_signing_keys

        self.directory.mkdir(parents=True, exist_ok=True)
        config = _config(self.directory, self.port, self._secret, relaxed=self._relaxed)
        # JSON is YAML: no YAML writer needed for Synapse's config.
        (self.directory / "homeserver.yaml").write_text(json.dumps(config))
        (self.directory / "log.yaml").write_text(json.dumps(_log_config(self.directory)))
        with (self.directory / "signing.key").open("w") as key_file:
            write_signing_keys(key_file, [generate_signing_key("a")])
        with (self.directory / "stdout.log").open("wb") as out:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "synapse.app.homeserver", "-c", "homeserver.yaml"],
                cwd=self.directory,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"Synapse exited at start:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_matrix/client/versions", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                # Polling a process that gives no other readiness signal: its port opening.
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Synapse did not answer within {_START_TIMEOUT}s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        texts = []
        for name in ("stdout.log", "homeserver.log"):
            path = self.directory / name
            if path.exists():
                texts.append(path.read_text(errors="replace")[-4000:])
        return "\n".join(texts)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def register(self, localpart: str, *, admin: bool = False) -> Account:
        """A new account, registered by shared secret, and its access token."""
        password = secrets.token_hex(8)
        nonce = self._request("GET", "/_synapse/admin/v1/register")["nonce"]
        # The MAC covers the fields joined by NUL (Synapse's admin API documentation).
        kind = "admin" if admin else "notadmin"
        fields = b"\x00".join(p.encode() for p in (nonce, localpart, password, kind))
        mac = hmac.new(self._secret.encode(), fields, digestmod=hashlib.sha1)
        body = {
            "nonce": nonce,
            "username": localpart,
            "password": password,
            "admin": admin,
            "mac": mac.hexdigest(),
        }
        answer = self._request("POST", "/_synapse/admin/v1/register", body)
        return Account(answer["user_id"], answer["access_token"], password)
