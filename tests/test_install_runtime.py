"""The container image's steps without a Docker engine: ``scripts/install-runtime`` (which
the Dockerfile runs) installs Salon on this machine, ``salon check`` passes on the
container's example config in what it installed, and the installed ``salon`` answers as a
user who is not root, as the image runs it."""

from __future__ import annotations

import asyncio
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from subprocess import PIPE

import pytest

from fakes.llm_server import LLMServer

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(600)


def system_python() -> str:
    """Debian's Python when it can make a venv, as on CI's clean machine: every user may run
    it (a Python under /root would not let the image's user in); else this one."""
    debian = "/usr/bin/python3"
    if Path(debian).exists():
        probe = [debian, "-c", "import ensurepip, venv"]
        if subprocess.run(probe, check=False, capture_output=True).returncode == 0:
            return debian
    return sys.executable


def runs(*command: str) -> bool:
    return subprocess.run(command, check=False, capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def installed() -> Iterator[Path]:
    """Where the script installed Salon (its ``bin`` holds ``salon``); readable by all, so
    another user can run it."""
    place = Path(tempfile.mkdtemp(prefix="salon-runtime-"))
    place.chmod(0o755)
    env = {
        **os.environ,
        "SALON_HOME": str(place / "home"),
        "SALON_BIN": str(place / "bin"),
        "SALON_DATA": str(place / "data"),
        "SALON_USER": "",  # no system user on a shared machine; the image creates one
        "PYTHON": system_python(),
    }
    done = subprocess.run(
        [REPO / "scripts" / "install-runtime"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "salon 0.1.0"
    yield place
    shutil.rmtree(place, ignore_errors=True)


def test_salon_check_passes_on_the_container_config_in_what_the_script_installed(
    installed: Path,
) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "SALON_DATABASE_PASSWORD": "pw",
        "OPENAI_API_KEY": "k",
        "DISCORD_TOKEN": "t",
    }
    salon = installed / "bin" / "salon"
    done = subprocess.run(
        [salon, "check", REPO / "deploy" / "config"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok: bot assistant (Assistant) via openai")
    venv = installed / "home" / "venv"
    assert not list(venv.glob("lib/python*/site-packages/pytest")), "no dev tools in the image"


async def test_the_installed_salon_answers_as_a_user_who_is_not_root(
    installed: Path, llm_server: LLMServer
) -> None:
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    runner = [] if os.geteuid() != 0 else [runuser, "-u", "nobody", "--"]
    python = installed / "home" / "venv" / "bin" / "python"
    if runner and not runs(*runner, str(python), "-c", ""):
        pytest.skip(f"the only Python here ({sys.executable}) is closed to other users")
    home = installed / "nobody"
    home.mkdir()
    if runner:
        shutil.chown(home, user=pwd.getpwnam("nobody").pw_uid)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "OPENAI_BASE_URL": llm_server.base_url + "/v1",
        "OPENAI_API_KEY": "k-test",
    }
    salon = str(installed / "bin" / "salon")
    config = str(home / "config")
    llm_server.queue("Hello from the image.")
    out = ""
    for args, stdin in (
        ([salon, "init", config, "--model", "m"], b""),
        ([salon, "chat", config], b"hi\n"),
    ):
        proc = await asyncio.create_subprocess_exec(
            *runner, *args, env=env, stdin=PIPE, stdout=PIPE, stderr=PIPE
        )  # the loopback model runs in this event loop: wait without blocking it
        raw, err = await asyncio.wait_for(proc.communicate(stdin), 60)
        assert proc.returncode == 0, err.decode()
        out = raw.decode()
    assert out == "Assistant: Hello from the image.\n\n"


def test_the_dockerfile_runs_the_script_as_a_user_with_a_volume_and_a_healthcheck() -> None:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")  # continued lines
    steps = re.findall(r"^([A-Z]+) (.*)", text, re.MULTILINE)
    found = {name: [v for n, v in steps if n == name] for name in {n for n, _ in steps}}
    assert found["FROM"][0].startswith("python:3.11-slim")
    assert any("scripts/install-runtime" in step for step in found["RUN"])
    assert found["USER"] == ["salon"]
    assert found["VOLUME"] == ['["/data"]']
    assert found["CMD"] == ['["salon", "run", "/config"]']
    assert "http://127.0.0.1:8787/health" in found["HEALTHCHECK"][0]
    for step in found["COPY"]:
        for source in step.split()[:-1]:
            assert (REPO / source).exists(), source
