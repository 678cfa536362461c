"""The Episode pool kept as blobs (``records.pools``).

RunCreated stays small whatever the budget; the pool reads back exactly as recorded
(never planned again) for resume, replay, re-evaluation, query and export; a RunCreated
that holds its pool inline (v1, Runs recorded before) still reads and resumes; verify,
replay and resume find a pool blob that is missing or wrong.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.cli.group import main
from evopolicygym.program import Program
from evopolicygym.records import pools
from evopolicygym.records.blobs import FileBlobStore
from evopolicygym.records.events import (
    AgentStarted,
    EpisodeCompleted,
    Event,
    NewEvent,
    PoolEntry,
    RunCreated,
    decode_event,
    encode_payload,
    new_event,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.pools import PoolError, RecordedPool, put_pool
from evopolicygym.records.private import REDACTED, PrivateValues
from evopolicygym.records.runs import run_stream_id, summarize
from evopolicygym.records.verify import verify_store
from evopolicygym.registry import load_benchmark
from evopolicygym.run.config import RunConfig
from evopolicygym.run.decider import (
    Create,
    InvalidTransition,
    Rejection,
    RunState,
    Submit,
    decide,
    evolve,
)
from evopolicygym.run.host import RunHost
from evopolicygym.run.ledger import RunError, event_id, load_run
from evopolicygym.run.pool import derive_run_seeds, plan_pool
from evopolicygym.run.reevaluation import reevaluate
from evopolicygym.run.replay import replay_run
from evopolicygym.transcript import AgentIdentity
from tests.support.blobdamage import lose_blob
from tests.support.hostruns import SMALL, agent_script, drive, new_run, of

pytestmark = pytest.mark.timeout(300)

LARGE = 50_000  # a budget whose pool took 5 MB inline; the maximum is measured in tests/perf
SMALL_RUN_CREATED = 4096  # bytes: what RunCreated holds besides the pool is a few fields


def entries(count: int, scenario: dict[str, Any] | None = None) -> list[PoolEntry]:
    return [
        PoolEntry(
            index=i,
            split="train",
            seed=7_000_000_000 + i,
            policy_seed=8_000_000_000 + i,
            scenario=dict(scenario or {}),
        )
        for i in range(count)
    ]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


def created_of(store: Store, run_id: str) -> tuple[RunCreated, int]:
    """The Run's RunCreated and the size of its stored payload."""
    envelope = next(iter(store.events.read_stream(run_stream_id(run_id))))
    event = envelope.event()
    assert isinstance(event, RunCreated)
    return event, len(envelope.payload)


# --------------------------------------------------------------------------- the blobs


def test_a_pool_reads_back_as_written_chunk_by_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pools, "CHUNK_ENTRIES", 7)
    blobs = FileBlobStore(tmp_path)
    pool = entries(50)
    digest = put_pool(blobs, pool)
    assert put_pool(blobs, pool) == digest  # content-addressed: the same pool, the same blobs
    manifest = json.loads(blobs.get(digest))
    assert [c["count"] for c in manifest["chunks"]] == [7] * 7 + [1]
    loaded = RecordedPool.load(blobs, digest, 50)
    assert len(loaded) == 50 and list(loaded) == pool
    assert loaded.entries([49, 0, 7, 7, 13]) == [pool[49], pool[0], pool[7], pool[7], pool[13]]
    with pytest.raises(IndexError, match="outside the pool"):
        loaded.entries([50])
    with pytest.raises(IndexError):
        loaded.entries([-1])
    with pytest.raises(PoolError, match="holds 50 entries; the Run's pool size is 51"):
        RecordedPool.load(blobs, digest, 51)
    with pytest.raises(ValueError, match=r"indexed 0\.\.n-1"):
        put_pool(blobs, pool[::-1])


def test_chunks_are_bounded_in_bytes_as_well(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scenarios of any size: a chunk stays under CHUNK_BYTES (or holds one entry)."""
    monkeypatch.setattr(pools, "CHUNK_BYTES", 4000)
    blobs = FileBlobStore(tmp_path)
    pool = entries(60, {"map": "x" * 300})
    pool[5] = msgspec.structs.replace(pool[5], scenario={"map": "y" * 9000})  # one over the bound
    digest = put_pool(blobs, pool)
    chunks = json.loads(blobs.get(digest))["chunks"]
    assert len(chunks) > 4
    assert all(blobs.size(c["blob"]) <= 4000 or c["count"] == 1 for c in chunks)
    assert list(RecordedPool.load(blobs, digest, 60)) == pool


def test_a_pool_that_does_not_read_back_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pools, "CHUNK_ENTRIES", 10)
    blobs = FileBlobStore(tmp_path)
    pool = entries(30)
    digest = put_pool(blobs, pool)
    chunks = json.loads(blobs.get(digest))["chunks"]
    # Chunks swapped in a manifest: each reads back, but not with the indices it should.
    swapped = {
        "format": pools.POOL_FORMAT,
        "size": 30,
        "chunks": [{**chunks[1], "start": 0}, {**chunks[0], "start": 10}, chunks[2]],
    }
    wrong = RecordedPool.load(blobs, blobs.put(json.dumps(swapped).encode()), 30)
    with pytest.raises(PoolError, match="holds index 10 where 0 belongs"):
        wrong.entries([0])
    gaps = {**swapped, "chunks": [chunks[0], chunks[2]]}
    with pytest.raises(PoolError, match="not contiguous"):
        RecordedPool.load(blobs, blobs.put(json.dumps(gaps).encode()))
    with pytest.raises(PoolError, match="malformed"):
        RecordedPool.load(blobs, blobs.put(b'{"format": "x"}'))
    with pytest.raises(PoolError, match="invalid"):
        RecordedPool.load(blobs, "not-a-digest")
    # A chunk gone: lookups in the other chunks still work; one in it is refused.
    os.unlink(blobs.path(chunks[1]["blob"]))
    loaded = RecordedPool.load(blobs, digest, 30)
    assert loaded.entries([0, 29]) == [pool[0], pool[29]]
    with pytest.raises(PoolError, match=r"chunk 1 \(indices 10..19\)") as caught:
        loaded.entries([15])
    assert caught.value.missing
    os.unlink(blobs.path(digest))
    with pytest.raises(PoolError, match="is not in the store") as caught:
        RecordedPool.load(blobs, digest, 30)
    assert caught.value.missing


def test_the_decider_takes_a_pool_inline_or_as_a_blob_never_both() -> None:
    config = RunConfig(episode_budget=2).resolved()
    create: dict[str, Any] = dict(
        run_id="r",
        config=config,
        benchmark_id="cartpole",
        benchmark_spec={"id": "cartpole"},
        environment_digest="sha256:" + "e" * 64,
        initial_program_digest="sha256:" + "a" * 64,
        agent=AgentIdentity(name="reference", provider="reference"),
        seeds={"pool": 1, "validation": 2, "assessment": 3},
    )
    blob = "sha256:" + "b" * 64
    (event,) = decide(RunState(), Create(**create, pool_blob=blob))  # type: ignore[misc]
    assert isinstance(event, RunCreated) and event.pool_blob == blob and event.pool == []
    assert evolve(RunState(), event).pool_blob == blob
    refused = decide(RunState(), Create(**create, pool_blob=blob, pool=entries(2)))
    assert isinstance(refused, Rejection) and "not both" in refused.message
    with pytest.raises(InvalidTransition, match="inline and as a blob"):
        evolve(RunState(), msgspec.structs.replace(event, pool=entries(2)))


# --------------------------------------------------------------------------- a large Run


def test_a_large_run_keeps_run_created_small_and_its_pool_as_planned(store: Store) -> None:
    run_id = new_run(store, "true", RunConfig(episode_budget=LARGE, validation=SMALL.validation))
    created, size = created_of(store, run_id)
    assert size < SMALL_RUN_CREATED, size  # the pool was 5 MB of it inline
    assert created.pool == [] and created.pool_blob is not None
    assert summarize(store.events, run_stream_id(run_id)).pool_size == LARGE
    # The pool read back is the pool the Host planned at creation, entry for entry.
    config = RunConfig.from_dict(created.config)
    planned = plan_pool(load_benchmark("cartpole"), config, derive_run_seeds(config.seed))
    assert list(RecordedPool.of(created, store.blobs)) == planned
    report = verify_store(store)
    assert report.ok, report.problems


def test_resume_replay_reevaluation_query_and_export_of_a_large_run(
    store: Store, tmp_path: Path
) -> None:
    """The Host died after reserving the pool's last Episodes for Submission 1: the resumed
    Run evaluates them from the recorded pool; replay, re-evaluation, query and export read it."""
    command = agent_script(tmp_path, 'cli("finish", "1")\n')
    run_id = new_run(
        store,
        command,
        RunConfig(
            episode_budget=LARGE,
            validation=SMALL.validation,
            assessment=SMALL.assessment,
            agent_timeout=120.0,
        ),
    )
    program = Program.from_files(
        {"policy.py": "def make_policy(c):\n    return lambda o: int(o[2] > 0)\n"}
    )
    store.blobs.put_program(program)
    stream = run_stream_id(run_id)
    store.events.append(
        stream, [new_event(AgentStarted(attempt=1, command=["gone"]), event_id(run_id, 2))], 1
    )
    state, _ = load_run(store, run_id)
    last = f"{LARGE - 3}:{LARGE}"
    decision = decide(state, Submit(request_id="r1", selector=last, program_digest=program.digest))
    assert isinstance(decision, list)
    store.events.append(stream, [new_event(decision[0], event_id(run_id, 3))], 2)

    workspace = tmp_path / "ws"
    state, events = drive(store, run_id, workspace)
    assert state.finished == "finished", [type(e).__name__ for e in events]
    assert [e.index for e in of(events, EpisodeCompleted)] == [LARGE - 3, LARGE - 2, LARGE - 1]
    created, _ = created_of(store, run_id)
    pool = RecordedPool.of(created, store.blobs)
    secrets = {str(e.seed) for e in pool.entries(range(LARGE - 3, LARGE))}
    secrets |= {str(e.policy_seed) for e in pool.entries(range(LARGE - 3, LARGE))}
    # Nothing of the pool reaches the Agent's workspace: not its seeds, not its blob.
    assert created.pool_blob is not None
    for path in workspace.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            assert created.pool_blob[7:] not in text and not any(s in text for s in secrets), path

    replay = replay_run(store, run_id)
    assert replay.ok, replay.problems
    assert replay.timeline[0].pool_size == LARGE  # type: ignore[attr-defined]
    assert reevaluate(store, run_id, jobs=1) == []
    report = verify_store(store)
    assert report.ok, report.problems

    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "query",
            "--store",
            str(store.path),
            "--json",
            "SELECT r.status, strlen(e.payload::VARCHAR) AS size FROM runs r "
            "JOIN events e ON e.run_id = r.run_id AND e.type = 'RunCreated'",
        ],
    )
    assert result.exit_code == 0, result.output
    [row] = json.loads(result.stdout)
    assert row["status"] == "finished" and row["size"] < SMALL_RUN_CREATED

    from evopolicygym_exporters import ExportOptions, export

    out = tmp_path / "export"
    export(store, ["events"], out, ExportOptions(test_fraction=0.0))
    import datasets

    rows = [r for split in datasets.load_dataset(str(out), "events").values() for r in split]
    first = next(r for r in rows if r["type"] == "RunCreated")
    assert not {"pool", "pool_blob", "seeds"} & set(first["payload"])
    whole = json.dumps(rows, default=str)
    assert created.pool_blob[7:] not in whole and not any(s in whole for s in secrets)


def test_a_pool_that_cannot_be_read_back_stops_resume_verify_and_replay(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never re-planned: with a chunk of its pool gone, the Run refuses to go on (nothing is
    appended), and verify and replay say which blob is missing."""
    monkeypatch.setattr(pools, "CHUNK_ENTRIES", 8)
    run_id = new_run(store, "true", RunConfig(episode_budget=20))
    created, _ = created_of(store, run_id)
    assert created.pool_blob is not None
    chunk = json.loads(store.blobs.get(created.pool_blob))["chunks"][1]["blob"]
    lose_blob(store.blobs, chunk)

    report = verify_store(store)
    [problem] = report.problems
    assert (problem.position, problem.kind, problem.blob) == (1, "blob_missing", created.pool_blob)
    assert "chunk 1 (indices 8..15)" in problem.message and chunk in problem.message
    replay = replay_run(store, run_id)
    assert [(p.kind, p.blob) for p in replay.problems] == [("blob_missing", created.pool_blob)]
    # The private values cannot all be known: every long number is scrubbed instead.
    private = PrivateValues.of(created, store.blobs)
    assert (
        private.unknown and private.scrub("seed 123456 at step 12") == f"seed {REDACTED} at step 12"
    )

    monkeypatch.setattr(pools, "CHUNK_ENTRIES", 8192)
    lose_blob(store.blobs, created.pool_blob)  # now the manifest too: resume refuses
    host = RunHost(store, run_id, launcher=ProviderLauncher())
    with pytest.raises(
        RunError, match=f"run {run_id} cannot go on: the Episode pool cannot be read"
    ):
        host.drive()
    assert store.events.streams(run_stream_id(run_id))[0].version == 1  # nothing appended
    [problem] = verify_store(store).problems
    assert (problem.kind, problem.blob) == ("blob_missing", created.pool_blob)


# --------------------------------------------------------------------------- Runs recorded before


def as_v1(created: RunCreated, pool: list[PoolEntry], run_id: str) -> NewEvent:
    """``created`` as RunCreated v1 wrote it: the pool inline, no pool_blob (nor the fields
    added since as options)."""
    payload = msgspec.json.decode(encode_payload(created))
    for later in ("pool_blob", "agent_containment"):
        payload.pop(later)
    payload.update(run_id=run_id, pool=msgspec.to_builtins(pool))
    raw = msgspec.json.encode(payload, order="sorted")
    return NewEvent(event_id(run_id, 1), "RunCreated", 1, raw)


def test_a_run_created_v1_with_its_pool_inline_still_reads_and_resumes(
    store: Store, tmp_path: Path
) -> None:
    command = agent_script(tmp_path, 'cli("submit", "--episodes", "4:6")\ncli("finish", "1")\n')
    template = new_run(store, command)
    created, _ = created_of(store, template)
    pool = list(RecordedPool.of(created, store.blobs))
    old = as_v1(created, pool, "old")
    store.events.append(run_stream_id("old"), [old], 0)

    event = decode_event("RunCreated", 1, old.payload)  # upcast: the same fields, as v2
    assert isinstance(event, RunCreated) and event.pool == pool and event.pool_blob is None
    assert summarize(store.events, run_stream_id("old")).pool_size == len(pool)
    assert list(RecordedPool.of(event, store.blobs)) == pool
    private = PrivateValues.of(event)
    assert private.scrub(f"seed {pool[4].seed}") == f"seed {REDACTED}"

    state, events = drive(store, "old")
    assert state.finished == "finished"
    assert [e.index for e in of(events, EpisodeCompleted)] == [4, 5]
    replay = replay_run(store, "old")
    assert replay.ok, replay.problems
    assert replay.timeline[0].pool_size == len(pool)  # type: ignore[attr-defined]
    report = verify_store(store)
    assert report.ok, report.problems


def test_a_v1_payload_is_stored_as_written_and_reads_as_v2(store: Store) -> None:
    created = RunCreated(
        run_id="x",
        config={"episode_pool_size": 2},
        benchmark_id="b",
        benchmark_spec={},
        environment_digest="sha256:" + "e" * 64,
        initial_program_digest="sha256:" + "a" * 64,
        agent=AgentIdentity(name="n", provider="p"),
    )
    old = as_v1(created, entries(2), "x")
    store.events.append("run-x", [old], 0)
    [envelope] = list(store.events.read_stream("run-x"))
    assert envelope.schema_version == 1 and envelope.payload == old.payload
    event: Event = envelope.event()
    assert isinstance(event, RunCreated) and event.pool == entries(2)


_SECRET_CHARS = "abcxyz01"


def _sequential(strings: set[str], text: str) -> str:
    """The scrub of strings as a plain loop: every secret searched for, longest first."""
    for secret in sorted(strings, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


@settings(max_examples=200, deadline=None)
@given(
    secrets=st.sets(st.text(_SECRET_CHARS, min_size=6, max_size=12), min_size=1, max_size=200),
    pieces=st.lists(st.text(_SECRET_CHARS + " -", max_size=8), max_size=30),
    data=st.data(),
)
def test_scrubbing_many_strings_finds_what_a_search_for_each_finds(
    secrets: set[str], pieces: list[str], data: st.DataObject
) -> None:
    """Past ``_INDEX_FROM`` strings, which occur is found in one pass over the text; the text
    out is the same as searching it for every string (longest first)."""
    planted = data.draw(st.lists(st.sampled_from(sorted(secrets)), max_size=10))
    text = "".join(
        p for pair in zip(pieces, planted + [""] * len(pieces), strict=False) for p in pair
    )
    private = PrivateValues()
    private.strings = set(secrets)
    assert private.scrub(text) == _sequential(secrets, text)
    for secret in planted:
        assert secret not in private.scrub(text)
