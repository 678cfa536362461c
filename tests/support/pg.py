"""PostgreSQL for the tests: a database of their own per store, dropped afterwards.

The server is ``EVOPOLICY_TEST_POSTGRES`` (a URL of a database to connect to for creating
others; default the local server's ``postgres`` database as user ``postgres``). Every
store a test makes is a database named ``evopolicy_test_<random>``, so tests running at
once (other sessions, CI) never share one, and no other database is touched. When the
server is not reachable a test skips, saying how to start it, unless
``EVOPOLICY_REQUIRE_POSTGRES=1`` (CI), where it fails.
"""

from __future__ import annotations

import functools
import hashlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.requires import missing

SERVER_ENV = "EVOPOLICY_TEST_POSTGRES"
REQUIRE_ENV = "EVOPOLICY_REQUIRE_POSTGRES"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
PREFIX = "evopolicy_test_"
HOW_TO_START = (
    "pg_ctlcluster 15 main start (PostgreSQL 15 on 127.0.0.1:5432), or set "
    f"{SERVER_ENV} to the URL of a server whose user may create databases"
)

_made: set[str] = set()


def server_url() -> str:
    return os.environ.get(SERVER_ENV, DEFAULT_SERVER)


def url_of(database: str) -> str:
    """The URL of ``database`` on the test server."""
    from sqlalchemy.engine import make_url

    return make_url(server_url()).set(database=database).render_as_string(hide_password=False)


@functools.cache
def _unreachable() -> tuple[str, str] | None:
    """Why the server cannot be used and what to do about it, or None."""
    try:
        import psycopg
    except ImportError:
        return "needs the postgres extra (psycopg is missing)", "uv sync --extra postgres"
    try:
        with psycopg.connect(server_url(), autocommit=True, connect_timeout=5) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        return (
            f"PostgreSQL is not reachable at {server_url()} ({str(exc).strip().splitlines()[0]})",
            HOW_TO_START,
        )
    return None


def require_postgres() -> None:
    """Skip (or, with EVOPOLICY_REQUIRE_POSTGRES=1, fail) when the server cannot be used."""
    problem = _unreachable()
    if problem is not None:
        missing(*problem, env=REQUIRE_ENV)


def admin(sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Run one statement on the server's own database (autocommit)."""
    import psycopg

    with psycopg.connect(server_url(), autocommit=True) as connection:
        cursor = connection.execute(sql, args or None)
        return cursor.fetchall() if cursor.description else []


def database_for(location: Path | str) -> str:
    """The database name a store at ``location`` (a test's directory) maps to, remembered
    for ``drop_made``; the database itself is created by the store's ``create=True``."""
    digest = hashlib.sha256(f"{os.getpid()}:{location}:{_SALT}".encode()).hexdigest()[:20]
    name = PREFIX + digest
    _made.add(name)
    return name


_SALT = uuid.uuid4().hex


def new_database() -> str:
    """A new, empty database: its URL."""
    name = PREFIX + uuid.uuid4().hex[:20]
    admin(f'CREATE DATABASE "{name}"')
    _made.add(name)
    return url_of(name)


def drop(name: str) -> None:
    admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _made.discard(name)


def drop_made() -> None:
    """Drop every database the tests of this process made so far."""
    for name in sorted(_made):
        drop(name)


def open_postgres(location: Path, *, create: bool = False) -> Any:
    """The contract suite's opener: the store at ``location`` is a database of its own."""
    from evopolicygym.records.postgres import PostgresEventStore

    return PostgresEventStore(url_of(database_for(location)), create=create)


@pytest.fixture
def postgres_databases() -> Iterator[None]:
    """Requires the server; drops every database made during the test at its end."""
    require_postgres()
    try:
        yield
    finally:
        drop_made()
