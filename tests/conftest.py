"""Event store backends for the contract tests (add one here and every contract test runs on
it), and the suite's hypothesis profile.

A backend is an opener ``open(location, create=...) -> EventStore``; ``location`` is a fresh
directory that names one store (a PostgreSQL opener would map it to its own schema).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

if TYPE_CHECKING:
    from evopolicygym.records.store import EventStore

Opener = Callable[..., "EventStore"]

# No per-example deadline anywhere: it is a timing assertion, and on a shared 2-core
# machine a GC pause or a busy neighbour would fail a correct example.
settings.register_profile("evopolicy", deadline=None)
settings.load_profile("evopolicy")


def open_sqlite(location: Path, *, create: bool = False) -> EventStore:
    from evopolicygym.records.sqlite import SQLiteEventStore  # imported here: conftest is global

    return SQLiteEventStore(location / "events.db", create=create)


BACKENDS: dict[str, Opener] = {"sqlite": open_sqlite}


@pytest.fixture(params=sorted(BACKENDS))
def open_backend(request: pytest.FixtureRequest) -> Opener:
    """The backend's opener; call it as ``open_backend(location, create=True)``."""
    return BACKENDS[request.param]


@pytest.fixture
def event_store(open_backend: Opener, tmp_path: Path) -> Iterator[EventStore]:
    """A new, empty store of each backend in ``tmp_path``."""
    store = open_backend(tmp_path, create=True)
    yield store
    store.close()
