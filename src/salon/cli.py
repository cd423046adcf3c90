"""The ``salon`` command. The only place logging is configured."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import shlex
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from salon import __version__
from salon.app import BotApp, data_dir, load_bot, local_model_problems, store_for
from salon.chat_cli import chat, existing_root, provider_from_environment
from salon.config import BotConfig, ConfigSet, Redactor, Secrets, load_config_dir
from salon.config.example import PLATFORMS, PROVIDERS, write_example
from salon.config.models import IntegrationsConfig
from salon.config.pipeline import keyword_problems
from salon.config.shards import shard_groups, with_shards
from salon.errors import (
    CannotServe,
    ConfigError,
    ConfigProblem,
    PlatformRefused,
    SalonError,
    StoreError,
)
from salon.logsetup import configure_logging
from salon.memory_cli import add_memory_parser, run_memory
from salon.printable import printable
from salon.replay_cli import add_replay_parser, run_replay
from salon.supervisor import REFUSED_EXIT, BotProcessSpec, Supervisor

__all__ = ["main"]

logger = logging.getLogger("salon")

_INTEGRATIONS = tuple(IntegrationsConfig.model_fields)  # their servers load only when used


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="salon", description="LLM agents for group chats.")
    parser.add_argument("--version", action="version", version=f"salon {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    init = sub.add_parser("init", help="write a commented example config")
    init.add_argument("dir", nargs="?", default=".", type=Path)
    init.add_argument("--bot", default="assistant", help="name of the example bot")
    init.add_argument(
        "--model", help="model for the example provider (default: $OPENAI_MODEL or gpt-4o-mini)"
    )
    init.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="the bot's provider (default: openai when --model or an OPENAI_ variable is "
        "set, anthropic when ANTHROPIC_API_KEY is, else local)",
    )
    init.add_argument(
        "--platform",
        action="append",
        choices=PLATFORMS,
        default=[],
        help="put the bot on this platform too (a commented section to fill in)",
    )

    check = sub.add_parser("check", help="validate a config directory and its secrets")
    check.add_argument("dir", nargs="?", default=".", type=Path)
    check.add_argument(
        "--live",
        action="store_true",
        help="also send one tiny request through each provider a bot uses, and check the "
        "Slack tokens' scopes and the Matrix bot's power levels",
    )

    chat = sub.add_parser("chat", help="talk to a bot in this terminal")
    chat.add_argument(
        "dir", nargs="?", type=Path, help="default: here, or the built-in bot if here is none"
    )
    chat.add_argument("--bot", help="which bot (needed when there are several)")

    run = sub.add_parser("run", help="run every bot, one process each, restarting crashes")
    run.add_argument("dir", nargs="?", default=".", type=Path)
    run.add_argument("--bot", help="run only this bot, in this process")
    run.add_argument(
        "--shards",
        metavar="IDS",
        help="Discord shards this machine runs, e.g. 0-3 or 4,5 (overrides shard_ids)",
    )

    tools = sub.add_parser("tools", help="list, call or serve a bot's tools")
    tools_sub = tools.add_subparsers(dest="tools_command", required=True)
    for name, text in (
        ("list", "start the bot's MCP servers and list every tool with its policy"),
        ("call", "call one tool: salon tools call [DIR] NAME '{\"arg\": 1}'"),
        ("serve", "offer Salon's built-in tools, or one integration, over stdio or HTTP"),
        ("auth", "authorize Salon once at an OAuth MCP server (prints the link), or --revoke"),
    ):
        command = tools_sub.add_parser(name, help=text)
        command.add_argument("dir", nargs="?", default=".", type=Path)
        command.add_argument("--bot", help="which bot (needed when there are several)")
        if name == "serve":
            command.add_argument(
                "--only",
                metavar="NAME",
                default="salon",
                help=f"the server to offer: salon (built-ins) or {', '.join(_INTEGRATIONS)}",
            )
            command.add_argument(
                "--http",
                metavar="HOST:PORT",
                help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio "
                "(HOST defaults to 127.0.0.1)",
            )
            command.add_argument(
                "--token-env",
                metavar="NAME",
                help="with --http: every request must carry 'Authorization: Bearer <token>', "
                "the token read from this environment variable",
            )
            command.add_argument(
                "--allow-host",
                metavar="NAME",
                action="append",
                default=[],
                help="with --http: a further name clients may reach the server by (Host header)",
            )
        if name == "auth":
            command.add_argument("server")
            command.add_argument("--revoke", action="store_true", help="forget its tokens")
            command.add_argument(
                "--person",
                metavar="PLATFORM:ID",
                help="a per_user server: this person's tokens (discord:<user id>, "
                "irc:<account>), not the bot's",
            )
        if name == "call":
            command.add_argument("tool")
            command.add_argument("arguments", nargs="?", default="{}")
            command.add_argument(
                "--channel",
                default="terminal:local",
                help="for chat-log tools: terminal:local, irc:#chan or discord:<channel id>",
            )
    _trace_parser(sub)
    add_memory_parser(sub)
    add_replay_parser(sub)
    web = sub.add_parser("web", help="serve health, metrics, the activity page and triggers")
    web.add_argument("dir", nargs="?", default=".", type=Path)
    web.add_argument("--host", help="bind address (default: web.host, 127.0.0.1)")
    web.add_argument("--port", type=int, help="port (default: web.port, 8787)")
    link = sub.add_parser("config-link", help="print a link that signs in to the configurator")
    link.add_argument("dir", nargs="?", default=".", type=Path)
    link.add_argument("--port", type=int, help="the web server's port (default: web.port)")
    return parser


def _trace_parser(sub: Any) -> None:
    trace = sub.add_parser("trace", help="what bots saw, sent, cost and did (from the store)")
    trace_sub = trace.add_subparsers(dest="trace_command", required=True)
    listing = trace_sub.add_parser("list", help="recent activations, newest first")
    show = trace_sub.add_parser("show", help="one whole trace: ID or a Discord message link")
    request = trace_sub.add_parser("request", help="the exact request JSON of a trace's call")
    cost = trace_sub.add_parser("cost", help="tokens and cost per bot, channel, user or day")
    for command in (listing, show, request, cost):
        command.add_argument(
            "dir", nargs="?", type=Path, help="default: here, or the built-in bot if here is none"
        )
    for key in ("bot", "channel", "outcome", "user"):
        listing.add_argument(f"--{key}", help=f"only this {key}")
    listing.add_argument("--limit", type=int, default=30)
    show.add_argument("ref", metavar="ID|LINK")
    request.add_argument("ref", metavar="ID|LINK")
    request.add_argument("--call", type=int, default=1, help="which call (1 = the first)")
    cost.add_argument("--by", choices=["bot", "channel", "user", "day"], default="day")
    cost.add_argument("--days", type=float, help="only the last N days")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command != "run" or args.bot is None:
        _started()  # a bot process says so itself, once its store is open
    try:
        code = _command(args)
        sys.stdout.flush()  # a reader gone (| head) shows here, where it is answered quietly
        return code
    except ConfigError as exc:
        for problem in exc.problems:
            print(printable(f"error: {problem}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return 141  # as a command ended by SIGPIPE says it


def _drop_stdout() -> None:
    """What is left to print goes nowhere: the flush at exit would hit the closed pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _command(args: argparse.Namespace) -> int:
    if args.command == "init":
        return _init(args.dir, args.bot, args.model, args.provider, args.platform)
    if args.command == "check":
        return _check(args.dir, live=args.live)
    if args.command == "chat":
        return chat(args.dir, args.bot)
    if args.command == "tools":
        return _tools(args)
    if args.command == "trace":
        return _trace(args)
    if args.command == "memory":
        return asyncio.run(run_memory(args))
    if args.command == "replay":
        return run_replay(args)
    if args.command == "web":
        return _web(args.dir, args.host, args.port)
    if args.command == "config-link":
        return _config_link(args.dir, args.port)
    return _run(args.dir, args.bot, args.shards)


def _started() -> None:
    """Start-up is over: the garbage collector that ``salon.launch`` paused runs again,
    without walking what was loaded until now. Nothing happens where it was not paused
    (``main`` called from Python)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()


def _init(
    root: Path, bot: str, model: str | None, provider: str | None, platforms: list[str]
) -> int:
    provider = provider or provider_from_environment(model)
    model = model or (os.environ.get("OPENAI_MODEL") if provider == "openai" else None)
    written_files = write_example(
        root, model=model, bot=bot, provider=provider, platforms=platforms
    )
    for path, written in written_files:
        print(f"{'wrote' if written else 'kept existing'} {path}")
    salon, where = _salon_command(), shlex.quote(str(root))
    print(f"next: {salon} check {where} && {salon} chat {where}")
    return 0


def _salon_command() -> str:
    """The running ``salon`` as the user can type it from here: its name when PATH finds
    this very script, else its path (``.venv/bin/salon`` right after an install)."""
    script = Path(sys.argv[0])
    if script.name != "salon":  # python -m salon: the script installed beside python
        script = Path(sys.executable).parent / "salon"
        if not script.is_file():
            return f"{shlex.quote(sys.executable)} -m salon"
    found = shutil.which("salon")
    if found is not None and _same_file(Path(found), script):
        return "salon"
    if script.is_absolute() and script.is_relative_to(Path.cwd()):
        script = script.relative_to(Path.cwd())
    typed = str(script)
    return shlex.quote(typed if "/" in typed else f"./{typed}")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _check(root: Path, *, live: bool = False) -> int:
    from salon.config.check import check_bots  # the command's own: off a bot's start

    configs = load_config_dir(root)
    report = check_bots(configs, os.environ)
    for line in report.lines:
        print(printable(line))
    problems = list(report.problems)
    for key, secrets in report.ready:
        problems.extend(local_model_problems(configs, key))
        problems.extend(_keyword_problems(key, configs.bots[key], secrets, configs))
    if problems:
        raise ConfigError(problems)
    if live:
        return asyncio.run(_check_live(configs, report.ready))
    return 0


def _keyword_problems(
    key: str, config: BotConfig, secrets: Secrets, configs: ConfigSet
) -> list[ConfigProblem]:
    """A keyword whose tool is missing is an error (a warning while MCP servers may offer it)."""
    keywords = {}
    for in_use in configs.configs_in_use(key):  # guild layers may add keywords
        keywords.update(in_use.keywords)
    if not keywords:
        return []
    from salon.tools_cli import offline_tool_names

    known = asyncio.run(offline_tool_names(key, config, secrets, configs.root))
    locate = configs.locator(key)
    problems = []
    for path, reason, fatal in keyword_problems(
        keywords, known, has_mcp_servers=bool(config.mcp_servers)
    ):
        if fatal:
            problems.append(locate(path, reason))
        else:
            print(printable(f"warning: {locate(path, reason)}"))
    return problems


async def _check_live(configs: ConfigSet, bots: list[tuple[str, Secrets]]) -> int:
    """Each provider some bot uses, once, with the model that use would ask; the others are
    listed as unused (a fresh ``salon init`` defines one it does not use)."""
    from salon.llm.probe import probe

    failed = False
    probed: set[str] = set()
    defined: set[str] = set()
    for key, secrets in bots:
        defined.update(configs.bots[key].providers)
        for config in configs.configs_in_use(key):
            if config.provider in probed:
                continue
            probed.add(config.provider)
            result = await probe(config, config.provider, secrets)
            if result is None:
                name = config.provider
                print(f"live: provider {name}: skipped (no model: set providers.{name}.model)")
                continue
            print(printable(result.describe()))  # the server's own words
            failed = failed or not result.ok
    for name in sorted(defined - probed):
        print(f"live: provider {name}: skipped (unused)")
    platforms_ok = await _check_platforms_live(configs, bots)
    return 1 if failed or not platforms_ok else 0


async def _check_platforms_live(configs: ConfigSet, bots: list[tuple[str, Secrets]]) -> bool:
    """Each bot's platforms, as their adapters check them live (``salon.platforms.registry``):
    their lines printed; all well?"""
    from salon.platforms.registry import live_checks

    failed = False
    for key, secrets in bots:
        config = configs.bots[key]
        async for lines, ok in live_checks(config, secrets, data_dir(configs.root, config)):
            print(printable("\n".join(lines)))
            failed = failed or not ok
    return not failed


def _setup_logging(configs: ConfigSet, key: str, redactor: Redactor, stem: str) -> logging.Handler:
    config = configs.bots[key]
    log_dir = data_dir(configs.root, config) / "logs"
    return configure_logging(redactor, level=config.log_level, log_dir=log_dir, stem=stem)


def _tools(args: argparse.Namespace) -> int:
    from salon.tools_cli import (  # the commands' own: off a bot's start
        ServeOptions,
        auth_server,
        call_tool,
        list_tools,
        serve_builtin,
        serve_integration,
    )

    configs = load_config_dir(args.dir)
    key, config, secrets = load_bot(configs, args.bot, tools_only=True)
    # stdout belongs to the MCP protocol (serve) or the answer (list, call): log to stderr.
    configure_logging(secrets.redactor(), level="WARNING")
    if args.tools_command == "serve":
        options = ServeOptions(args.http, args.token_env, tuple(args.allow_host))
        if args.only != "salon":
            return asyncio.run(serve_integration(config, configs.root, secrets, args.only, options))
        store = store_for(configs.root, config, secrets=secrets)
        return asyncio.run(serve_builtin(key, store, options))
    if args.tools_command == "list":
        return asyncio.run(list_tools(key, config, configs.root, secrets))
    if args.tools_command == "auth":
        store = store_for(configs.root, config, secrets=secrets)
        return asyncio.run(
            auth_server(
                key, config, store, secrets, args.server, revoke=args.revoke, person=args.person
            )
        )
    return asyncio.run(
        call_tool(
            key,
            config,
            configs.root,
            secrets,
            name=args.tool,
            arguments=args.arguments,
            channel=args.channel,
        )
    )


def _trace(args: argparse.Namespace) -> int:
    """``salon trace``: the store of the config directory's bots (the first bot's, when
    bots keep separate stores: choose with ``data_dir`` or ``database_url``)."""
    from salon import trace_cli  # a bot process never loads it

    configs = load_config_dir(existing_root(args.dir))
    first = configs.bots[sorted(configs.bots)[0]]
    store = store_for(configs.root, first)

    async def run() -> int:
        await store.open()
        try:
            if args.trace_command == "list":
                filters = {k: getattr(args, k) for k in ("bot", "channel", "outcome", "user")}
                return await trace_cli.list_traces(store.traces, limit=args.limit, **filters)
            if args.trace_command == "show":
                return await trace_cli.show(store.traces, args.ref)
            if args.trace_command == "request":
                return await trace_cli.request(store.traces, args.ref, call=args.call)
            return await trace_cli.cost(store.traces, by=args.by, days=args.days)
        finally:
            await store.close()

    return asyncio.run(run())


def _run(root: Path, bot: str | None, shards: str | None = None) -> int:
    configs = load_config_dir(root)
    if bot is None:
        return _supervise(configs, shards)
    key, config, secrets = load_bot(configs, bot)
    if shards is not None:
        config = with_shards(config, shards)
    _setup_logging(configs, key, secrets.redactor(), stem=key)
    app = BotApp(
        key=key,
        config=config,
        root=root,
        secrets=secrets,
        channel_configs=configs.channel_configs(key),
        watch_config=True,
    )
    try:
        asyncio.run(_run_one(app))
    except PlatformRefused:
        logger.exception("bot %s stopped", key)
        return REFUSED_EXIT  # salon run's supervisor leaves it stopped
    except SalonError:
        logger.exception("bot %s stopped", key)
        return 1
    return 0


async def _run_one(app: BotApp) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with app:
        _started()
        logger.info("bot %s running (pid %d)", app.key, os.getpid())
        platforms = app.unattended_platforms()
        if not platforms:
            logger.warning(
                "bot %s has no platform that runs unattended; use `salon chat` to talk to it",
                app.key,
            )
        await app.serve(stop, platforms)
    logger.info("bot %s stopped", app.key)


def _supervise(configs: ConfigSet, shards: str | None) -> int:
    redactor = Redactor()
    for key in configs.bots:  # every secret must be there before any bot starts
        redactor = redactor.merged(load_bot(configs, key)[2].values.values())
    first = next(iter(sorted(configs.bots)))
    _setup_logging(configs, first, redactor, stem="supervisor")
    specs = [
        BotProcessSpec(
            key,
            cfg.restart_backoff_initial,
            cfg.restart_backoff_max,
            tuple(group),
            shutdown_grace=cfg.shutdown_grace,
        )
        for key, cfg in sorted(configs.bots.items())
        for group in shard_groups(cfg, shards)
    ]
    supervisor = Supervisor(configs.root, specs)
    site = None
    if any("web" in c.model_fields_set for c in configs.bots.values()):
        from salon import web_cli  # the web server's packages only where it runs

        site = web_cli.site_for(configs, redactor)

    async def _main() -> None:
        supervisor.install_signal_handlers()
        if site is None or not site.settings.enabled:
            await supervisor.run()
            return
        async with site.serving(supervisor=supervisor):
            await supervisor.run()

    try:
        asyncio.run(_main())
    except (CannotServe, StoreError) as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return 2
    return 0


def _config_link(root: Path, port: int | None) -> int:
    """``salon config-link``: a one-time link to the configurator, signed with the key."""
    from salon import web_cli  # the web server's packages only where it runs

    try:
        link = web_cli.config_link(load_config_dir(root), os.environ, port)
    except ValueError as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return 2
    print(link)
    print(web_cli.LINK_NOTE, file=sys.stderr)
    return 0


def _web(root: Path, host: str | None, port: int | None) -> int:
    """``salon web``: the web server alone, until SIGINT or SIGTERM."""
    from salon import web_cli  # the web server's packages only where it runs

    configs = load_config_dir(root)
    site = web_cli.site_for(configs, Redactor(), alone=True)
    assert site is not None
    _setup_logging(configs, site.key, site.redactor, stem="web")

    async def _main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with site.serving(host, port):
            await stop.wait()

    try:
        asyncio.run(_main())
    except (CannotServe, StoreError) as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return 2
    return 0
