"""The list of a store's Runs: filtered, sorted and paged in the Run index, never in memory.

``/`` takes ``benchmark``, ``agent``, ``model``, ``status`` (exact values, offered with their
counts), ``since`` and ``until`` (dates, UTC, ``until`` exclusive), ``sort`` (``created``,
``updated``, ``score``, ``benchmark``, ``agent``, ``status``, ``events``), ``order``
(``asc`` or ``desc``) and ``page``. The table is marked live: it follows new Runs.
"""

from __future__ import annotations

import datetime as dt

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from evopolicygym.view.app import number_param, render, viewer_of
from evopolicygym.view.index import FILTERS, SORTS

__all__ = ["ROUTES"]


def _date_ns(text: str | None, name: str) -> int | None:
    if not text:
        return None
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise HTTPException(400, f"{name} must be a date as YYYY-MM-DD, not {text!r}") from None
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC).timestamp()) * 10**9


async def runs(request: Request) -> Response:
    viewer = viewer_of(request)
    q = request.query_params
    sort = q.get("sort", "created")
    if sort not in SORTS:
        raise HTTPException(400, f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
    order = q.get("order", "desc")
    if order not in ("asc", "desc"):
        raise HTTPException(400, f"order must be asc or desc, not {order!r}")
    filters = {name: q.get(name, "") for name in FILTERS}
    since, until = q.get("since", ""), q.get("until", "")
    since_ns, until_ns = _date_ns(since, "since"), _date_ns(until, "until")
    number = number_param(request, "page", 1, 1) or 1
    await run_in_threadpool(viewer.index.refresh)
    page = await run_in_threadpool(
        lambda: viewer.index.page(
            filters,
            sort=sort,
            descending=order == "desc",
            page=number,
            since_ns=since_ns,
            until_ns=until_ns,
        )
    )
    params = {**filters, "since": since, "until": until, "sort": sort, "order": order}
    return render(
        request,
        "runs.html",
        page=page,
        params=params,
        filters=FILTERS,
        sorts=list(SORTS),
    )


ROUTES = [Route("/", runs, name="runs")]
