"""What a Run at the maximum budget costs now that its Episode pool is a blob.

Prints, from one run on this machine, for a CartPole Run of ``--budget`` Episodes
(default 1,000,000, the documented maximum):
- planning the pool alone (Benchmark.plan and the policy seeds): the baseline;
- the pool as RunCreated held it before (inline): its encoded size, and encoding and
  appending it, which the store now refuses (over MAX_EVENT_BYTES);
- ``create_run`` end to end (planning, storing the pool as blobs, RunCreated): time, the
  ratio to planning alone, RunCreated's size, the pool's blobs on disk;
- reading it back as resume does (the manifest, then the chunks a Submission needs) and
  whole as verify does;
- ``evopolicy query``'s catch-up of the read models from nothing on the new store and on a
  store whose RunCreated holds the pool inline (as before, written here past the limit),
  and a query on each.

Usage: uv run python tests/perf/bench_pool.py [--budget N]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec

from evopolicygym.records import store as store_module
from evopolicygym.records.events import RunCreated, new_event
from evopolicygym.records.location import open_store
from evopolicygym.records.pools import RecordedPool
from evopolicygym.records.read_models import open_read_models, refresh
from evopolicygym.records.runs import run_stream_id
from evopolicygym.records.store import EventTooLarge
from evopolicygym.registry import load_benchmark
from evopolicygym.run.config import RunConfig
from evopolicygym.run.create import create_run
from evopolicygym.run.ledger import event_id
from evopolicygym.run.pool import derive_run_seeds, plan_pool
from evopolicygym.transcript import AgentIdentity

T = TypeVar("T")


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def mb(size: float) -> str:
    return f"{size / 1e6:,.1f} MB"


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def query_count(root: Path) -> tuple[Any, float]:
    """The read models built from nothing (timed the second time: the first pays for
    starting DuckDB and the decoders), then a query on them."""
    with open_store(root) as store:
        refresh(store)
        for path in root.glob("read-models.duckdb*"):
            path.unlink()
        _, seconds = timed(lambda: refresh(store))
        with open_read_models(store, read_only=True) as db:
            row = db.execute("SELECT count(*), max(benchmark_id) FROM runs").fetchone()
    return row, seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=1_000_000)
    budget = parser.parse_args().budget
    config = RunConfig(episode_budget=budget).resolved()
    agent = AgentIdentity(name="reference", provider="reference")
    benchmark = load_benchmark("cartpole")
    seeds = derive_run_seeds(config.seed)
    print(f"CartPole Run, budget {budget:,} (pool {config.pool_size:,} Episodes)")

    pool, plan_s = timed(lambda: plan_pool(benchmark, config, seeds))
    print(f"  planning the pool alone        {plan_s:7.2f} s   (baseline)")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        # Before: the pool inline in RunCreated (v1's shape), which the store now refuses.
        old = RunCreated(
            run_id="inline",
            config=config.to_dict(),
            benchmark_id="cartpole",
            benchmark_spec=msgspec.to_builtins(benchmark.spec),
            environment_digest=benchmark.spec.environment_digest,
            initial_program_digest="sha256:" + "0" * 64,
            agent=agent,
            pool=pool,
            seeds=seeds,
        )
        start = time.perf_counter()
        inline = new_event(old, event_id("inline", 1))
        encode_s = time.perf_counter() - start
        stream = run_stream_id("inline")
        with open_store(root / "old", create=True) as store:
            try:
                store.events.append(stream, [inline], 0)
                refused = "appended"
            except EventTooLarge as exc:
                refused = f"refused: {exc}"
            # Written past the limit, as a store from before it holds it.
            limit = store_module.MAX_EVENT_BYTES
            store_module.MAX_EVENT_BYTES = len(inline.payload)
            try:
                start = time.perf_counter()
                store.events.append(stream, [inline], 0)
                append_s = time.perf_counter() - start
            finally:
                store_module.MAX_EVENT_BYTES = limit
        print(
            f"  before: RunCreated inline      {mb(len(inline.payload))}, "
            f"encoded in {encode_s:.2f} s, appended in {append_s:.2f} s"
        )
        print(f"          appending it now       {refused}")
        del inline, old

        with open_store(root / "new", create=True) as store:
            run_id, create_s = timed(lambda: create_run(store, "cartpole", config, agent))
            envelope = next(iter(store.events.read_stream(run_stream_id(run_id))))
            created = envelope.event()
            assert isinstance(created, RunCreated) and created.pool_blob is not None
            blobs = du(store.path / "blobs")
            chunks = len(msgspec.json.decode(store.blobs.get(created.pool_blob))["chunks"])
            print(
                f"  after:  create_run             {create_s:7.2f} s   "
                f"({create_s / plan_s:.2f}x planning alone)"
            )
            print(f"          RunCreated             {len(envelope.payload):,} bytes")
            print(
                f"          pool blobs on disk     {mb(blobs)} "
                f"in {chunks} chunks + a manifest (zstd)"
            )
            recorded, load_s = timed(lambda: RecordedPool.of(created, store.blobs))
            indices = [0, budget // 2, budget - 1]
            _, lookup_s = timed(lambda: recorded.entries(indices))
            _, whole_s = timed(lambda: sum(1 for _ in RecordedPool.of(created, store.blobs)))
            print(
                f"          resume: manifest {load_s * 1000:.1f} ms, 3 Episodes across the pool "
                f"{lookup_s * 1000:.1f} ms; verify reads it whole in {whole_s:.2f} s"
            )
            assert recorded.entries(indices) == [pool[i] for i in indices]
        del pool

        for name, label in (("new", "new store   "), ("old", "inline store")):
            (count, bench), seconds = query_count(root / name)
            print(f"  query catch-up, {label}   {seconds:7.2f} s   runs: {count} ({bench})")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS of this script        {peak:,.0f} MB")


if __name__ == "__main__":
    main()
