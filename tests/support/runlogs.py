"""Recorded Runs written straight into a store, shaped as the Host writes them.

For exporter tests and the export benchmark: a Run is its event stream (the
Host's order: transcript chunks flushed before each request's events) plus the
blobs its events name. Every value the Host keeps private can carry a canary,
so a test can prove none reaches a training column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from evopolicygym.program import Program
from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentCompleted,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    EpisodeOutcome,
    EvaluationFailed,
    EvaluationStarted,
    Event,
    FinalSubmissionSelected,
    FinishAccepted,
    PoolEntry,
    ReferenceValidated,
    RunCreated,
    RunFinished,
    SubmissionPublished,
    ValidationStarted,
    new_event,
)
from evopolicygym.records.location import Store
from evopolicygym.records.pools import put_pool
from evopolicygym.records.traces import encode_trace
from evopolicygym.transcript import AgentIdentity, Message, ToolCall, Usage, offered_tools

__all__ = ["CANARY", "POLICY", "Planned", "SynthRun", "policy_source", "write_run"]

CANARY = "canary-5b1f0e"  # planted in every Host-private or held-out value that can hold text
CANARY_SEEDS = {"pool": 7_301_000_001, "validation": 7_301_000_002, "assessment": 7_301_000_003}
POLICY = (
    "def make_policy(context):\n    gain = {gain}\n    return lambda obs: int(gain * obs[0] > 0)\n"
)


def policy_source(gain: float, structural: bool = False) -> str:
    source = POLICY.format(gain=gain)
    if structural:
        source += "\n\ndef helper(x):\n    return abs(x)\n"
    return source


@dataclass
class Planned:
    """One Submission: its program, its pool indices and per-index rewards (None: it failed)."""

    files: dict[str, str]
    indices: list[int]
    rewards: list[float] | None
    traced: bool = True
    parent: int | None = None  # the Submission the Agent says it edited (0: the initial program)


@dataclass
class SynthRun:
    run_id: str
    submissions: list[Planned]
    benchmark_id: str = "toy-counter"
    agent: AgentIdentity = field(
        default_factory=lambda: AgentIdentity(name="reference", provider="reference")
    )
    direction: str = "maximize"
    initial: dict[str, str] = field(default_factory=lambda: {"policy.py": policy_source(0.0)})
    candidates: list[int] = field(default_factory=lambda: [1])
    reason: str = "finished"
    assessment_score: float | None = 42.0
    chatter: int = 1  # extra assistant remarks per submission (transcript length)
    pool_size: int = 8
    # The initial program's Validation score (the candidates score 1.5 there): under 1.5 the
    # Run improved on it; None writes a Run as rules 1 did (no reference, no labels).
    reference_score: float | None = 1.0
    # Whether AgentStarted records the tools offered, as the Host does for the built-in
    # agents (None for others: their tools are told by their calls).
    record_tools: bool = True
    # Who named the candidates: the Agent's finish, or the Host nominating them after the
    # Agent exited without one (a Run that asked for nomination).
    handoff: str = "agent"
    # The Episode pool inline in RunCreated, as Runs recorded before pools were blobs hold
    # it; else (as the Host writes it now) a blob that RunCreated names.
    inline_pool: bool = False


def _program(store: Store, files: dict[str, str]) -> Program:
    program = Program.from_files(files)
    store.blobs.put_program(program)
    return program


def _task(run: SynthRun) -> str:
    return (
        f"# Task: evolve a policy for `{run.benchmark_id}`\n\nImprove `program/`. "
        f"Budget {run.pool_size} Episodes.\n"
    )


def write_run(store: Store, run: SynthRun, *, canary: bool = True) -> None:
    """Append ``run``'s whole stream (created to finished) and store its blobs."""
    secret = CANARY if canary else "scenario"
    initial = _program(store, run.initial)
    pool = [
        PoolEntry(
            index=i,
            split="train",
            seed=CANARY_SEEDS["pool"] * 10 + i,
            policy_seed=CANARY_SEEDS["pool"] * 10 + 100 + i,
            scenario={"note": f"{secret}-pool-{i}"},
        )
        for i in range(run.pool_size)
    ]
    events: list[Event] = [
        RunCreated(
            run_id=run.run_id,
            config={
                "benchmark_params": {},
                "episode_budget": run.pool_size,
                "episode_pool_size": run.pool_size,
                "max_submissions": run.pool_size,
                "max_episodes_per_submission": run.pool_size,
                "finish_budget_policy": "allow_early",
                "train_split": "train",
                "validation": {
                    "enabled": True,
                    "episodes_per_candidate": 2,
                    "split": "validation",
                    "max_candidates": 3,
                },
                "assessment": {"enabled": True, "episodes": 2, "split": "assessment"},
                "seed": CANARY_SEEDS["pool"] - 1,
                "episode_timeout": 30.0,
                "agent_timeout": 3600.0,
                "max_agent_attempts": 3,
                "bulk_feedback_retention_bytes": 1 << 20,
                "jobs": 1,
                "record_trajectories": "train",
                "host_nomination": run.handoff == "host",
                "rules": 1 if run.reference_score is None else 2,
            },
            benchmark_id=run.benchmark_id,
            benchmark_spec={
                "id": run.benchmark_id,
                "score_direction": run.direction,
                "primary_metric": "return",
            },
            environment_digest="sha256:" + "e" * 64,
            initial_program_digest=initial.digest,
            agent=run.agent,
            pool=pool if run.inline_pool else [],
            pool_blob=None if run.inline_pool else put_pool(store.blobs, pool),
            seeds=dict(CANARY_SEEDS),
        ),
        AgentStarted(
            attempt=1,
            command=["reference"],
            pid=1,
            tools=offered_tools(run.agent) if run.record_tools else None,
        ),
    ]
    chunk = 0
    messages: list[Message] = [Message(role="system", content=_task(run))]
    calls = 0

    def call(name: str, arguments: dict[str, Any], result: str, say: str = "") -> None:
        nonlocal calls
        calls += 1
        call_id = f"call_{calls:04d}"
        messages.append(
            Message(
                role="assistant",
                content=say,
                tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)],
                usage=Usage(input_tokens=100, output_tokens=20),
            )
        )
        messages.append(Message(role="tool", content=result, tool_call_id=call_id, name=name))

    def flush() -> None:
        nonlocal chunk, messages
        if messages:
            events.append(AgentMessages(attempt=1, chunk=chunk, messages=messages))
            chunk += 1
            messages = []

    call("read_file", {"path": "TASK.md"}, _task(run))
    used = 0
    for sid, planned in enumerate(run.submissions, start=1):
        program = _program(store, planned.files)
        for n in range(run.chatter):
            messages.append(
                Message(
                    role="assistant", content=f"Thinking about submission {sid}, step {n}. " * 8
                )
            )
        for path, text in planned.files.items():
            call("write_file", {"path": f"program/{path}", "content": text}, "ok")
        selector = ",".join(str(i) for i in planned.indices)
        call(
            "bash",
            {"command": f"evopolicy session submit --episodes {selector}"},
            "",
            "Submitting.",
        )
        submit_result = messages.pop()  # the tool result follows the Host's events
        flush()
        used += len(planned.indices)
        events.append(
            EvaluationStarted(
                submission_id=sid,
                program_digest=program.digest,
                indices=list(planned.indices),
                budget_reserved=len(planned.indices),
                budget_used=used,
                parent_submission_id=planned.parent,
            )
        )
        if planned.rewards is None:
            # A Host-side error can quote the Episode it failed on: its seed and scenario.
            quoted = (
                f"worker lost on seed {CANARY_SEEDS['pool'] * 10 + planned.indices[0]} "
                f"({secret}-pool-{planned.indices[0]})"
            )
            events.append(
                EvaluationFailed(
                    submission_id=sid, error=quoted, budget_consumed=len(planned.indices)
                )
            )
            messages.append(
                Message(
                    role="tool",
                    content='{"error": "evaluation_failed"}',
                    tool_call_id=submit_result.tool_call_id,
                    name="bash",
                )
            )
            continue
        for index, reward in zip(planned.indices, planned.rewards, strict=True):
            trace = None
            if planned.traced:
                # The Episode's reward on its first step: rewards sum to its total, and
                # Episodes of other totals are other rows.
                steps = [
                    _Step(1, reward if k == 0 else 0.0, False, False, [float(k), 0.0])
                    for k in range(3)
                ]
                steps[-1] = _Step(0, 0.0, True, False, [3.0, 0.0])
                trace = store.blobs.put(encode_trace([0.0, 0.0], steps))
            events.append(
                EpisodeCompleted(
                    submission_id=sid,
                    index=index,
                    status="ok",
                    total_reward=reward,
                    steps=3,
                    trace_blob=trace,
                )
            )
        score = sum(planned.rewards) / len(planned.rewards)
        events.append(
            SubmissionPublished(
                submission_id=sid,
                program_digest=program.digest,
                score=score,
                failures=0,
                content={"mean_steps": 3},
                budget_used=used,
                budget_left=run.pool_size * 4 - used,
            )
        )
        messages.append(
            Message(
                role="tool",
                content=f'{{"submission_id": {sid}, "score": {score}}}',
                tool_call_id=submit_result.tool_call_id,
                name="bash",
            )
        )
    if run.handoff == "agent":
        call(
            "bash",
            {"command": "evopolicy session finish " + " ".join(map(str, run.candidates))},
            "",
        )
        finish_result = messages.pop()
        flush()
        events.append(FinishAccepted(request_id="finish-1", candidates=list(run.candidates)))
        messages.append(
            Message(
                role="tool",
                content='{"accepted": true}',
                tool_call_id=finish_result.tool_call_id,
                name="bash",
            )
        )
    flush()
    events.append(AgentExited(attempt=1, exit_code=0, reason="exited"))
    outcomes = [
        EpisodeOutcome(
            index=i, status="error", total_reward=1.5, steps=3, failure=f"{secret}-held-out"
        )
        for i in range(2)
    ]
    final = run.candidates[0]
    final_digest = Program.from_files(run.submissions[final - 1].files).digest
    legacy = run.reference_score is None
    events += [
        ValidationStarted(
            candidates=list(run.candidates),
            split="validation",
            episodes=2,
            seed=CANARY_SEEDS["validation"],
            handoff=None if legacy else run.handoff,  # type: ignore[arg-type]
        ),
        *(
            []
            if run.reference_score is None
            else [
                ReferenceValidated(
                    program_digest=initial.digest,
                    score=run.reference_score,
                    failures=0,
                    episodes=outcomes,
                )
            ]
        ),
        *(
            CandidateValidated(submission_id=c, score=1.5, failures=0, episodes=outcomes)
            for c in run.candidates
        ),
        FinalSubmissionSelected(
            submission_id=final,
            program_digest=final_digest,
            score=1.5,
            reason="best validation score",
        ),
        AssessmentStarted(
            submission_id=final, split="assessment", episodes=2, seed=CANARY_SEEDS["assessment"]
        ),
        AssessmentCompleted(
            submission_id=final,
            score=run.assessment_score if run.assessment_score is not None else 0.0,
            failures=0,
            episodes=outcomes,
            content={"note": f"{secret}-assessment"},
        ),
        RunFinished(
            reason=run.reason,  # type: ignore[arg-type]
            final_submission_id=final,
            validation_score=1.5,
            assessment_score=run.assessment_score,
            handoff=None if legacy else run.handoff,  # type: ignore[arg-type]
            reference_score=run.reference_score,
            improved=None if run.reference_score is None else run.reference_score < 1.5,
        ),
    ]
    stream = f"run-{run.run_id}"
    batch = [new_event(e, f"{stream}/{i}") for i, e in enumerate(events, start=1)]
    store.events.append(stream, batch, 0)


@dataclass
class _Step:
    action: Any
    reward: float
    terminated: bool
    truncated: bool
    observation: Any


def files(gain: float, structural: bool = False) -> dict[str, str]:
    return {"policy.py": policy_source(gain, structural)}


def standard_run(run_id: str = "alpha", **kw: Any) -> SynthRun:
    """1 and 2 on the same indices (2 better), 3 on others, 4 failed, 5 like 1 but structural."""
    return SynthRun(
        run_id=run_id,
        submissions=[
            Planned(files(0.5), [0, 1, 2], [1.0, 2.0, 3.0]),
            Planned(files(0.7), [0, 1, 2], [4.0, 5.0, 6.0]),
            Planned(files(0.9), [3, 4], [9.0, 9.0]),
            Planned(files(1.1), [5], None),
            Planned(files(0.5, structural=True), [0, 1, 2], [0.0, 0.0, 0.0]),
        ],
        candidates=[2, 3],
        **kw,
    )


def synth_run(run_id: str, **kw: Any) -> SynthRun:
    """1 and 2 on the same indices (2 better), 3 on others, 4 failed, 5 structural from 1
    (named by the Agent), 6 a comment added to 5 on a subset of its indices."""
    return SynthRun(
        run_id=run_id,
        submissions=[
            Planned(files(0.5), [0, 1, 2], [1.0, 2.0, 3.0]),
            Planned(files(0.7), [0, 1, 2], [4.0, 5.0, 6.0]),
            Planned(files(0.9), [3, 4], [9.0, 9.0]),
            Planned(files(1.1), [5], None),
            Planned(files(0.5, structural=True), [0, 1, 2], [0.0, 0.0, 0.0], parent=1),
            Planned({"policy.py": policy_source(0.5, True) + "# note\n"}, [0, 1], [1.0, 0.0]),
        ],
        candidates=[2, 3],
        **kw,
    )


def write_experiment(
    store: Store, cells: list[tuple[str, str, int, int, list[tuple[str, str]]]]
) -> None:
    """An experiment stream ``demo``: per cell (agent, benchmark, seed, agent_seed, its Runs
    as (run_id, outcome) in attempt order), as ``experiment run`` records it."""
    from evopolicygym.records.events import (
        CellRunAssigned,
        CellRunEnded,
        ExperimentAgent,
        ExperimentBenchmark,
        ExperimentCell,
        ExperimentCreated,
        new_event,
    )
    from evopolicygym.records.experiments import experiment_stream_id

    made = [
        ExperimentCell(
            cell_id=f"{a}/{b}/seed={s}/agent_seed={g}", agent=a, benchmark=b, seed=s, agent_seed=g
        )
        for a, b, s, g, _ in cells
    ]
    created = ExperimentCreated(
        experiment_id="demo",
        spec_digest="0" * 64,
        profile="quick",
        config={},
        agents=[
            ExperimentAgent(name=a, provider="reference") for a in sorted({c[0] for c in cells})
        ],
        benchmarks=[
            ExperimentBenchmark(name=b, id="toy-counter") for b in sorted({c[1] for c in cells})
        ],
        cells=made,
    )
    events = [new_event(created, "demo/created")]
    for cell, (_, _, _, _, attempts) in zip(made, cells, strict=True):
        for attempt, (run_id, outcome) in enumerate(attempts, 1):
            events.append(
                new_event(
                    CellRunAssigned(cell_id=cell.cell_id, run_id=run_id, attempt=attempt),
                    f"demo/{run_id}/a",
                )
            )
            events.append(
                new_event(
                    CellRunEnded(
                        cell_id=cell.cell_id,
                        run_id=run_id,
                        attempt=attempt,
                        outcome=outcome,
                        retryable=outcome == "agent_failed",
                    ),
                    f"demo/{run_id}/e",
                )
            )
    store.events.append(experiment_stream_id("demo"), events, 0)
