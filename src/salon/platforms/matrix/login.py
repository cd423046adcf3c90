"""The bot's access token: from the environment (``access_token_env``), else a password
login (``password_env``) whose device token is kept in the data directory
(``matrix-session.json``, readable by the owner only) and used again at the next start."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path

from salon.config import MatrixConfig, Secrets
from salon.errors import PlatformError
from salon.platforms.matrix.api import Homeserver

__all__ = ["SESSION_FILE", "access_token", "forget_session", "log_in"]

logger = logging.getLogger(__name__)

SESSION_FILE = "matrix-session.json"


async def access_token(config: MatrixConfig, secrets: Secrets, data_dir: Path) -> str:
    token = secrets.get(config.access_token_env) if config.access_token_env else None
    if token:
        return token
    session = data_dir / SESSION_FILE
    kept = _kept(session, config.user_id)
    if kept:
        return kept
    password = secrets.get(config.password_env) if config.password_env else None
    if not password:
        names = " or ".join(n for n in (config.access_token_env, config.password_env) if n)
        raise PlatformError(
            f"no Matrix access token or password: set {names or 'access_token_env'}"
        )
    server = Homeserver(
        config.homeserver, "", rate_limit_wait_max=config.rate_limit_wait_max, retries=0
    )
    try:
        answer = await server.call(
            "POST",
            "/_matrix/client/v3/login",
            {
                "type": "m.login.password",
                "identifier": {"type": "m.id.user", "user": config.user_id},
                "password": password,
                "initial_device_display_name": config.device_name,
            },
            sensitive=True,
        )
    finally:
        await server.close()
    token = str(answer.get("access_token", ""))
    if not token:
        raise PlatformError("the homeserver's login answer has no access token")
    device = answer.get("device_id", "")
    await asyncio.to_thread(
        _keep, session, {"user_id": config.user_id, "access_token": token, "device_id": device}
    )
    logger.info("Matrix: logged in as %s, device %s", config.user_id, answer.get("device_id"))
    return token


async def log_in(config: MatrixConfig, secrets: Secrets, data_dir: Path) -> Homeserver:
    """A session whose token the homeserver knows; a kept device token it no longer
    knows (logged out, expired) is dropped and the password logs in again."""
    for _ in range(2):
        token = await access_token(config, secrets, data_dir)
        server = Homeserver(
            config.homeserver,
            token,
            rate_limit_wait_max=config.rate_limit_wait_max,
            retries=config.send_retries,
        )
        try:
            await server.call("GET", "/_matrix/client/v3/account/whoami")
        except PlatformError as exc:
            await server.close()
            if "M_UNKNOWN_TOKEN" not in str(exc) or not forget_session(data_dir):
                raise
            logger.warning("Matrix: the kept device token is no longer valid; logging in")
            continue
        return server
    raise PlatformError("the homeserver refused the new login's token")


def forget_session(data_dir: Path) -> bool:
    """Drop the kept device token; whether there was one."""
    try:
        (data_dir / SESSION_FILE).unlink()
    except FileNotFoundError:
        return False
    return True


def _keep(session: Path, data: dict[str, object]) -> None:
    """Written readable by the owner only: the token is the bot's account."""
    session.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(session, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as file:
        json.dump(data, file)


def _kept(session: Path, user_id: str) -> str | None:
    try:
        data = json.loads(session.read_text())
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and data.get("user_id") == user_id:
        token = data.get("access_token")
        return token if isinstance(token, str) and token else None
    return None
