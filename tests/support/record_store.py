"""A store of two recorded Runs (one finished, one still running) and a non-Run stream,
interleaved, written event by event with known private seeds: for the ``record`` commands'
tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from evopolicygym.program import Program
from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    ArtifactRef,
    AssessmentCompleted,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    EpisodeOutcome,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    PoolEntry,
    RunCreated,
    RunFinished,
    SubmissionPublished,
    SubmissionRejected,
    ValidationStarted,
    new_event,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.pools import put_pool
from evopolicygym.records.store import BlobStore
from evopolicygym.transcript import AgentIdentity, Message

# Host-private values, distinctive enough that finding one in output can only be a leak.
POOL_SEED = 8_675_309_120
POLICY_SEED = 5_550_001_230
DERIVED_SEEDS = {"validation": 7_771_234_567, "assessment": 7_772_345_678}
VALIDATION_SEED = 9_991_112_223
ASSESSMENT_SEED = 9_993_334_445
RUN_SEED = 7_300_003_991  # in the config: every Host-private seed derives from it
POLICY_V1 = "def make_policy(context):\n    return lambda observation: 0\n"
POLICY_V2 = "def make_policy(context):\n    return lambda observation: int(observation[3] > 0)\n"


@dataclass
class Writer:
    """Appends events to streams with deterministic ids, tracking each stream's version."""

    store: Store
    versions: dict[str, int] = field(default_factory=dict)

    def append(self, stream: str, *events: Event) -> list[int]:
        version = self.versions.get(stream, 0)
        batch = [new_event(e, f"{stream}/{version + i + 1}") for i, e in enumerate(events)]
        positions = self.store.events.append(stream, batch, version)
        self.versions[stream] = version + len(events)
        return positions


@dataclass
class Built:
    root: Path
    positions: dict[str, int]  # a label -> its global position
    blobs: dict[str, str]  # a label -> blob or program digest
    events: int
    blob_count: int


def run_created(
    run_id: str, initial: str, benchmark: str = "cartpole", blobs: BlobStore | None = None
) -> RunCreated:
    """With ``blobs``, the pool is stored there as the Host stores it; else it is inline,
    as in a Run recorded before pools were blobs."""
    pool = [
        PoolEntry(index=i, split="train", seed=POOL_SEED + i, policy_seed=POLICY_SEED + i)
        for i in range(4)
    ]
    config = {"budget": 16, "episodes_per_submission": 2, "agent": "reference", "seed": RUN_SEED}
    return RunCreated(
        run_id=run_id,
        config=config if blobs is None else {**config, "episode_pool_size": len(pool)},
        benchmark_id=benchmark,
        benchmark_spec={"id": benchmark, "score_direction": "maximize"},
        environment_digest="sha256:" + "e" * 64,
        initial_program_digest=initial,
        agent=AgentIdentity(name="reference", provider="reference", model="scripted-1"),
        pool=pool if blobs is None else [],
        pool_blob=None if blobs is None else put_pool(blobs, pool),
        seeds=dict(DERIVED_SEEDS),
    )


def build_store(root: Path) -> Built:
    """Two Runs (one finished, one still running) and a non-Run stream, interleaved."""
    positions: dict[str, int] = {}
    blobs: dict[str, str] = {}
    with open_store(root, create=True) as store:
        w = Writer(store)
        initial = store.blobs.put_program(Program.from_files({"policy.py": POLICY_V1}))
        improved = store.blobs.put_program(Program.from_files({"policy.py": POLICY_V2}))
        blobs.update(initial=initial, improved=improved)
        blobs["raw"] = store.blobs.put(
            b'{"role":"assistant","content":"trying a bang-bang policy"}'
        )
        blobs["trace0"] = store.blobs.put(b"step reward\n" * 200)
        blobs["trace1"] = store.blobs.put(b"step reward\n" * 201)
        blobs["artifact"] = store.blobs.put(b"episode,return\n0,200\n1,187\n")
        blobs["stdout"] = store.blobs.put(b"agent finished\n")

        positions["created"] = w.append("run-alpha", run_created("alpha", initial))[0]
        # alpha's pool is inline (as older Runs hold it), beta's a blob (as the Host keeps it).
        positions["other_created"] = w.append(
            "run-beta", run_created("beta", initial, blobs=store.blobs)
        )[0]
        w.append("host-1", AgentStarted(attempt=1, command=["host"]))
        w.append(
            "run-alpha",
            AgentStarted(attempt=1, command=["reference-agent"], pid=4321),
            AgentMessages(
                attempt=1,
                chunk=0,
                messages=[
                    Message(role="user", content="Improve the policy."),
                    Message(role="assistant", content="Submitting a bang-bang policy."),
                ],
                raw_blob=blobs["raw"],
            ),
        )
        positions["evaluation"] = w.append(
            "run-alpha",
            EvaluationStarted(
                submission_id=1,
                program_digest=improved,
                parent_program_digest=initial,
                indices=[0, 1],
                budget_reserved=2,
                budget_used=2,
            ),
        )[0]
        positions["episode0"], positions["episode1"] = w.append(
            "run-alpha",
            EpisodeCompleted(
                submission_id=1,
                index=0,
                status="ok",
                total_reward=200.0,
                steps=200,
                trace_blob=blobs["trace0"],
            ),
            EpisodeCompleted(
                submission_id=1,
                index=1,
                status="ok",
                total_reward=187.0,
                steps=187,
                trace_blob=blobs["trace1"],
            ),
        )
        w.append("run-beta", AgentStarted(attempt=1))
        positions["published"] = w.append(
            "run-alpha",
            SubmissionPublished(
                submission_id=1,
                program_digest=improved,
                score=193.5,
                failures=0,
                artifacts=[
                    ArtifactRef(
                        name="returns.csv",
                        media_type="text/csv",
                        retention="permanent",
                        blob=blobs["artifact"],
                        size=27,
                    )
                ],
                budget_used=2,
                budget_left=14,
            ),
            SubmissionRejected(request_id="req-2", code="duplicate", message="already submitted"),
            FinishAccepted(request_id="req-3", candidates=[1]),
            AgentExited(attempt=1, exit_code=0, reason="finished", stdout_blob=blobs["stdout"]),
            ValidationStarted(candidates=[1], split="validation", episodes=4, seed=VALIDATION_SEED),
            CandidateValidated(
                submission_id=1,
                score=190.25,
                failures=0,
                episodes=[
                    EpisodeOutcome(index=i, status="ok", total_reward=190.25, steps=190)
                    for i in range(4)
                ],
            ),
            FinalSubmissionSelected(
                submission_id=1, program_digest=improved, score=190.25, reason="best validation"
            ),
            AssessmentStarted(
                submission_id=1, split="assessment", episodes=4, seed=ASSESSMENT_SEED
            ),
            AssessmentCompleted(submission_id=1, score=188.75, failures=1),
            RunFinished(
                reason="finished",
                final_submission_id=1,
                validation_score=190.25,
                assessment_score=188.75,
            ),
        )[0]
        events = store.events.head()
    # Two programs (each verified with its tree and files) and five plain blobs.
    return Built(root, positions, blobs, events, blob_count=8)


def store_args(built: Built, *args: str) -> list[str]:
    return ["record", "--store", str(built.root), *args]
