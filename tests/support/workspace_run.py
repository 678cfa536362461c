"""A recorded Run for the workspace and feedback tests: its programs, events and
artifacts, a canary in every private value, as the fixtures ``store``, ``programs`` and
``run``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from evopolicygym.program import Program
from evopolicygym.records.events import (
    AgentMessages,
    ArtifactRef,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    PoolEntry,
    RunCreated,
    SubmissionPublished,
    new_event,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.store import BlobStore
from evopolicygym.transcript import AgentIdentity, Message

BUDGET = 12


# Host-private and held-out values, distinctive enough that finding one can only be a leak.
CANARY = "7319046652811"
CANARY_SEED = int(CANARY)
CANARY_SCORE = float(CANARY) + 0.25
CANARY_TEXT = f"canary-{CANARY}"
POLICY_V0 = "def make_policy(context):\n    return lambda observation: 0\n"
POLICY_V1 = "def make_policy(context):\n    return lambda observation: 1\n"
POLICY_V2 = "def make_policy(context):\n    return lambda observation: int(observation[2] > 0)\n"
HELPER = "GAIN = 0.5\n"


@dataclass
class RunLog:
    """A Run stream in a real store, with the typed events as appended."""

    store: Store
    stream: str = "run-alpha"
    events: list[Event] = field(default_factory=list)

    def append(self, *events: Event) -> None:
        version = len(self.events)
        batch = [new_event(e, f"{self.stream}/{version + i + 1}") for i, e in enumerate(events)]
        self.store.events.append(self.stream, batch, version)
        self.events.extend(events)

    def read(self) -> list[Event]:
        return [envelope.event() for envelope in self.store.events.read_stream(self.stream, 0)]


@dataclass
class Programs:
    initial: Program
    first: Program
    second: Program


def program(source: str, **extra: str) -> Program:
    return Program.from_files({"policy.py": source, **extra})


def run_created(initial: str, **config: Any) -> RunCreated:
    return RunCreated(
        run_id="alpha",
        config={"episode_budget": BUDGET, "seed": CANARY_SEED, **config},
        benchmark_id="cartpole",
        benchmark_spec={"id": "cartpole", "score_direction": "maximize"},
        environment_digest="sha256:" + "e" * 64,
        initial_program_digest=initial,
        agent=AgentIdentity(name="reference", provider="reference"),
        pool=[
            PoolEntry(
                index=i,
                split="train",
                seed=CANARY_SEED + i,
                policy_seed=CANARY_SEED,
                scenario={"canary": CANARY_TEXT},
            )
            for i in range(6)
        ],
        seeds={"validation": CANARY_SEED, "assessment": CANARY_SEED},
    )


def started(
    sid: int, prog: Program, parent: Program | None, indices: list[int], used: int
) -> Event:
    return EvaluationStarted(
        submission_id=sid,
        program_digest=prog.digest,
        parent_program_digest=None if parent is None else parent.digest,
        indices=indices,
        budget_reserved=len(indices),
        budget_used=used,
    )


def episode(sid: int, index: int, reward: float, trace: str | None = None) -> EpisodeCompleted:
    return EpisodeCompleted(
        submission_id=sid,
        index=index,
        status="ok" if reward > 0 else "error",
        total_reward=reward,
        steps=int(reward),
        failure=None if reward > 0 else "policy raised ValueError",
        duration_s=CANARY_SCORE,
        output_tail=f"episode {index} done\n",
        trace_blob=trace,
    )


def artifact(blobs: BlobStore, name: str, data: bytes, retention: str = "bulk") -> ArtifactRef:
    return ArtifactRef(
        name=name,
        media_type="application/octet-stream",
        retention=retention,  # type: ignore[arg-type]
        blob=blobs.put(data),
        size=len(data),
    )


@pytest.fixture(name="store")
def new_store(tmp_path: Path) -> Iterator[Store]:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


@pytest.fixture(name="programs")
def stored_programs(store: Store) -> Programs:
    made = Programs(
        initial=program(POLICY_V0),
        first=program(POLICY_V1),
        second=program(POLICY_V2, **{"lib/helper.py": HELPER}),
    )
    for p in (made.initial, made.first, made.second):
        store.blobs.put_program(p)
    return made


@pytest.fixture(name="run")
def recorded_run(store: Store, programs: Programs) -> RunLog:
    """Submission 1 published with a permanent and a bulk artifact; 2 failed; 3 published
    with a large bulk artifact; and the Host-private validation and assessment after."""
    log = RunLog(store)
    blobs = store.blobs
    trace = blobs.put(f"trace with seed {CANARY}\n".encode())
    log.append(
        run_created(programs.initial.digest),
        AgentMessages(attempt=1, chunk=0, messages=[Message(role="user", content="Improve.")]),
        started(1, programs.first, programs.initial, [0, 1], used=2),
        episode(1, 0, 40.0, trace),
        episode(1, 1, 0.0),
        SubmissionPublished(
            submission_id=1,
            program_digest=programs.first.digest,
            score=20.0,
            failures=1,
            content={"mean_steps": 20, "note": "héllo"},
            artifacts=[
                artifact(blobs, "summary.txt", b"permanent summary\n", "permanent"),
                artifact(blobs, "trace.jsonl", b"x" * 300),
            ],
            budget_used=2,
            budget_left=10,
        ),
        started(2, programs.second, programs.first, [2, 3, 4], used=5),
        episode(2, 2, 10.0),
        EvaluationFailed(submission_id=2, error="worker lost", budget_consumed=3),
        started(3, programs.second, programs.first, [5], used=6),
        episode(3, 5, 99.0, trace),
        SubmissionPublished(
            submission_id=3,
            program_digest=programs.second.digest,
            score=99.0,
            failures=0,
            content={"mean_steps": 99},
            artifacts=[artifact(blobs, "trace.jsonl", b"y" * 1000)],
            budget_used=6,
            budget_left=6,
        ),
    )
    return log


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` -> its bytes (None for a directory)."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        found[rel] = None if path.is_dir() else path.read_bytes()
    return found
