"""The command's entry (``salon.launch``): start-up runs with the garbage collector paused,
and the collector runs again once it is over, with what was loaded frozen out of its walks."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from pathlib import Path

from salon.cli import main

# Runs the command as the `salon` script does, then tells how it left the collector.
PROBE = """
import gc, sys
from salon.launch import main
code = main(sys.argv[1:])
print(gc.isenabled(), gc.get_freeze_count() > 0, code)
"""


async def _start(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBE,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "OPENAI_API_KEY": "k-test"},
    )


async def test_a_command_turns_the_collector_back_on(tmp_path: Path) -> None:
    proc = await _start("check", str(tmp_path / "nothing here"))
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert out.decode().split() == ["True", "True", "2"]


async def test_a_bot_process_turns_it_back_on_once_running(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    assert main(["init", str(root), "--model", "tiny"]) == 0
    proc = await _start("run", str(root), "--bot", "assistant")
    assert proc.stderr is not None
    try:
        async with asyncio.timeout(60):
            while b"running (pid" not in await proc.stderr.readline():
                pass
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert out.decode().split() == ["True", "True", "0"]


def test_main_called_from_python_leaves_the_collector_alone(tmp_path: Path) -> None:
    frozen = gc.get_freeze_count()
    assert main(["check", str(tmp_path / "nothing here")]) == 2
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


def _plugin_site(tmp_path: Path) -> Path:
    """A site directory holding one installed distribution with a pydantic plugin (entry
    point group ``pydantic``) that says so on stderr when pydantic loads it."""
    site = tmp_path / "site"
    (site / "noisy_plugin-1.0.dist-info").mkdir(parents=True)
    (site / "noisy_plugin-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: noisy-plugin\nVersion: 1.0\n"
    )
    (site / "noisy_plugin-1.0.dist-info" / "entry_points.txt").write_text(
        "[pydantic]\nnoisy = noisy_plugin:plugin\n"
    )
    (site / "noisy_plugin.py").write_text(
        "import sys\nsys.stderr.write('PLUGIN LOADED\\n')\n"
        "class _Plugin:\n    def new_schema_validator(self, *args, **kwargs):\n"
        "        return None, None, None\nplugin = _Plugin()\n"
    )
    return site


async def _check_with_plugin(tmp_path: Path, **env: str) -> str:
    site = _plugin_site(tmp_path)
    environ = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), *sys.path])
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", PROBE, "check", str(tmp_path / "nothing here"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**environ, **env},
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return err.decode()


async def test_start_up_does_not_look_for_pydantic_plugins(tmp_path: Path) -> None:
    # Looking for them reads every installed distribution's metadata (7-14 ms of CPU
    # with 150 packages); no feature of Salon is a plugin.
    assert "PLUGIN LOADED" not in await _check_with_plugin(tmp_path)


async def test_an_operator_who_sets_pydantic_disable_plugins_decides(tmp_path: Path) -> None:
    # Set at all (empty: none disabled), pydantic's own reading of it applies.
    assert "PLUGIN LOADED" in await _check_with_plugin(tmp_path, PYDANTIC_DISABLE_PLUGINS="")
