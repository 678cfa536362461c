"""Failures never win, end to end, on a real Gymnasium task with negative rewards.

On MountainCar-v0 every step costs -1, so a program that crashes at once used to score
its partial return, 0, and beat every working program (-110 or so). Now a failed
Episode scores the failure score (-200: the step limit times the worst reward), and
nothing downstream may rank the crashing program above the working one: not Feedback,
not the Agent's handoff through Validation, not Host nomination, not the read models,
not any export.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pytest

from evopolicygym.agents.providers import agent_identity
from evopolicygym.program import Program
from evopolicygym.records.events import (
    CandidateValidated,
    FinalSubmissionSelected,
    RunFinished,
    SubmissionPublished,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.read_models import open_read_models, refresh
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.create import create_run
from evopolicygym_exporters import ExportOptions, RunFilter, export
from tests.support.hostruns import agent_script, drive, of

pytestmark = pytest.mark.timeout(300)

BENCHMARK = "gymnasium:MountainCar-v0"
WORKING = (
    "def make_policy(context):\n"
    "    # push the way the car moves: it rocks up the hill in about 110 steps\n"
    "    return type('P', (), {'act': lambda self, obs: 2 if obs[1] >= 0 else 0})()\n"
)
CRASHING = "def make_policy(context):\n    raise RuntimeError('boom')\n"
# The initial program: always push right, which never climbs the hill (-200, but completed).
INITIAL = "def make_policy(context):\n    return type('P', (), {'act': lambda self, obs: 2})()\n"

# The Agent: writes both programs, submits each on the same 2 Episodes (matched), and either
# finishes naming the crashing one first or leaves without finishing.
AGENT = """
ws = os.environ["EVOPOLICY_WORKSPACE"]
for name, source in (("crash", {crash!r}), ("work", {work!r})):
    os.makedirs(os.path.join(ws, "analysis", name))
    open(os.path.join(ws, "analysis", name, "policy.py"), "w").write(source)
crash = cli("submit", os.path.join(ws, "analysis", "crash"), "--episodes", "0:2")
work = cli("submit", os.path.join(ws, "analysis", "work"), "--episodes", "0:2")
assert crash[0] == 0 and work[0] == 0, (crash, work)
if {finish}:
    assert cli("finish", "1", "2")[0] == 0   # the crashing program first
"""


def config(**kwargs: Any) -> RunConfig:
    return RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=2),
        assessment=AssessmentConfig(episodes=2),
        agent_timeout=120.0,
        **kwargs,
    )


def run(store: Store, tmp_path: Path, *, finish: bool, **kwargs: Any) -> tuple[Any, list[Any]]:
    command = agent_script(tmp_path, AGENT.format(crash=CRASHING, work=WORKING, finish=finish))
    run_id = create_run(
        store,
        BENCHMARK,
        config(**kwargs),
        agent_identity("command", command=command),
        program=Program.from_files({"policy.py": INITIAL}),
    )
    return drive(store, run_id)


def test_a_crashing_program_scores_the_failure_score_and_never_wins(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        _, events = run(store, tmp_path, finish=True)
        crash, work = of(events, SubmissionPublished)
        # Feedback: the crash scores the failure score, below the working program.
        assert (crash.score, crash.failures) == (-200.0, 2)
        assert -200.0 < work.score < -80.0 and work.failures == 0
        # Validation, though the Agent named the crashing program first.
        validated = {v.submission_id: v.score for v in of(events, CandidateValidated)}
        assert validated[1] == -200.0 and validated[2] > -200.0
        (selected,) = of(events, FinalSubmissionSelected)
        assert selected.submission_id == 2
        (done,) = of(events, RunFinished)
        assert (done.reason, done.handoff, done.final_submission_id) == ("finished", "agent", 2)
        # It improved on the initial program, which never climbs the hill (-200, completed).
        assert (done.reference_score, done.improved) == (-200.0, True)
        # The read models.
        refresh(store)
        with open_read_models(store, read_only=True) as db:
            row = db.execute(
                "SELECT best_submission_id, best_score, final_submission_id FROM runs"
            ).fetchone()
        assert row == (2, work.score, 2)

        # Every export: dpo prefers the working program, rl's best known score is its.
        out = tmp_path / "dataset"
        export(
            store,
            ["dpo", "rl", "programs", "sft"],
            out,
            ExportOptions(run_filter=RunFilter(), test_fraction=0.0),
        )
        (pair,) = [r for split in datasets.load_dataset(str(out), "dpo").values() for r in split]
        assert (pair["chosen_score"], pair["rejected_score"]) == (work.score, -200.0)
        (task,) = [r for split in datasets.load_dataset(str(out), "rl").values() for r in split]
        assert task["best_known_score"] == work.score
        programs = sorted(
            (r for split in datasets.load_dataset(str(out), "programs").values() for r in split),
            key=lambda r: r["submission_id"],
        )
        assert [r["score"] for r in programs] == [-200.0, work.score]
        assert [r["selected"] for r in programs] == [False, True]


def test_host_nomination_never_ranks_the_crash_first(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        _, events = run(store, tmp_path, finish=False, host_nomination=True)
        (done,) = of(events, RunFinished)
        assert done.handoff == "host" and done.final_submission_id == 2
        candidates = [v.submission_id for v in of(events, CandidateValidated)]
        assert candidates == [2, 1]  # nominated best first: the working program


def test_without_a_handoff_there_is_no_final_program(tmp_path: Path) -> None:
    with open_store(tmp_path / "store", create=True) as store:
        state, events = run(store, tmp_path, finish=False)
        (done,) = of(events, RunFinished)
        assert (done.handoff, done.final_submission_id, done.improved) == ("none", None, None)
        assert state.selected is None
