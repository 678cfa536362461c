"""Event store backends. ``BACKENDS`` are the openers conftest's ``open_backend`` gives
every contract test (add one here and each runs on it): ``open(location, create=...) ->
EventStore``, ``location`` a fresh directory that names one store. A test module
importing ``every_backend`` (the fixture ``open_backend``) runs on PostgreSQL too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support import pg

if TYPE_CHECKING:
    from evopolicygym.records.store import EventStore


Opener = Callable[..., "EventStore"]


def open_sqlite(location: Path, *, create: bool = False) -> EventStore:
    from evopolicygym.records.sqlite import SQLiteEventStore  # here: conftest imports us

    return SQLiteEventStore(location / "events.db", create=create)


BACKENDS: dict[str, Opener] = {"sqlite": open_sqlite}


@pytest.fixture(name="open_backend", params=[*sorted(BACKENDS), "postgres"])
def every_backend(request: pytest.FixtureRequest) -> Any:
    """Every backend's opener, PostgreSQL too (over conftest's, which has ``BACKENDS``):
    PostgreSQL stores are databases of their own, dropped when the test ends."""
    if request.param != "postgres":
        return BACKENDS[request.param]
    pg.require_postgres()
    request.addfinalizer(pg.drop_made)
    return pg.open_postgres
