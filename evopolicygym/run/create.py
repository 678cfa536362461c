"""Creating a Run: check and plan it (splits, initial Program, seeds, pool), then record RunCreated.

The pool is stored as blobs before RunCreated names it (``records.pools``), as the
initial Program is: whatever the budget, RunCreated stays small."""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import Any

import msgspec

from evopolicygym.benchmark import Benchmark, BenchmarkError
from evopolicygym.evaluation import require_failure_score
from evopolicygym.program import Program
from evopolicygym.records.location import Store
from evopolicygym.records.pools import put_pool
from evopolicygym.registry import baseline_dir, load_benchmark
from evopolicygym.run.config import RunConfig
from evopolicygym.run.decider import Create
from evopolicygym.run.ledger import Ledger, RunError
from evopolicygym.run.pool import derive_run_seeds, plan_pool
from evopolicygym.run.skills import Skill
from evopolicygym.transcript import AgentIdentity

__all__ = ["create_run"]


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


def _public_spec(benchmark: Benchmark) -> dict[str, Any]:
    spec: dict[str, Any] = msgspec.to_builtins(benchmark.spec)
    return spec


def _is_resolved(config: RunConfig) -> bool:
    """Whether ``RunConfig.resolved`` made ``config`` (it fills in every default)."""
    return None not in (
        config.rules,
        config.episode_pool_size,
        config.max_submissions,
        config.max_episodes_per_submission,
    )


def create_run(
    store: Store,
    benchmark: Benchmark | str,
    config: RunConfig,
    agent: AgentIdentity,
    *,
    benchmark_id: str | None = None,
    program: Program | None = None,
    run_id: str | None = None,
    skills: Sequence[Skill] = (),
    agent_containment: str | None = None,
) -> str:
    """Plan and record a new Run; return its id. Nothing is recorded if anything is wrong.

    ``benchmark`` is the Benchmark a command has already loaded from the registry ref
    ``benchmark_id`` (recorded, so the Run can load it again) with ``config.benchmark_params``,
    and ``config`` is already resolved (``RunConfig.resolved``). Given a registry ref instead,
    the Benchmark is loaded and the config resolved here."""
    names = [skill.name for skill in skills]
    if len(set(names)) != len(names):
        raise RunError(
            f"two skills share a name: {', '.join(sorted(n for n in names if names.count(n) > 1))}"
        )
    if isinstance(benchmark, str):
        benchmark_id, config = benchmark, config.resolved()
        benchmark = load_benchmark(benchmark_id, config.benchmark_params or None)
    elif benchmark_id is None:
        raise TypeError("create_run: a loaded Benchmark needs the ref it was loaded by")
    elif not _is_resolved(config):
        raise TypeError("create_run: resolve the config first (RunConfig.resolved)")
    try:
        require_failure_score(benchmark)
    except BenchmarkError as exc:
        raise RunError(str(exc)) from None
    splits = set(benchmark.splits)
    for split in (config.train_split, config.validation.split, config.assessment.split):
        if split not in splits:
            raise RunError(
                f"{benchmark.spec.id} has no split {split!r} (it has {', '.join(benchmark.splits)})"
            )
    if program is None:
        directory = baseline_dir(benchmark)
        if directory is None:
            raise RunError(
                f"{benchmark.spec.id} has no baseline program: give one with --program DIR"
            )
        program = Program.from_directory(directory)
    if "policy.py" not in program.paths():
        raise RunError("the initial program has no policy.py at its top level")
    seeds = derive_run_seeds(config.seed)
    pool = plan_pool(benchmark, config, seeds)
    run_id = run_id or _new_run_id()
    store.blobs.put_program(program)  # before the event that names it
    pool_blob = put_pool(store.blobs, pool)  # so is the pool
    del pool
    for skill in skills:
        store.blobs.put_program(skill.program)
    Ledger(store, run_id).must(
        Create(
            run_id=run_id,
            config=config,
            benchmark_id=benchmark_id,
            benchmark_spec=_public_spec(benchmark),
            environment_digest=benchmark.spec.environment_digest,
            initial_program_digest=program.digest,
            agent=agent,
            pool_blob=pool_blob,
            seeds=seeds,
            skill_program_digests=[skill.program.digest for skill in skills],
            agent_containment=agent_containment,
        )
    )
    return run_id
