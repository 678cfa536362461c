"""The Run's Episode pool and seed domains, all derived from the Run seed.

The pool is planned once, at creation, and stored Host-private as a blob that
RunCreated names (``records.pools``; Runs recorded before hold it inline): a resumed
Run reads it back and never re-plans (a Benchmark upgrade cannot change the Episodes
behind an index mid-Run).
"""

from __future__ import annotations

from collections.abc import Sequence

from evopolicygym.benchmark import Benchmark, EpisodeSpec
from evopolicygym.evaluation import PlannedEpisode
from evopolicygym.records.events import PoolEntry
from evopolicygym.records.pools import RecordedPool
from evopolicygym.run.config import RunConfig
from evopolicygym.seeds import derive_seed, seed_deriver

__all__ = ["derive_run_seeds", "plan_pool", "planned", "planned_split"]


def derive_run_seeds(run_seed: int) -> dict[str, int]:
    """One seed per domain; each domain's Episodes and policy seeds follow from its seed."""
    return {
        domain: derive_seed("run", domain, run_seed)
        for domain in ("pool", "validation", "assessment")
    }


def _plan(benchmark: Benchmark, split: str, seed: int, count: int) -> list[PlannedEpisode]:
    specs = benchmark.plan(split, seed, count)
    if len(specs) != count:
        raise ValueError(f"{benchmark.spec.id}: plan() returned {len(specs)} Episodes, not {count}")
    policy_seed = seed_deriver("policy", benchmark.spec.id, split, seed)  # derive_seed(..., index)
    return [PlannedEpisode(spec, policy_seed(spec.index)) for spec in specs]


def plan_pool(benchmark: Benchmark, config: RunConfig, seeds: dict[str, int]) -> list[PoolEntry]:
    """The Run-local pool of the train split, indexed 0..pool_size-1."""
    return [
        PoolEntry(
            index=i,
            split=p.spec.split,
            seed=p.spec.seed,
            policy_seed=p.policy_seed,
            scenario=dict(p.spec.scenario),
        )
        for i, p in enumerate(_plan(benchmark, config.train_split, seeds["pool"], config.pool_size))
    ]


def planned(
    pool: RecordedPool | Sequence[PoolEntry], indices: Sequence[int]
) -> list[PlannedEpisode]:
    """The recorded pool entries behind ``indices``, ready to evaluate."""
    entries = (
        pool.entries(indices) if isinstance(pool, RecordedPool) else [pool[i] for i in indices]
    )
    return [
        PlannedEpisode(
            EpisodeSpec(split=e.split, index=e.index, seed=e.seed, scenario=dict(e.scenario)),
            e.policy_seed,
        )
        for e in entries
    ]


def planned_split(benchmark: Benchmark, split: str, seed: int, count: int) -> list[PlannedEpisode]:
    """Validation or Assessment Episodes: planned from their own seed domain, never the pool's."""
    return _plan(benchmark, split, seed, count)
