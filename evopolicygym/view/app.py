"""The viewer's ASGI app: Starlette routes over one store, opened to read only.

``create_app`` wires the pieces: the Run index (``index``), the watcher that follows the log
(``live``), the templates (``templating``), the pages (``runs_page``, ``run_page``,
``submission_page`` with ``log_pages``, ``experiments_page``, ``compare_page``, each with its
``ROUTES``), the
static assets shipped in the package, and the gate (``access``) in front of it all. Store
reads run in worker threads; nothing here writes the store.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from evopolicygym.records.location import Store
from evopolicygym.records.runs import UnknownRun, resolve_run
from evopolicygym.view.access import Access
from evopolicygym.view.index import RunIndex
from evopolicygym.view.live import Watcher
from evopolicygym.view.templating import environment

__all__ = [
    "STATIC",
    "Viewer",
    "create_app",
    "number_param",
    "render",
    "resolve_stream",
    "viewer_of",
]

STATIC = Path(__file__).with_name("static")
PLOTLY = "plotly.min.js"


@dataclass
class Viewer:
    """What every page reads from: the store, its index, the redactor, the templates."""

    store: Store
    index: RunIndex
    redact: Callable[[str], str]
    templates: jinja2.Environment
    watcher: Watcher
    title: str
    extra: dict[str, Any] = field(default_factory=dict)  # pages' own caches


def viewer_of(request: Request) -> Viewer:
    viewer: Viewer = request.app.state.viewer
    return viewer


def number_param(request: Request, name: str, default: int | None, minimum: int) -> int | None:
    """A whole-number query parameter (``default`` when absent); 400 when it is not one."""
    text = request.query_params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise HTTPException(400, f"{name} must be a whole number, not {text!r}") from None
    if value < minimum:
        raise HTTPException(400, f"{name} must be at least {minimum}, not {value}")
    return value


def resolve_stream(viewer: Viewer, run: str) -> str:
    """The stream of the Run named ``run`` (an id, ``run-<id>``, a unique prefix or
    ``latest``); 404 saying why when there is none, or several."""
    try:
        return resolve_run(viewer.store.events, run)
    except UnknownRun as exc:  # AmbiguousRun too: its message names the matches
        raise HTTPException(404, str(exc)) from None


def render(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
    """A page: ``template`` with ``context``, the store's name and the head it shows."""
    viewer = viewer_of(request)
    html = viewer.templates.get_template(template).render(
        request=request,
        store_title=viewer.title,
        head=viewer.watcher.head,
        store_error=viewer.watcher.error,
        **context,
    )
    return HTMLResponse(html, status_code=status, headers={"cache-control": "no-store"})


async def _live(request: Request) -> Response:
    viewer = viewer_of(request)
    run_id = request.query_params.get("run") or None
    return StreamingResponse(
        viewer.watcher.messages(run_id),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def _plotly(request: Request) -> Response:
    from evopolicygym.report.plots import plotly_js

    cached = request.app.state.plotly
    if cached is None:
        cached = request.app.state.plotly = plotly_js().encode("utf-8")
    return Response(
        cached,
        media_type="text/javascript; charset=utf-8",
        headers={"cache-control": "public, max-age=86400"},
    )


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    detail = exc.detail if isinstance(exc, HTTPException) else "the viewer failed on this page"
    if "text/html" not in request.headers.get("accept", "text/html"):
        return PlainTextResponse(str(detail), status_code=status)
    return render(request, "error.html", status=status, status_code=status, detail=str(detail))


def _routes() -> list[BaseRoute]:
    from evopolicygym.view import (
        compare_page,
        experiments_page,
        run_page,
        runs_page,
        submission_page,
    )

    return [
        *runs_page.ROUTES,
        *run_page.ROUTES,
        *submission_page.ROUTES,
        *experiments_page.ROUTES,
        *compare_page.ROUTES,
        Route("/live", _live),
        Route(f"/static/{PLOTLY}", _plotly),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]


def create_app(
    store: Store,
    *,
    redact: Callable[[str], str],
    cache_dir: Path,
    token: str | None = None,
    bound_host: str = "127.0.0.1",
    host_alive: Callable[[str], bool] | None = None,
    poll_s: float = 0.5,
    title: str | None = None,
) -> Any:
    """The viewer of ``store`` (open it with ``open_store(..., reader=True)``) as an ASGI app.
    ``redact``: applied to every recorded text shown; ``cache_dir``: where the Run index
    lives (outside the store); ``token``: required of every request when given;
    ``host_alive``: whether a Host holds a Run (else a dead Host's Run shows ``running``)."""
    index = RunIndex(store, cache_dir, host_alive=host_alive)
    watcher = Watcher(index.refresh, poll_s)
    viewer = Viewer(store, index, redact, environment(), watcher, title or str(store.location))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        import asyncio

        task = asyncio.create_task(watcher.run())
        try:
            yield
        finally:
            watcher.close()
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            index.close()

    app = Starlette(
        routes=_routes(),
        lifespan=lifespan,
        exception_handlers={HTTPException: _not_found, Exception: _not_found},
    )
    app.state.viewer = viewer
    app.state.plotly = None
    return Access(app, token, bound_host)
