"""The log's tables, declared once as SQLModel models: ``events`` and ``store_meta``.

A backend creates its schema from ``LogModel.metadata`` (the SQLite backend
adds its append-only triggers and pragmas; the PostgreSQL backend adds its
own), then may keep its hot append and read paths on the driver cursor: those
select and insert the columns in ``Envelope`` field order, which is the
``events`` column order here (a contract test holds them equal).

This is the on-disk log format (``store.FORMAT_VERSION``): a changed column,
type, constraint or name is a new format, which existing stores need an explicit
upgrade to reach. The SQLite backend imports this module only when it creates a
schema, so opening a store does not pay for importing SQLModel and pydantic.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, String, UniqueConstraint
from sqlalchemy.orm import registry
from sqlmodel import AutoString, Field, SQLModel

__all__ = ["EventRecord", "LogModel", "StoreMeta"]


class LogModel(SQLModel, registry=registry()):
    """Base of the log's tables. Its own registry and metadata: another SQLModel table
    declared elsewhere in the process never lands in an event log."""


# BIGINT where a backend's INTEGER is 32 bits; on SQLite exactly INTEGER, which makes
# the position the rowid (no second index), as every existing store has it.
_POSITION_TYPE = BigInteger().with_variant(Integer(), "sqlite")
# Stream ids compare by code point everywhere: SQLite's only order, and PostgreSQL's "C"
# collation (not the database's locale), so ``streams(prefix)`` is a range on the index.
_STREAM_ID_TYPE = AutoString().with_variant(String(collation="C"), "postgresql")


class EventRecord(LogModel, table=True):
    """One event: its envelope (``events.Envelope``), fields in the same order."""

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("stream_id", "stream_version", name="stream_version_unique"),
    )

    # Assigned by the append (gap-free, in commit order), never by the database.
    position: int = Field(
        primary_key=True, sa_type=_POSITION_TYPE, sa_column_kwargs={"autoincrement": False}
    )
    stream_id: str = Field(sa_type=_STREAM_ID_TYPE)
    stream_version: int
    event_id: str = Field(unique=True)  # the idempotency key of a retried append
    type: str
    schema_version: int
    recorded_at: int = Field(sa_type=BigInteger)  # ns since the epoch
    payload: bytes
    payload_hash: str = Field(max_length=64)
    prev_hash: str = Field(max_length=64)
    hash: str = Field(max_length=64)


class StoreMeta(LogModel, table=True):
    """Facts about the store itself: ``format_version`` (see ``store.FORMAT_VERSION``)."""

    __tablename__ = "store_meta"

    key: str = Field(primary_key=True)
    value: str
