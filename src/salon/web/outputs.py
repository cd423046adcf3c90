"""``GET /outputs/<path>``: the files tools made, for ``outputs.url`` (``web.serve_outputs``).

Public and read-only: a file under ``<data_dir>/outputs/`` of the web server's bot, or 404.
No directory is listed, and no path leads outside: every segment must be a plain name (no
``..``, ``.``, empty, backslash or NUL; Starlette has decoded ``%2e``/``%2f`` already), and
the file, symlinks resolved, must still be inside the directory. The files share the
configurator's origin, so only images and plain text are shown inline; anything else (an
HTML or SVG a tool wrote) is a download, under a sandboxing CSP either way. A file is
cached for an hour; a 404 is not cached at all (the file may appear a moment later).
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response

from salon.config import ConfigSet

__all__ = ["data_dir_of", "serve_output"]

_INLINE = {"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain"}
_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "public, max-age=3600",  # a saved file never changes
}
# A file missing now may be written a moment later: no cache keeps the 404.
_REFUSED = {**_HEADERS, "Cache-Control": "no-store"}


def data_dir_of(configs: ConfigSet, key: str) -> Path:
    """The ``data_dir`` of bot ``key`` (relative to the config dir), where its outputs and
    logs are."""
    data = Path(configs.bots[key].data_dir)
    return data if data.is_absolute() else configs.root / data


def _inside(root: Path, relative: str) -> Path | None:
    parts = relative.split("/")
    if any(p in ("", ".", "..") or "\\" in p or "\x00" in p for p in parts):
        return None
    try:
        base = root.resolve(strict=True)
        path = base.joinpath(*parts).resolve(strict=True)
    except (OSError, ValueError):
        return None
    if not path.is_relative_to(base) or not path.is_file():
        return None
    return path


async def serve_output(request: Request) -> Response:
    root: Path | None = request.app.state.outputs
    path = None if root is None else _inside(root, request.path_params["path"])
    if path is None:
        return PlainTextResponse("not found", 404, headers=_REFUSED)
    kind = mimetypes.guess_type(path.name)[0] or ""
    if kind in _INLINE:
        return FileResponse(path, media_type=kind, headers=_HEADERS)
    return FileResponse(
        path,
        media_type="application/octet-stream",
        headers=_HEADERS,
        filename=path.name,
        content_disposition_type="attachment",
    )
