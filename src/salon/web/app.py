"""The web app: its routes, and how ``salon web`` and ``salon run`` build and serve it."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from salon.config import ConfigSet, Redactor, WebConfig
from salon.store.sql import SQLStore
from salon.web import activity, configurator, controls, logtail, notes, oauth, replays, workflows
from salon.web.assets import script, stylesheet
from salon.web.context import HEADERS, Fleet, Web
from salon.web.events import post_event
from salon.web.guard import HostGuard
from salon.web.health import health, metrics
from salon.web.outputs import data_dir_of, serve_output

__all__ = ["build_app", "web_settings"]

logger = logging.getLogger(__name__)


def web_settings(configs: ConfigSet) -> tuple[str, WebConfig] | None:
    """The bot whose ``web:`` section configures the fleet's server (the first, by name,
    that has one), or None when no bot has one."""
    for key in sorted(configs.bots):
        if "web" in configs.bots[key].model_fields_set:
            return key, configs.bots[key].web
    return None


async def _home(request: Request) -> Response:
    return RedirectResponse("/activity", status_code=303)


async def _no_route(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 with this server's headers: no cache keeps a refusal."""
    http = exc if isinstance(exc, HTTPException) else HTTPException(404)
    headers = {**HEADERS, **(http.headers or {})}  # a 405's Allow
    return Response(f"{http.detail}\n", http.status_code, headers, "text/plain")


def build_app(
    *,
    store: SQLStore,
    configs: ConfigSet,
    settings: WebConfig,
    environ: Mapping[str, str] | None = None,
    redact: Redactor | None = None,
    control: controls.FleetControl | None = None,
    oauth_desk: oauth.OAuthDesk | None = None,
) -> Starlette:
    """The app over an opened store and a loaded config directory; ``control``: the
    provider test and, where a supervisor runs the bots, start/stop/restart;
    ``oauth_desk``: the MCP servers' authorizations started from the page."""
    web = Web(
        store=store,
        fleet=Fleet(configs),
        settings=settings,
        environ=os.environ if environ is None else environ,
        redact=redact or Redactor(),
    )
    routes = [
        Route("/", _home),
        Route("/health", health),
        Route("/metrics", metrics),
        Route("/bots/{name}/events", post_event, methods=["POST"]),
        Route("/activity", activity.activity),
        Route("/activity/login", activity.login, methods=["POST"]),
        Route("/activity/logout", activity.logout, methods=["POST"]),
        Route("/activity/rows", activity.rows),
        Route("/activity/traces/{trace_id}", activity.trace),
        Route("/activity/replays", replays.replays),
        Route("/config", configurator.overview),
        Route("/config/edit", configurator.edit),
        Route("/config/edit", configurator.save, methods=["POST"]),
        Route("/config/notes", notes.listing),
        Route("/config/notes/edit", notes.update, methods=["POST"]),
        Route("/config/notes/delete", notes.delete, methods=["POST"]),
        Route("/config/notes/approve", notes.approve, methods=["POST"]),
        Route("/static/salon.css", stylesheet),
        Route("/static/salon.js", script),
        Route("/config/bots", controls.bots),
        Route("/config/bots/level", controls.level, methods=["POST"]),
        Route("/config/bots/act", controls.act, methods=["POST"]),
        Route("/config/bots/probe", controls.probe, methods=["POST"]),
        Route("/config/bots/workflow", workflows.upload, methods=["POST"]),
        Route("/config/oauth", oauth.listing),
        Route("/config/oauth/start", oauth.start, methods=["POST"]),
        Route(oauth.CALLBACK_PATH, oauth.callback),
        Route("/config/log", logtail.log_page),
        Route("/config/log/tail", logtail.tail),
        Route("/static/logtail.js", logtail.script),
        Route("/outputs/{path:path}", serve_output),  # off (404) unless serve_outputs
    ]
    # Every route, the 404 of no route included, answers only to this server's names.
    app = Starlette(
        routes=routes,
        middleware=[Middleware(HostGuard, settings=settings)],
        exception_handlers={404: _no_route, 405: _no_route},
    )
    app.state.web = web
    app.state.control = control
    app.state.oauth_desk = oauth_desk
    chosen = web_settings(configs)
    data = (
        data_dir_of(configs, chosen[0] if chosen else min(configs.bots)) if configs.bots else None
    )
    app.state.logs = data / "logs" if data else None
    app.state.outputs = data / "outputs" if data and settings.serve_outputs else None
    return app
