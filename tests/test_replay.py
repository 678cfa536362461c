"""``evopolicy record replay`` and ``evopolicygym.run.replay`` on real stores: Runs recorded
through the decider, broken ones appended raw, and a real cartpole Run re-evaluated."""

from __future__ import annotations

import hashlib
import inspect
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner, Result

from evopolicygym.benchmark import Benchmark
from evopolicygym.cli import main
from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator
from evopolicygym.program import Program
from evopolicygym.records.events import (
    EpisodeCompleted,
    EpisodeOutcome,
    Event,
    PoolEntry,
    SubmissionPublished,
    new_event,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.timeline import (
    CandidateEntry,
    FinishedEntry,
    ReferenceEntry,
    RejectionEntry,
    SubmissionEntry,
)
from evopolicygym.registry import baseline_dir, load_benchmark
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.decider import (
    AgentExit,
    Command,
    CompleteAssessment,
    CompleteEvaluation,
    Conclude,
    Create,
    FailEvaluation,
    Finish,
    Interrupt,
    RecordCandidate,
    RecordReference,
    Rejection,
    RunState,
    StartAgent,
    StartAssessment,
    StartValidation,
    Submit,
    decide,
    fold,
)
from evopolicygym.run.pool import derive_run_seeds, plan_pool, planned, planned_split
from evopolicygym.run.reevaluation import reevaluate
from evopolicygym.run.replay import Replay, replay_run
from evopolicygym.transcript import AgentIdentity

# Host-private values, distinctive enough that finding one in output can only be a leak.
RUN_SEED = 7_300_003_991
POOL_SEED = 8_675_309_120
POLICY_SEED = 5_550_001_230
SCENARIO_SECRET = "scenario-secret-7300004"
DERIVED = {"pool": 7_770_000_001, "validation": 7_771_234_567, "assessment": 7_772_345_678}
PRIVATE = [
    str(RUN_SEED),
    *(str(POOL_SEED + i) for i in range(8)),
    *(str(POLICY_SEED + i) for i in range(8)),
    *(str(v) for v in DERIVED.values()),
    SCENARIO_SECRET,
]

POLICY_V1 = "def make_policy(context):\n    return lambda observation: 0\n"
POLICY_V2 = "def make_policy(context):\n    return lambda observation: int(observation[3] > 0)\n"


def invoke(*args: str) -> Result:
    # click < 8.2 mixes stderr into stdout unless told not to; 8.2+ always keeps them apart.
    options: dict[str, Any] = {}
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        options["mix_stderr"] = False
    result = CliRunner(**options).invoke(main, list(args), prog_name="evopolicy")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


def replay_cli(root: Path, run: str, *args: str) -> Result:
    return invoke("record", "--store", str(root), "replay", run, *args)


def error_line(result: Result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def assert_no_private(text: str, private: list[str] = PRIVATE) -> None:
    for value in private:
        assert value not in text, f"Host-private value {value} leaked"


# --------------------------------------------------------------------------- recording


class Recorder:
    """Records one Run: commands go through the decider (so the events are valid);
    ``raw`` appends events as they are, to build broken streams."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.stream = f"run-{run_id}"
        self.state = RunState()
        self.version = 0

    def do(self, command: Command) -> list[Event]:
        decision = decide(self.state, command)
        if isinstance(decision, Rejection):
            assert decision.event is not None, decision  # a Host command must not be refused
            events = [decision.event]
        else:
            events = decision
        self.raw(*events)
        self.state = fold(events, self.state)
        return events

    def raw(self, *events: Event) -> None:
        batch = [
            new_event(e, f"{self.stream}/{self.version + i + 1}") for i, e in enumerate(events)
        ]
        self.store.events.append(self.stream, batch, self.version)
        self.version += len(events)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def store(root: Path) -> Iterator[Store]:
    with open_store(root, create=True) as opened:
        yield opened


def config() -> RunConfig:
    return RunConfig(
        episode_budget=6,
        seed=RUN_SEED,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=2),
        assessment=AssessmentConfig(episodes=2),
    ).resolved()


def pool(size: int) -> list[PoolEntry]:
    return [
        PoolEntry(
            index=i,
            split="train",
            seed=POOL_SEED + i,
            policy_seed=POLICY_SEED + i,
            scenario={"secret": SCENARIO_SECRET},
        )
        for i in range(size)
    ]


def create(recorder: Recorder, direction: str = "maximize") -> None:
    initial = recorder.store.blobs.put_program(Program.from_files({"policy.py": POLICY_V1}))
    cfg = config()
    recorder.do(
        Create(
            run_id=recorder.run_id,
            config=cfg,
            benchmark_id="cartpole",
            benchmark_spec={"id": "cartpole", "score_direction": direction},
            environment_digest="sha256:" + "e" * 64,
            initial_program_digest=initial,
            agent=AgentIdentity(name="reference", provider="reference"),
            pool=pool(cfg.pool_size),
            seeds=dict(DERIVED),
        )
    )


def program(source: str, store: Store) -> str:
    return store.blobs.put_program(Program.from_files({"policy.py": source}))


def submit(recorder: Recorder, selector: str, source: str, score: float, failures: int = 0) -> int:
    """A Submission evaluated to ``score`` (rewards spread over its Episodes)."""
    digest = program(source, recorder.store)
    started = recorder.do(
        Submit(request_id=f"r{recorder.version}", selector=selector, program_digest=digest)
    )
    assert not isinstance(started[0], SubmissionPublished)
    submission = recorder.state.submissions[-1]
    episodes = [
        EpisodeCompleted(
            submission_id=0,
            index=index,
            status="ok" if n >= failures else "error",
            total_reward=score,
            steps=10,
        )
        for n, index in enumerate(submission.indices)
    ]
    recorder.do(
        CompleteEvaluation(
            submission_id=submission.id, episodes=episodes, score=score, failures=failures
        )
    )
    return submission.id


def outcomes(score: float) -> list[EpisodeOutcome]:
    return [EpisodeOutcome(index=i, status="ok", total_reward=score, steps=10) for i in range(2)]


def finished_run(store: Store, run_id: str, direction: str = "maximize") -> Recorder:
    """Three Submissions (10, 5, 12.5 on train), a rejected submit, finish with [3, 1],
    Validation (1 wins), Assessment, RunFinished."""
    recorder = Recorder(store, run_id)
    create(recorder, direction)
    recorder.do(StartAgent(command=["agent"], pid=4242))
    submit(recorder, "0:2", POLICY_V1, 10.0)
    submit(recorder, "2", POLICY_V2, 5.0, failures=1)
    recorder.do(
        Submit(
            request_id="too-many", selector="0:5", program_digest=program(POLICY_V1 + "#\n", store)
        )
    )
    recorder.do(Submit(request_id="bad", selector="1", problem="evil\x1b[2Jscreen"))
    submit(recorder, "3:5", POLICY_V2 + "# v3\n", 12.5)
    recorder.do(Finish(request_id="fin", candidates=[3, 1]))
    recorder.do(AgentExit(exit_code=0))
    recorder.do(StartValidation())
    recorder.do(
        RecordReference(score=7.0, failures=0, episodes=outcomes(3.5))
    )  # the initial program
    recorder.do(RecordCandidate(submission_id=3, score=11.0, failures=0, episodes=outcomes(5.5)))
    recorder.do(RecordCandidate(submission_id=1, score=9.0, failures=0, episodes=outcomes(4.5)))
    recorder.do(StartAssessment())
    recorder.do(CompleteAssessment(score=8.25, failures=0, episodes=outcomes(4.125)))
    recorder.do(Conclude())
    assert recorder.state.finished == "finished"
    return recorder


def submissions(replay: Replay) -> list[SubmissionEntry]:
    return [e for e in replay.timeline if isinstance(e, SubmissionEntry)]


# --------------------------------------------------------------------------- the timeline


def test_timeline_of_a_finished_run(store: Store, root: Path) -> None:
    finished_run(store, "alpha")
    replay = replay_run(store, "alpha")
    assert replay.ok, replay.problems
    assert replay.status == "finished" and replay.terminal_reason == "finished"
    subs = submissions(replay)
    assert [(s.submission_id, s.selector, s.episodes) for s in subs] == [
        (1, "0:2", 2),
        (2, "2", 1),
        (3, "3:5", 2),
    ]
    assert [s.score for s in subs] == [10.0, 5.0, 12.5]
    assert [s.failures for s in subs] == [0, 1, 0]
    assert [s.best_so_far for s in subs] == [True, False, True]
    assert [s.status for s in subs] == ["published"] * 3
    assert subs[0].parent_program_digest == store.blobs.put_program(
        Program.from_files({"policy.py": POLICY_V1})
    )
    assert subs[1].parent_program_digest == subs[0].program_digest  # each edit starts from the last
    rejections = [e for e in replay.timeline if isinstance(e, RejectionEntry)]
    assert [(r.request, r.code) for r in rejections] == [
        ("submit", "budget_allocation"),
        ("submit", "program_invalid"),
    ]
    assert [
        (c.submission_id, c.score) for c in replay.timeline if isinstance(c, CandidateEntry)
    ] == [
        (3, 11.0),
        (1, 9.0),
    ]
    finished = replay.timeline[-1]
    assert isinstance(finished, FinishedEntry) and finished.final_submission_id == 3
    assert (finished.handoff, finished.improved) == ("agent", True)  # 11.0 on Validation beats 7.0
    (reference,) = [e for e in replay.timeline if isinstance(e, ReferenceEntry)]
    assert (reference.score, reference.episodes) == (7.0, 2)
    assert (replay.episode_budget, replay.budget_used, replay.budget_left) == (6, 5, 1)
    assert (replay.submissions, replay.published, replay.rejections) == (3, 3, 2)
    assert replay.final_submission_id == 3 and replay.assessment_score == 8.25
    assert replay.best_submission_id == 3

    result = replay_cli(root, "alpha")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("ok: run alpha: ")
    assert "finished (finished)" in lines[-1] and "budget 5/6 used" in lines[-1]
    assert any("#1 Episodes 0:2 (2) score 10 failures 0 best-so-far" in line for line in lines)
    assert any("#2 Episodes 2 (1) score 5 failures 1 (" in line for line in lines)
    assert any("budget_allocation" in line for line in lines)
    assert "\x1b" not in result.stdout  # the Agent's text reaches the terminal escaped
    assert "evil\\x1b[2Jscreen" in result.stdout
    assert_no_private(result.stdout + result.stderr)


def test_best_so_far_follows_a_minimizing_benchmark(store: Store) -> None:
    finished_run(store, "low", direction="minimize")
    replay = replay_run(store, "low")
    assert replay.ok, replay.problems
    assert [s.best_so_far for s in submissions(replay)] == [True, True, False]
    assert replay.best_submission_id == 2
    # Validation ranked in the same direction: 1 scored 9.0 against 3's 11.0.
    assert replay.final_submission_id == 1


def test_json_is_complete_and_holds_no_private_value(store: Store, root: Path) -> None:
    finished_run(store, "alpha")
    result = replay_cli(root, "run-alpha", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["problems"] == []
    assert data["status"] == "finished" and data["terminal_reason"] == "finished"
    kinds = [entry["kind"] for entry in data["timeline"]]
    assert kinds[0] == "created" and kinds[-1] == "finished"
    assert kinds.count("submission") == 3 and kinds.count("rejection") == 2
    assert {"validation", "candidate", "selection", "assessment", "agent", "finish"} <= set(kinds)
    scores = [e["score"] for e in data["timeline"] if e["kind"] == "submission"]
    assert scores == [10.0, 5.0, 12.5]
    assert "mismatches" not in data
    assert_no_private(result.stdout + result.stderr)
    # Typed read-back: the JSON is the Replay (plus ``ok``; its ``status`` is the Run's
    # status as every command's --json says it, the terminal reason once it has ended).
    typed = msgspec.convert({k: v for k, v in data.items() if k not in ("ok", "status")}, Replay)
    assert typed.timeline == replay_run(store, "alpha").timeline


def test_a_run_in_progress_and_an_interrupted_one(store: Store, root: Path) -> None:
    recorder = Recorder(store, "live")
    create(recorder)
    recorder.do(StartAgent())
    submit(recorder, "0:2", POLICY_V1, 3.0)
    result = replay_cli(root, "live")
    assert result.exit_code == 0, result.output
    assert "in progress" in result.stdout.splitlines()[-1]
    assert replay_run(store, "live").terminal_reason is None

    recorder.do(Interrupt(reason="the Host was stopped", last_position=store.events.head()))
    result = replay_cli(root, "live", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "interrupted"
    assert data["timeline"][-1] == {
        "kind": "host",
        "version": recorder.version,
        "event": "interrupted",
        "reason": "the Host was stopped",
        "attempt": None,
    }


def test_failed_evaluation_is_the_terminal_reason_and_its_error_is_scrubbed(
    store: Store, root: Path
) -> None:
    recorder = Recorder(store, "broke")
    create(recorder)
    recorder.do(StartAgent())
    digest = program(POLICY_V1, store)
    recorder.do(Submit(request_id="s", selector="0:2", program_digest=digest))
    # A trusted fault's message may quote a pool seed: replay must not pass it on.
    recorder.do(FailEvaluation(submission_id=1, error=f"reset(seed={POOL_SEED}) failed"))
    recorder.do(AgentExit(exit_code=0))
    recorder.do(Conclude())
    replay = replay_run(store, "broke")
    assert replay.ok, replay.problems
    assert replay.terminal_reason == "evaluation_failed"
    (sub,) = submissions(replay)
    assert sub.status == "failed" and sub.error == "reset(seed=<private>) failed"
    result = replay_cli(root, "broke")
    assert result.exit_code == 0, result.output
    assert "FAILED: reset(seed=<private>) failed" in result.stdout
    assert "finished (evaluation_failed)" in result.stdout
    assert_no_private(result.stdout + result.stderr)


# --------------------------------------------------------------------------- problems


def test_an_impossible_event_fails_naming_its_version(store: Store, root: Path) -> None:
    recorder = Recorder(store, "bad")
    create(recorder)
    recorder.do(StartAgent())
    submit(recorder, "0:2", POLICY_V1, 1.0)
    bad_version = recorder.version + 1
    recorder.raw(
        SubmissionPublished(
            submission_id=9,
            program_digest=program(POLICY_V2, store),
            score=99.0,
            failures=0,
            budget_used=2,
            budget_left=4,
        )
    )
    replay = replay_run(store, "bad")
    assert not replay.ok
    (problem,) = replay.problems
    assert (problem.version, problem.event_type, problem.kind) == (
        bad_version,
        "SubmissionPublished",
        "transition",
    )
    result = replay_cli(root, "bad")
    line = error_line(result)
    assert f"v{bad_version} SubmissionPublished" in line
    assert f"problem: v{bad_version} SubmissionPublished" in result.stdout
    # The timeline is still shown, up to and past the bad event.
    assert "#1 Episodes 0:2 (2) score 1" in result.stdout

    result = replay_cli(root, "bad", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["problems"][0]["version"] == bad_version


def test_a_missing_blob_or_program_is_a_problem(store: Store, root: Path) -> None:
    recorder = Recorder(store, "lost")
    create(recorder)
    recorder.do(StartAgent())
    never_stored = Program.from_files({"policy.py": "# never stored\n" + POLICY_V1})
    recorder.do(Submit(request_id="s", selector="0", program_digest=never_stored.digest))
    absent = "sha256:" + hashlib.sha256(b"an output never stored").hexdigest()
    recorder.do(FailEvaluation(submission_id=1, error="no program"))
    recorder.do(AgentExit(exit_code=1, stdout_blob=absent))
    replay = replay_run(store, "lost")
    found = {(p.kind, p.blob, p.event_type) for p in replay.problems}
    assert found == {
        ("blob_missing", never_stored.digest, "EvaluationStarted"),
        ("blob_missing", absent, "AgentExited"),
    }
    line = error_line(replay_cli(root, "lost"))
    assert "2 problems" in line and "EvaluationStarted" in line


def test_a_tampered_payload_breaks_the_chain_check(store: Store, root: Path) -> None:
    recorder = finished_run(store, "alpha")
    position = 6  # Submission 1's SubmissionPublished (the store holds only this Run)
    connection = sqlite3.connect(root / "events.db")
    try:
        connection.execute("DROP TRIGGER events_no_update")
        (payload,) = connection.execute(
            "SELECT payload FROM events WHERE position = ?", (position,)
        ).fetchone()
        edited = bytes(payload).replace(b'"score":10.0', b'"score":99.0')
        assert edited != bytes(payload)
        connection.execute("UPDATE events SET payload = ? WHERE position = ?", (edited, position))
        connection.commit()
    finally:
        connection.close()
    with open_store(root) as reopened:
        replay = replay_run(reopened, "alpha")
    assert [(p.version, p.kind) for p in replay.problems] == [(position, "payload_hash")]
    assert submissions(replay)[0].score == 99.0  # what the log now says, flagged above
    assert recorder.version == replay.events
    error_line(replay_cli(root, "alpha"))


def test_an_unknown_run_is_a_one_line_error(store: Store, root: Path) -> None:
    finished_run(store, "alpha")
    assert "no run 'nope'" in error_line(replay_cli(root, "nope"))


def test_store_given_after_the_command(store: Store, root: Path, tmp_path: Path) -> None:
    finished_run(store, "alpha")
    elsewhere = tmp_path / "no-store-here"
    result = invoke("record", "--store", str(elsewhere), "replay", "alpha", "--store", str(root))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].startswith("ok: run alpha: ")


# --------------------------------------------------------------------------- re-evaluation


@pytest.fixture(scope="module")
def cartpole() -> Benchmark:
    return load_benchmark("cartpole")


@pytest.fixture(scope="module")
def evaluator() -> Iterator[Evaluator]:
    with Evaluator() as ev:
        yield ev


def baseline(benchmark: Benchmark) -> Program:
    directory = baseline_dir(benchmark)
    assert directory is not None
    return Program.from_directory(directory)


def evaluated(
    evaluator: Evaluator, benchmark: Benchmark, episodes: Any, split: str
) -> EvaluationResult:
    return evaluator.evaluate(
        baseline(benchmark),
        benchmark,
        EvaluationConfig(split=split, episodes=len(episodes), jobs=1, episode_timeout=30.0),
        episodes=episodes,
    )


def real_run(
    store: Store, run_id: str, benchmark: Benchmark, evaluator: Evaluator, *, tamper: float = 0.0
) -> tuple[list[str], dict[str, int]]:
    """A cartpole Run whose scores come from the real Evaluator; ``tamper`` is added to the
    recorded Submission score. Returns the Host-private values it holds."""
    seeds = derive_run_seeds(0)
    the_pool = plan_pool(benchmark, RunConfig(episode_budget=4).resolved(), seeds)
    cfg = RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
        assessment=AssessmentConfig(episodes=2),
    ).resolved()
    digest = store.blobs.put_program(baseline(benchmark))
    recorder = Recorder(store, run_id)
    recorder.do(
        Create(
            run_id=run_id,
            config=cfg,
            benchmark_id="cartpole",
            benchmark_spec=msgspec.to_builtins(benchmark.spec),
            environment_digest=benchmark.spec.environment_digest,
            initial_program_digest=digest,
            agent=AgentIdentity(name="reference", provider="reference"),
            pool=the_pool,
            seeds=seeds,
        )
    )
    recorder.do(StartAgent())
    recorder.do(Submit(request_id="s1", selector="0:2", program_digest=digest))
    result = evaluated(evaluator, benchmark, planned(the_pool, [0, 1]), "train")
    recorder.do(
        CompleteEvaluation(
            submission_id=1,
            episodes=[
                EpisodeCompleted(
                    submission_id=0,
                    index=e.index,
                    status=e.status,
                    total_reward=e.total_reward,
                    steps=e.steps,
                    failure=e.failure,
                )
                for e in result.episodes
            ],
            score=float(result.feedback.score) + tamper,
            failures=result.failures,
        )
    )
    private = [str(v) for v in seeds.values()]
    private += [str(v) for e in the_pool for v in (e.seed, e.policy_seed)]
    if tamper:
        return private, seeds  # left in progress: replay re-evaluates what is recorded
    recorder.do(Finish(request_id="f", candidates=[1]))
    recorder.do(AgentExit(exit_code=0))
    for split, seed, command in (
        ("validation", seeds["validation"], StartValidation()),
        ("assessment", seeds["assessment"], StartAssessment()),
    ):
        recorder.do(command)
        held_out = evaluated(evaluator, benchmark, planned_split(benchmark, split, seed, 2), split)
        episodes = [
            EpisodeOutcome(
                index=e.index, status=e.status, total_reward=e.total_reward, steps=e.steps
            )
            for e in held_out.episodes
        ]
        score = float(held_out.feedback.score)
        if split == "validation":
            # The initial program first (rules 2): here it is the Submission's program too.
            recorder.do(RecordReference(score=score, failures=held_out.failures, episodes=episodes))
            recorder.do(
                RecordCandidate(
                    submission_id=1, score=score, failures=held_out.failures, episodes=episodes
                )
            )
        else:
            recorder.do(
                CompleteAssessment(score=score, failures=held_out.failures, episodes=episodes)
            )
    recorder.do(Conclude())
    assert recorder.state.finished == "finished"
    return private, seeds


@pytest.mark.timeout(240)  # a hang guard, not a speed claim
def test_reevaluate_reproduces_a_real_run_and_catches_a_tampered_score(
    store: Store, root: Path, cartpole: Benchmark, evaluator: Evaluator
) -> None:
    private, _ = real_run(store, "real", cartpole, evaluator)
    assert replay_run(store, "real").ok
    progress: list[tuple[int, int]] = []
    assert reevaluate(store, "real", jobs=1, progress=lambda d, t: progress.append((d, t))) == []
    # 2 train + 2 reference + 2 validation + 2 assessment Episodes
    assert progress[0] == (0, 8) and progress[-1] == (8, 8)

    result = replay_cli(root, "real", "--reevaluate", "--jobs", "1")
    assert result.exit_code == 0, result.output + result.stderr
    assert result.stdout.splitlines()[-1].endswith("every score reproduces")
    assert_no_private(result.stdout + result.stderr, private)

    recorded = submissions(replay_run(store, "real"))[0].score
    assert recorded is not None
    tampered_private, _ = real_run(store, "forged", cartpole, evaluator, tamper=0.5)
    mismatches = reevaluate(store, "forged", jobs=1)
    assert [(m.phase, m.submission_id, m.field) for m in mismatches] == [("submission", 1, "score")]
    assert mismatches[0].recorded == recorded + 0.5 and mismatches[0].replayed == recorded

    result = replay_cli(root, "forged", "--reevaluate", "--jobs", "1")
    line = error_line(result)
    assert "1 re-evaluation mismatch" in line and "submission 1: score" in line
    assert "mismatch: submission 1: score recorded" in result.stdout
    assert_no_private(result.stdout + result.stderr, tampered_private)

    result = replay_cli(root, "forged", "--reevaluate", "--jobs", "1", "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["problems"] == []
    assert [m["field"] for m in data["mismatches"]] == ["score"]
    assert_no_private(result.stdout, tampered_private)


def test_reevaluate_reports_a_changed_episode(
    store: Store, cartpole: Benchmark, evaluator: Evaluator
) -> None:
    """A forged per-Episode reward is caught even where the score was left alone."""
    seeds = derive_run_seeds(0)
    the_pool = plan_pool(cartpole, RunConfig(episode_budget=4).resolved(), seeds)
    result = evaluated(evaluator, cartpole, planned(the_pool, [2]), "train")
    initial = store.blobs.put_program(baseline(cartpole))
    recorder = Recorder(store, "episode")
    recorder.do(
        Create(
            run_id="episode",
            config=RunConfig(episode_budget=4).resolved(),
            benchmark_id="cartpole",
            benchmark_spec=msgspec.to_builtins(cartpole.spec),
            environment_digest=cartpole.spec.environment_digest,
            initial_program_digest=initial,
            agent=AgentIdentity(name="reference", provider="reference"),
            pool=the_pool,
            seeds=seeds,
        )
    )
    recorder.do(StartAgent())
    recorder.do(Submit(request_id="s", selector="2", program_digest=initial))
    (summary,) = result.episodes
    recorder.do(
        CompleteEvaluation(
            submission_id=1,
            episodes=[
                EpisodeCompleted(
                    submission_id=0,
                    index=2,
                    status="timeout",
                    total_reward=summary.total_reward - 1.0,
                    steps=summary.steps,
                )
            ],
            score=float(result.feedback.score),
            failures=result.failures,
        )
    )
    mismatches = reevaluate(store, "episode", jobs=1)
    assert {(m.episode, m.field) for m in mismatches} == {(2, "status"), (2, "total_reward")}
    by_field = {m.field: m for m in mismatches}
    assert by_field["status"].recorded == "timeout" and by_field["status"].replayed == "ok"
    assert by_field["total_reward"].replayed == summary.total_reward
