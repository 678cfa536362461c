"""The SQLite log's DDL kept as text in ``records.sqlite`` is what ``records.tables``' models
compile to, and opening or creating a directory store imports no SQLAlchemy, SQLModel or
pydantic."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy.dialects.sqlite import dialect as sqlite_dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from evopolicygym.records import sqlite
from evopolicygym.records.tables import LogModel


def test_the_kept_ddl_is_what_the_models_compile_to() -> None:
    compiled: list[str] = []
    for table in LogModel.metadata.sorted_tables:
        compiled.append(
            str(CreateTable(table, if_not_exists=True).compile(dialect=sqlite_dialect()))
        )
        compiled.extend(
            str(CreateIndex(index, if_not_exists=True).compile(dialect=sqlite_dialect()))
            for index in table.indexes
        )
    assert list(sqlite._SCHEMA) == compiled


def test_creating_and_opening_a_store_imports_no_orm(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from evopolicygym.records.location import open_store\n"
        f"with open_store({str(tmp_path / 'store')!r}, create=True) as s:\n"
        "    s.blobs.put(b'x' * 300)\n"
        f"with open_store({str(tmp_path / 'store')!r}) as s:\n"
        "    s.events.head()\n"
        "print(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('sqlalchemy', 'sqlmodel', 'pydantic')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
