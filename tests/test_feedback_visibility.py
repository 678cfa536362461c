"""Feedback visibility is a recorded Run condition (RunConfig.feedback).

What each Submission's Feedback shows the Agent (traces, per-Episode rows, the Benchmark's
content) is set per Run, recorded in RunCreated, applied by the Host when it builds
``feedback/``, and kept on resume; the log keeps every fact whatever the Agent was shown.
Real Runs of the reference Agent on CartPole, real stores; small synthetic logs where an
exact case (a cap, a step limit, oversized content) is the point.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity
from evopolicygym.cli.group import main
from evopolicygym.records.events import (
    AgentMessages,
    AgentStarted,
    EpisodeCompleted,
    Event,
    RunCreated,
    RunResumed,
    SubmissionPublished,
    new_event,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.records.traces import encode_trace
from evopolicygym.run.config import (
    AssessmentConfig,
    FeedbackConfig,
    RunConfig,
    RunConfigError,
    ValidationConfig,
)
from evopolicygym.run.create import create_run
from evopolicygym.run.decider import Submit, decide, fold
from evopolicygym.run.host import RunHost
from evopolicygym.run.ledger import Ledger, event_id, load_run
from evopolicygym.run.publisher import Publisher
from evopolicygym.run.workspace import TraceCache, build_feedback, feedback_dir_name
from tests.support.workspace_run import (
    BUDGET,
    RunLog,
    artifact,
    episode,
    new_store,  # noqa: F401 (the fixture store)
    program,
    recorded_run,  # noqa: F401 (the fixture run)
    run_created,
    started,
    stored_programs,  # noqa: F401 (the fixture programs)
    tree,
)

pytestmark = pytest.mark.timeout(300)

SMALL = RunConfig(
    episode_budget=12,
    validation=ValidationConfig(episodes_per_candidate=2, max_candidates=2),
    assessment=AssessmentConfig(episodes=2),
    agent_timeout=120.0,
)
DEFAULT_SHOWN = {"traces": "benchmark", "trace_steps": None, "episodes": True, "content": True}

# build_feedback of the workspace tests' recorded Run (at retention 0, 500 and 64 MiB bytes),
# hashed with the code as it was before Feedback visibility was a setting.
BEFORE = {
    0: "ff006f663597994028b9047355de9e527854577bc8801bbeb7d17f6de1afffbc",
    500: "ff006f663597994028b9047355de9e527854577bc8801bbeb7d17f6de1afffbc",
    64 * 1024 * 1024: "bb53204f7cdbe59f217c3e225bda878288d0e4f1d1b217c39e817307502bae2a",
}


def digest(files: dict[str, bytes]) -> str:
    return hashlib.sha256(
        json.dumps({k: v.hex() for k, v in sorted(files.items())}).encode()
    ).hexdigest()


def with_feedback(config: RunConfig, **shown: Any) -> RunConfig:
    return msgspec.structs.replace(config, feedback=FeedbackConfig(**shown))


def feedback_tree(workspace: Path) -> dict[str, bytes]:
    root = workspace / "feedback"
    return {k: v for k, v in tree(root).items() if v is not None}


def documents(files: dict[str, bytes]) -> dict[int, dict[str, Any]]:
    """Each Submission's feedback.json, by id."""
    return {
        int(path.split("/")[0].split("-")[1]): json.loads(data)
        for path, data in files.items()
        if path.endswith("/feedback.json")
    }


def of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


# --------------------------------------------------------------------------- real Runs


class Recorded(msgspec.Struct):
    run_id: str
    workspace: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Three real reference-agent Runs in one store: the default condition; no traces, no
    per-Episode rows and no content; two traces of 50 steps, its first Submission (3 Episodes)
    reserved by an attempt that died, so the Run is resumed."""
    root = tmp_path_factory.mktemp("visibility")
    with open_store(root / "store", create=True) as opened:
        made: dict[str, Recorded] = {}
        for name, config in (
            ("default", SMALL),
            ("bare", with_feedback(SMALL, traces=0, episodes=False, content=False)),
            ("two", with_feedback(SMALL, traces=2, trace_steps=50)),
        ):
            run_id = create_run(opened, "cartpole", config, agent_identity("reference"))
            if name == "two":
                interrupt_with_a_reserved_submission(opened, run_id, "0:3")
            workspace = root / f"ws-{name}"
            RunHost(opened, run_id, launcher=ProviderLauncher(), workspace=workspace).drive()
            made[name] = Recorded(run_id, workspace)
        yield opened, made


def interrupt_with_a_reserved_submission(records: Store, run_id: str, selector: str) -> None:
    """As if the Host died after an Agent attempt reserved a Submission of ``selector``."""
    state, events = load_run(records, run_id)
    created = events[0]
    assert isinstance(created, RunCreated)
    stream = run_stream_id(run_id)
    records.events.append(
        stream,
        [new_event(AgentStarted(attempt=1, command=["gone"], pid=None), event_id(run_id, 2))],
        1,
    )
    state, _ = load_run(records, run_id)
    decision = decide(
        state,
        Submit(request_id="r1", selector=selector, program_digest=created.initial_program_digest),
    )
    assert isinstance(decision, list)
    records.events.append(stream, [new_event(decision[0], event_id(run_id, 3))], 2)


@pytest.mark.slow
def test_the_condition_is_recorded_in_the_runs_config(runs: Any) -> None:
    records, made = runs
    recorded = {
        name: load_run(records, r.run_id)[1][0].config["feedback"] for name, r in made.items()
    }
    assert recorded == {
        "default": DEFAULT_SHOWN,
        "bare": {"traces": 0, "trace_steps": None, "episodes": False, "content": False},
        "two": {"traces": 2, "trace_steps": 50, "episodes": True, "content": True},
    }
    for r in made.values():
        state, _ = load_run(records, r.run_id)
        assert state.finished == "finished"


@pytest.mark.slow
def test_the_default_shows_the_benchmarks_trace_as_before(runs: Any) -> None:
    """The workspace the Agent read is what build_feedback gave before the setting existed
    (called as then, without a condition), and carries the Benchmark's trace.jsonl."""
    records, made = runs
    state, events = load_run(records, made["default"].run_id)
    shown = feedback_tree(made["default"].workspace)
    assert shown == build_feedback(events, records.blobs, state.cfg.bulk_feedback_retention_bytes)
    published = of(events, SubmissionPublished)
    assert published
    for event in published:
        assert f"{feedback_dir_name(event.submission_id)}/artifacts/trace.jsonl" in shown
    assert all("episodes" in d and "content" in d for d in documents(shown).values())


@pytest.mark.slow
def test_no_traces_rows_or_content_for_the_agent_yet_the_log_keeps_them(runs: Any) -> None:
    records, made = runs
    _, events = load_run(records, made["bare"].run_id)
    shown = feedback_tree(made["bare"].workspace)
    assert not [path for path in shown if "/artifacts/" in path]
    docs = documents(shown)
    assert docs and len(docs) == len(of(events, SubmissionPublished))
    for doc in docs.values():
        assert "episodes" not in doc and "content" not in doc and doc["artifacts"] == []
        assert isinstance(doc["score"], float) and isinstance(doc["budget_left"], int)
    # The log keeps every fact: each Episode with its trace, the content, the Benchmark's trace.
    completed = of(events, EpisodeCompleted)
    assert completed and all(e.trace_blob is not None for e in completed if e.status == "ok")
    for event in of(events, SubmissionPublished):
        assert "mean_return" in event.content and [a.name for a in event.artifacts] == [
            "trace.jsonl"
        ]
    # What the Agent was answered (and so what an export's transcript holds) is the same view.
    replies = []
    for chunk in of(events, AgentMessages):
        for message in chunk.messages:
            if message.role == "tool" and '"budget_left"' in message.content:
                try:
                    replies.append(json.loads(message.content))
                except ValueError:
                    continue
    assert replies
    assert all("episodes" not in r and "content" not in r and r["artifacts"] == [] for r in replies)


@pytest.mark.slow
def test_two_traces_per_submission_and_a_resume_keeps_the_condition(
    runs: Any, tmp_path: Path
) -> None:
    records, made = runs
    state, events = load_run(records, made["two"].run_id)
    assert of(events, RunResumed), "the Run was resumed"
    assert state.cfg.feedback == FeedbackConfig(traces=2, trace_steps=50)
    shown = feedback_tree(made["two"].workspace)
    docs = documents(shown)
    steps = {(e.submission_id, e.index): e.steps for e in of(events, EpisodeCompleted)}
    assert docs[1]["indices"] == [0, 1, 2]  # the Submission evaluated on resume: capped at 2
    for sid, doc in docs.items():
        directory = feedback_dir_name(sid)
        written = sorted(
            p.rsplit("/", 1)[1] for p in shown if p.startswith(f"{directory}/artifacts/")
        )
        first = doc["indices"][:2]
        assert len(written) == len(first) == min(2, len(doc["indices"]))
        assert written == sorted(f"episode-{i}.trace.jsonl" for i in first)
        for index in first:
            lines = (
                shown[f"{directory}/artifacts/episode-{index}.trace.jsonl"].decode().splitlines()
            )
            rows = [json.loads(line) for line in lines]
            assert len(rows) == min(50, steps[(sid, index)])
            assert [r["t"] for r in rows] == list(range(len(rows)))
            assert {r["episode"] for r in rows} == {index}
            assert all(
                r["action"] in (0, 1) and r["reward"] == 1.0 and len(r["observation"]) == 4
                for r in rows
            )
    # A Host that resumes it (the log folded afresh) lays out the same feedback.
    ledger = Ledger(records, made["two"].run_id)
    ledger.load()
    Publisher(ledger, tmp_path / "again").prepare()
    assert feedback_tree(tmp_path / "again") == shown


@pytest.mark.slow
def test_a_config_recorded_without_the_field_folds_and_shows_as_before(runs: Any) -> None:
    """A Run recorded before the setting existed: its config has no ``feedback``."""
    records, made = runs
    state, events = load_run(records, made["default"].run_id)
    created = events[0]
    assert isinstance(created, RunCreated)
    old_config = {k: v for k, v in created.config.items() if k != "feedback"}
    old_events = [msgspec.structs.replace(created, config=old_config), *events[1:]]
    old_state = fold(old_events)
    assert old_state.cfg == state.cfg and old_state.cfg.feedback == FeedbackConfig()
    assert old_state.budget_used == state.budget_used and old_state.finished == state.finished
    retention = old_state.cfg.bulk_feedback_retention_bytes
    assert build_feedback(
        old_events, records.blobs, retention, old_state.cfg.feedback
    ) == feedback_tree(made["default"].workspace)


# --------------------------------------------------------------------------- exact cases


def test_the_default_is_todays_feedback_byte_for_byte(run: RunLog, store: Store) -> None:
    events = run.read()
    config = RunConfig.from_dict({"episode_budget": BUDGET}).resolved()
    assert config.to_dict()["feedback"] == DEFAULT_SHOWN
    for retention, expected in BEFORE.items():
        assert digest(build_feedback(events, store.blobs, retention)) == expected
        assert digest(build_feedback(events, store.blobs, retention, config.feedback)) == expected


def traced_log(store: Store, steps: int) -> RunLog:
    """Submission 1 on three Episodes, each with a real trace of ``steps`` steps; its content
    too large for the event, kept whole as a permanent artifact beside a bulk one."""
    initial, first = (
        program("def make_policy(c):\n    return None\n"),
        program("def make_policy(c):\n    return 1\n"),
    )
    for p in (initial, first):
        store.blobs.put_program(p)

    class Step(msgspec.Struct):
        action: Any
        reward: float
        terminated: bool
        truncated: bool
        observation: Any

    def trace(index: int) -> str:
        return store.blobs.put(
            encode_trace(
                [index, 0.0],
                [Step(t % 2, 1.0, t == steps - 1, False, [index, t + 1.0]) for t in range(steps)],
            )
        )

    log = RunLog(store)
    blobs = store.blobs
    log.append(
        run_created(initial.digest),
        started(1, first, initial, [4, 1, 5], used=3),
        *(episode(1, i, float(steps), trace(i)) for i in (4, 1, 5)),
        SubmissionPublished(
            submission_id=1,
            program_digest=first.digest,
            score=float(steps),
            failures=0,
            content={
                "mean": 1.0,
                "content_truncated": {"bytes": 9, "left_out": ["big"], "artifact": "content.json"},
            },
            artifacts=[
                artifact(blobs, "content.json", b'{"big": 1}', "permanent"),
                artifact(blobs, "trace.jsonl", b"benchmark trace\n"),
            ],
            budget_used=3,
            budget_left=BUDGET - 3,
        ),
    )
    return log


def test_traces_are_the_first_n_episodes_in_selection_order(store: Store) -> None:
    events = traced_log(store, steps=7).read()
    cases: dict[int | str, list[str]] = {
        0: [],
        1: ["episode-4.trace.jsonl"],
        2: ["episode-4.trace.jsonl", "episode-1.trace.jsonl"],
        "all": ["episode-4.trace.jsonl", "episode-1.trace.jsonl", "episode-5.trace.jsonl"],
        10: ["episode-4.trace.jsonl", "episode-1.trace.jsonl", "episode-5.trace.jsonl"],
    }
    for traces, names in cases.items():
        files = build_feedback(events, store.blobs, 1 << 20, FeedbackConfig(traces=traces))
        doc = json.loads(files["submission-0001/feedback.json"])
        # The Benchmark's bulk trace gives way; its permanent content stays.
        assert [a["name"] for a in doc["artifacts"]] == ["content.json", *names]
        assert sorted(p.rsplit("/", 1)[1] for p in files if "/artifacts/" in p) == sorted(
            ["content.json", *names]
        )
    files = build_feedback(events, store.blobs, 1 << 20, FeedbackConfig(traces=1, trace_steps=3))
    rows = [
        json.loads(line)
        for line in files["submission-0001/artifacts/episode-4.trace.jsonl"].splitlines()
    ]
    assert rows == [
        {
            "episode": 4,
            "t": t,
            "action": t % 2,
            "reward": 1.0,
            "terminated": False,
            "truncated": False,
            "observation": [4, t + 1.0],
        }
        for t in range(3)
    ]
    doc = json.loads(files["submission-0001/feedback.json"])
    size = len(files["submission-0001/artifacts/episode-4.trace.jsonl"])
    assert doc["artifacts"][1] == {
        "name": "episode-4.trace.jsonl",
        "media_type": "application/jsonl",
        "retention": "bulk",
        "size": size,
        "path": "submission-0001/artifacts/episode-4.trace.jsonl",
        "pruned": False,
    }


def test_a_trace_whose_blob_is_gone_is_listed_pruned(store: Store) -> None:
    log = traced_log(store, steps=4)
    gone = "sha256:" + "0" * 64
    events = [
        msgspec.structs.replace(e, trace_blob=gone)
        if isinstance(e, EpisodeCompleted) and e.index == 1
        else e
        for e in log.read()
    ]
    files = build_feedback(events, store.blobs, 1 << 20, FeedbackConfig(traces="all"))
    listed = json.loads(files["submission-0001/feedback.json"])["artifacts"]
    assert [(a["name"], a["pruned"], a["path"] is None) for a in listed] == [
        ("content.json", False, False),
        ("episode-4.trace.jsonl", False, False),
        ("episode-1.trace.jsonl", True, True),
        ("episode-5.trace.jsonl", False, False),
    ]
    assert (
        listed[2]["size"] is None and "submission-0001/artifacts/episode-1.trace.jsonl" not in files
    )


def test_withheld_content_takes_its_whole_copy_along(store: Store) -> None:
    events = traced_log(store, steps=2).read()
    files = build_feedback(
        events, store.blobs, 1 << 20, FeedbackConfig(content=False, episodes=False)
    )
    doc = json.loads(files["submission-0001/feedback.json"])
    assert "content" not in doc and "episodes" not in doc
    assert [a["name"] for a in doc["artifacts"]] == ["trace.jsonl"]
    assert doc["score"] == 2.0 and doc["failures"] == 0 and doc["budget_left"] == BUDGET - 3
    assert files["latest.json"] == files["submission-0001/feedback.json"]


def test_host_traces_are_bulk_under_retention(store: Store) -> None:
    """An older Submission's traces are pruned once the kept bytes pass the retention."""
    log = traced_log(store, steps=5)
    first = log.events[1]
    log.append(
        msgspec.structs.replace(first, submission_id=2, budget_used=6),  # type: ignore[arg-type]
        *(msgspec.structs.replace(e, submission_id=2) for e in log.events[2:5]),  # type: ignore[arg-type]
        msgspec.structs.replace(
            log.events[5], submission_id=2, budget_used=6, budget_left=BUDGET - 6
        ),  # type: ignore[arg-type]
    )
    shown = FeedbackConfig(traces="all")
    whole = build_feedback(log.read(), store.blobs, 1 << 20, shown)
    one = len(whole["submission-0002/artifacts/episode-4.trace.jsonl"])
    files = build_feedback(log.read(), store.blobs, 4 * one, shown)  # the newest's 3, one older
    older = json.loads(files["submission-0001/feedback.json"])["artifacts"]
    assert [(a["name"], a["pruned"]) for a in older] == [
        ("content.json", False),
        ("episode-4.trace.jsonl", False),
        ("episode-1.trace.jsonl", True),
        ("episode-5.trace.jsonl", True),
    ]
    newest = json.loads(files["submission-0002/feedback.json"])["artifacts"]
    assert not any(a["pruned"] for a in newest)
    # A Run's cache of rendered traces between publications changes no byte.
    cache = TraceCache()
    for retention in (4 * one, 1 << 20, 0, 4 * one):
        alone = build_feedback(log.read(), store.blobs, retention, shown)
        assert build_feedback(log.read(), store.blobs, retention, shown, cache) == alone


@pytest.mark.parametrize(
    ("shown", "record", "says"),
    [
        ({"traces": -1}, "train", "feedback traces must be between 0"),
        ({"traces": 2, "trace_steps": 0}, "train", "feedback trace_steps must be between 1"),
        ({"trace_steps": 10}, "train", "feedback trace_steps needs feedback traces"),
        ({"traces": "all"}, "none", "feedback traces need record_trajectories"),
    ],
)
def test_conditions_that_cannot_work_are_refused(
    shown: dict[str, Any], record: str, says: str
) -> None:
    config = RunConfig.from_dict({"feedback": shown, "record_trajectories": record})
    with pytest.raises(RunConfigError, match=says):
        config.resolved()


def test_a_toml_table_sets_it_and_unknown_keys_are_refused() -> None:
    import tomllib

    table = tomllib.loads(
        "episode_budget = 8\n[feedback]\ntraces = 2\ntrace_steps = 100\nepisodes = false\n"
    )
    config = RunConfig.from_dict(table).resolved()
    assert config.feedback == FeedbackConfig(traces=2, trace_steps=100, episodes=False)
    assert (
        RunConfig.from_dict(tomllib.loads('[feedback]\ntraces = "all"\n')).feedback.traces == "all"
    )
    for bad in (
        '[feedback]\ntraces = "some"\n',
        "[feedback]\nshow = 1\n",
        "[feedback]\ntraces = true\n",
    ):
        with pytest.raises(RunConfigError, match="feedback"):
            RunConfig.from_dict(tomllib.loads(bad))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--feedback-traces", "some"], "--feedback-traces"),
        (["--feedback-traces", "-2"], "--feedback-traces"),
        (["--feedback-trace-steps", "0"], "--feedback-trace-steps"),
        (["--feedback-trace-steps", "5"], "--feedback-trace-steps needs --feedback-traces"),
        (
            ["--feedback-traces", "3", "--record-trajectories", "none"],
            "--feedback-traces need --record-trajectories",
        ),
    ],
)
def test_bad_feedback_options_are_one_line_errors(
    tmp_path: Path, args: list[str], says: str
) -> None:
    result = CliRunner().invoke(
        main, ["run", "--benchmark", "cartpole", "--store", str(tmp_path / "store"), *args]
    )
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert any(says in line for line in lines), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "store").exists()  # refused before anything was recorded


def test_task_md_tells_the_agent_what_its_feedback_holds() -> None:
    """TASK.md's feedback/ line names only what the condition shows; under the default it
    reads as it always did."""
    import msgspec

    from evopolicygym.run.config import FeedbackConfig, RunConfig
    from evopolicygym.transcript import task_files

    spec = {"id": "cartpole", "score_direction": "maximize"}

    def task_md(feedback: FeedbackConfig | None) -> str:
        config = (
            RunConfig(episode_budget=8)
            if feedback is None
            else RunConfig(episode_budget=8, feedback=feedback)
        )
        return task_files(spec, msgspec.to_builtins(config.resolved()))[0]

    default = task_md(None)
    assert "public content, per-Episode summaries, artifacts" in default
    assert task_md(FeedbackConfig()) == default
    bare = task_md(FeedbackConfig(traces=0, episodes=False, content=False))
    assert (
        "per-Episode summaries" not in bare
        and "public content" not in bare
        and "artifacts" not in bare
    )
    traced = task_md(FeedbackConfig(traces=2, trace_steps=100))
    assert "step traces of the first 2 Episode(s), first 100 steps" in traced
    assert "episode-<index>.trace.jsonl" in traced
