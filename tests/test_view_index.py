"""The viewer's Run index: one row per Run in a cache outside the store, caught up from the log.

Built cold from each stream's first and last events, then from the events since its
position; a Run that grows is folded in full (budget used, best so far). Pages filter, sort
and page in SQL: a property test holds them equal to the same filter and sort done in Python
over every row. The store's files are never written. Both backends.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evopolicygym.records.events import RunFinished, new_event
from evopolicygym.records.location import open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.transcript import AgentIdentity
from evopolicygym.view.index import FILTERS, SORTS, RunIndex, RunRow
from tests.support import pg
from tests.support.runlogs import Planned, SynthRun, files, standard_run, write_run

BENCHMARKS = ("toy-counter", "cartpole", "frozen-lake")
AGENTS = (
    AgentIdentity(name="reference", provider="reference"),
    AgentIdentity(name="claude", provider="chat", model="model-x"),
    AgentIdentity(name="codex", provider="codex", model="gpt-y"),
)


def _run(i: int) -> SynthRun:
    return SynthRun(
        run_id=f"run-{i:03d}",
        submissions=[Planned(files(0.1 * (i % 7)), [0, 1], [float(i % 5), float(i % 3)])],
        benchmark_id=BENCHMARKS[i % 3],
        agent=AGENTS[i % len(AGENTS)],
        reason="finished" if i % 4 else "agent_failed",
        assessment_score=None if i % 6 == 0 else float((i * 37) % 101),
    )


def _files(root: Path) -> dict[str, str]:
    """Every file of a store directory and its sha256 (SQLite's -shm/-wal side files aside)."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(("-shm", "-wal"))
    }


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view-index") / "store"
    with open_store(root, create=True) as store:
        for i in range(40):
            write_run(store, _run(i))
    return root


@pytest.fixture(scope="module")
def index(many: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = open_store(many, reader=True)
    index = RunIndex(store, tmp_path_factory.mktemp("cache"))
    index.refresh()
    yield index
    index.close()
    store.close()


def _all(index: RunIndex) -> list[RunRow]:
    return index.page({}, size=1000).rows


def test_a_cold_index_holds_one_row_per_run_as_the_fold_tells(index: RunIndex) -> None:
    rows = {row.run_id: row for row in _all(index)}
    assert len(rows) == 40
    row = rows["run-005"]
    assert (row.benchmark, row.agent, row.provider, row.model) == (
        "frozen-lake",
        "codex",
        "codex",
        "gpt-y",
    )
    assert (row.status, row.score, row.score_kind, row.budget) == (
        "finished",
        float(5 * 37 % 101),
        "assessment",
        8,
    )
    assert rows["run-000"].status == "agent_failed"
    # From an overview: the budget used and the Submissions are not known.
    assert row.budget_used is None and row.submissions is None
    assert index.position() == index.store.events.head()


def test_choices_count_every_value(index: RunIndex) -> None:
    choices = index.page({}).choices
    assert dict(choices["benchmark"]) == {"cartpole": 13, "frozen-lake": 13, "toy-counter": 14}
    assert dict(choices["model"]) == {"gpt-y": 13, "model-x": 13}
    assert set(FILTERS) == set(choices)


def _expected(rows: list[RunRow], filters: dict[str, str], sort: str, desc: bool) -> list[str]:
    kept = [r for r in rows if all(getattr(r, k) == v for k, v in filters.items() if v)]
    column = {"created": "created_at", "updated": "updated_at", "events": "version"}.get(sort, sort)

    def key(row: RunRow) -> Any:
        return getattr(row, column)

    present = sorted(
        (r for r in kept if key(r) is not None), key=lambda r: (key(r), r.run_id), reverse=desc
    )
    return [r.run_id for r in present] + sorted(
        (r.run_id for r in kept if key(r) is None), reverse=desc
    )


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    benchmark=st.sampled_from(["", *BENCHMARKS]),
    agent=st.sampled_from(["", "reference", "claude", "codex", "nobody"]),
    status=st.sampled_from(["", "finished", "agent_failed"]),
    sort=st.sampled_from(sorted(SORTS)),
    desc=st.booleans(),
    size=st.integers(1, 15),
    page=st.integers(-1, 9),
)
def test_pages_are_the_filtered_sorted_rows_cut_in_pages(
    index: RunIndex,
    benchmark: str,
    agent: str,
    status: str,
    sort: str,
    desc: bool,
    size: int,
    page: int,
) -> None:
    filters = {"benchmark": benchmark, "agent": agent, "status": status}
    expected = _expected(_all(index), filters, sort, desc)
    found = index.page(filters, sort=sort, descending=desc, page=page, size=size)
    assert found.total == len(expected)
    assert found.pages == max(1, -(-len(expected) // size))
    assert 1 <= found.page <= found.pages and found.page == min(max(page, 1), found.pages)
    start = (found.page - 1) * size
    assert [r.run_id for r in found.rows] == expected[start : start + size]


def test_dates_bound_the_creation_time(index: RunIndex) -> None:
    rows = sorted(_all(index), key=lambda r: r.created_at or 0)
    middle = rows[20].created_at
    assert middle is not None
    after = index.page({}, since_ns=middle, size=1000).rows
    assert {r.run_id for r in after} == {r.run_id for r in rows if (r.created_at or 0) >= middle}
    before = index.page({}, until_ns=middle, size=1000).rows
    assert len(before) + len(after) == 40


def test_new_and_growing_runs_are_followed_event_by_event(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root, create=True) as writer:
        write_run(writer, standard_run("first"))
        reader = open_store(root, reader=True)
        index = RunIndex(reader, tmp_path / "cache")
        head, changed = index.refresh()
        assert changed == {"first"} and head == writer.events.head()
        assert index.refresh() == (head, set())  # nothing new: nothing changed
        # A Run recorded meanwhile up to its last event: the index folds it in full.
        whole = standard_run("second")
        write_run(writer, whole)
        stream = run_stream_id("second")
        events = list(writer.events.read_stream(stream))
        _head, changed = index.refresh()
        assert changed == {"second"}
        row = index.get("second")
        assert row is not None and row.status == "finished" and row.budget_used == 12
        assert row.submissions == 5 and row.version == len(events)
        index.close()
        reader.close()


def test_a_running_run_has_its_budget_and_best_so_far_live(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with open_store(root, create=True) as writer:
        write_run(writer, standard_run("live"))
        stream = run_stream_id("live")
        envelopes = list(writer.events.read_stream(stream))
        # The same Run cut before its end, in a second store: a Run still running.
        other = tmp_path / "other"
    with open_store(other, create=True) as partial:
        cut = [e for e in envelopes if e.type != RunFinished.type_name()]
        half = len(cut) // 2
        partial.events.append(stream, [new_event(e.event(), e.event_id) for e in cut[:half]], 0)
        reader = open_store(other, reader=True)
        index = RunIndex(reader, tmp_path / "cache", host_alive=lambda run_id: True)
        index.refresh()
        first = index.get("live")
        assert first is not None and first.status == "running"
        assert first.budget_used is not None and first.submissions is not None
        partial.events.append(stream, [new_event(e.event(), e.event_id) for e in cut[half:]], half)
        index.refresh()
        later = index.get("live")
        assert later is not None and later.version == len(cut)
        assert later.budget_used == 12 and later.submissions == 5 and later.status == "running"
        assert later.score_kind in ("validation", "assessment")
        # No Host holds it: the list calls it interrupted, as `record list` does.
        index._host_alive = lambda run_id: False
        assert index.get("live").status == "interrupted"  # type: ignore[union-attr]
        index.close()
        reader.close()


def test_an_index_of_another_store_at_the_same_place_is_rebuilt(tmp_path: Path) -> None:
    root, cache = tmp_path / "store", tmp_path / "cache"
    with open_store(root, create=True) as writer:
        write_run(writer, standard_run("old"))
    with open_store(root, reader=True) as reader:
        index = RunIndex(reader, cache)
        index.refresh()
        index.close()
    for path in sorted(root.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    with open_store(root, create=True) as writer:
        write_run(writer, standard_run("new"))
        write_run(writer, standard_run("newer"))
    with open_store(root, reader=True) as reader:
        index = RunIndex(reader, cache)
        index.refresh()
        assert {r.run_id for r in _all(index)} == {"new", "newer"}
        index.close()


def test_indexing_and_paging_leave_the_store_byte_identical(many: Path, tmp_path: Path) -> None:
    before = _files(many)
    with open_store(many, reader=True) as reader:
        index = RunIndex(reader, tmp_path / "cache")
        index.refresh()
        for sort in SORTS:
            index.page({"benchmark": "cartpole"}, sort=sort, page=2, size=5)
        index.close()
    assert _files(many) == before
    assert not (many / "read-models.duckdb").exists()


def test_the_postgresql_store_is_indexed_and_followed_the_same(tmp_path: Path) -> None:
    pg.require_postgres()
    try:
        _follow_postgres(tmp_path, pg.new_database())
    finally:
        pg.drop_made()


def _follow_postgres(tmp_path: Path, url: str) -> None:
    with open_store(url, create=True) as writer:
        write_run(writer, standard_run("pg-one"))
        reader = open_store(url, reader=True)
        index = RunIndex(reader, tmp_path / "cache")
        _head, changed = index.refresh()
        assert changed == {"pg-one"}
        write_run(writer, standard_run("pg-two"))
        head, changed = index.refresh()
        assert changed == {"pg-two"} and head == writer.events.head()
        row = index.get("pg-two")
        assert row is not None and row.budget_used == 12 and row.status == "finished"
        index.close()
        reader.close()
