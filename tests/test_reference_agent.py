"""The reference agent: program edits, budget planning, its search loop, its handoff and
its transcript.

``evolve`` takes the evaluation as a function, so most tests run it against the real
evaluator in-process; the handoff is also checked on real Runs, through the session.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import json
import math
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evopolicygym.agents import edits
from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity
from evopolicygym.agents.reference import SessionAgent, run_agent
from evopolicygym.agents.reference_budget import BudgetPlan, Task, plan_budget
from evopolicygym.agents.reference_search import (
    Outcome,
    evolve,
    files_digest,
    outranks,
    temp_probe,
)
from evopolicygym.agents.session_client import (
    Published,
    Rejected,
    rank_programs,
    rank_published,
)
from evopolicygym.agents.transcript_writer import TranscriptWriter
from evopolicygym.benchmark import Benchmark
from evopolicygym.evaluation import EvaluationConfig, Evaluator, plan_episodes
from evopolicygym.policy import PolicyContext
from evopolicygym.program import Program
from evopolicygym.records.events import (
    AgentMessages,
    EvaluationStarted,
    FinishAccepted,
    RunCreated,
    SubmissionPublished,
)
from evopolicygym.records.location import open_store
from evopolicygym.registry import baseline_dir, load_benchmark
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.create import create_run
from evopolicygym.run.host import RunHost
from evopolicygym.run.ledger import load_run
from evopolicygym.transcript import Message
from evopolicygym.values import decode_value, encode_value

SOURCE = '''"""A hand-written policy with tunable constants."""

OBS_SCALE = [2.0, 3.0]
GAIN = 0.5


class P:
    def act(self, observation):
        x, v = (float(o) for o in observation)
        # 1.5 in a comment is not a constant
        return 1 if GAIN * x - 0.25 * v + -1.5 > 0 else 0


def make_policy(context):
    return P()
'''


def load_policy(root: Path, name: str, source: str) -> ModuleType:
    """``source`` as ``root/name/policy.py``, imported the way a file module is."""
    path = root / name / "policy.py"
    path.parent.mkdir(parents=True)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"policy_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def context_for(benchmark: Benchmark) -> PolicyContext:
    spec = benchmark.spec
    return PolicyContext(
        observation_space=spec.observation_space,
        action_space=spec.action_space,
        policy_seed=0,
        metadata=spec.metadata,
        environment_parameters=spec.environment_parameters,
    )


def cartpole_task(**overrides: Any) -> Task:
    spec = load_benchmark("cartpole").spec
    data: dict[str, Any] = {
        "benchmark": msgspec.to_builtins(spec),
        "episode_budget": 64,
        "episode_pool_size": 64,
        "max_submissions": 64,
        "max_episodes_per_submission": 64,
        "finish_budget_policy": "require_budget_exhaustion",
        "max_candidates": 3,
    }
    data.update(overrides)
    return Task.from_dict(data)


# --------------------------------------------------------------------------- constants


def test_find_constants_lists_float_literals_but_not_ints_comments_or_space_facts():
    found = edits.find_constants(SOURCE)
    assert [c.value for c in found] == [0.5, 0.25, -1.5]
    lines = SOURCE.splitlines()
    spans = [lines[c.lineno - 1].encode()[c.col : c.end_col].decode() for c in found]
    assert spans == ["0.5", "0.25", "-1.5"]


def test_replace_constants_changes_only_the_literals():
    new = edits.replace_constants(SOURCE, {0: 2.0, 1: -0.1, 2: 1e-05})
    assert "GAIN = 2.0" in new
    assert "GAIN * x - (-0.1) * v + 1e-05 > 0" in new
    assert "# 1.5 in a comment is not a constant" in new
    assert "OBS_SCALE = [2.0, 3.0]" in new
    assert [c.value for c in edits.find_constants(new)] == [2.0, -0.1, 1e-05]
    assert edits.classify_edit(SOURCE, new) == "parametric"


def test_format_number_is_a_short_float_literal():
    assert edits.format_number(2) == "2.0"
    assert edits.format_number(1234.5678) == "1235.0"
    assert edits.format_number(-0.000012345) == "-1.234e-05"
    assert edits.format_number(-0.0) == "0.0"
    with pytest.raises(ValueError):
        edits.format_number(math.inf)


@pytest.mark.parametrize("seed", range(8))
def test_mutated_program_parses_defines_make_policy_and_keeps_its_structure(
    tmp_path: Path, seed: int
):
    new, step = edits.mutate_constants(SOURCE, random.Random(seed), 0.8)
    assert step, "at least one constant moves"
    ast.parse(new)
    before = [c.value for c in edits.find_constants(SOURCE)]
    after = [c.value for c in edits.find_constants(new)]
    assert {i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b} <= set(step)
    assert edits.classify_edit(SOURCE, new) in ("parametric", "none")
    module = load_policy(tmp_path, "mutant", new)
    assert module.make_policy(None).act([0.3, -0.2]) in (0, 1)


def test_apply_step_replays_a_step_with_either_sign():
    assert "GAIN = 0.6" in edits.apply_step(SOURCE, {0: 0.1})
    assert "GAIN = 0.4" in edits.apply_step(SOURCE, {0: 0.1}, -1.0)


def test_classify_edit_compares_structure_without_numbers():
    assert edits.classify_edit(SOURCE, SOURCE.replace("0.25", "0.75")) == "parametric"
    # A sign change is a new number, not a new structure.
    assert edits.classify_edit(SOURCE, SOURCE.replace("+ -1.5", "+ 1.5")) == "parametric"
    assert edits.classify_edit(SOURCE, SOURCE.replace("1 if", "3 if")) == "parametric"
    assert edits.classify_edit(SOURCE, SOURCE.replace("# 1.5 in", "# 2.5 in")) == "none"
    assert edits.classify_edit(SOURCE, SOURCE.replace("GAIN * x", "GAIN * v")) == "synthesis"
    info = edits.space_info(
        {"type": "box", "shape": [2], "dtype": "float32", "low": None, "high": None},
        {"type": "discrete", "n": 2, "start": 0},
    )
    template = edits.render_template(info, edits.fit_template("linear-threshold", info))
    assert edits.classify_edit(SOURCE, template) == "synthesis"
    assert edits.detect_template(template) == "linear-threshold"
    assert edits.detect_template(SOURCE) is None


# --------------------------------------------------------------------------- templates


@pytest.mark.parametrize(
    ("benchmark_id", "library"),
    [
        ("cartpole", ["linear-threshold", "quadratic-threshold"]),
        ("acrobot", ["linear-argmax", "quadratic-argmax"]),
        ("mountain-car-continuous", ["clipped-linear", "quadratic-clipped-linear"]),
        ("frozen-lake", ["action-table"]),
    ],
)
def test_templates_give_valid_actions_on_real_observations(
    tmp_path: Path, benchmark_id: str, library: list[str]
):
    benchmark = load_benchmark(benchmark_id)
    spec = benchmark.spec
    info = edits.space_info(spec.observation_space, spec.action_space)
    assert edits.template_library(info) == library
    rng = random.Random(7)
    for name in library:
        fit = edits.fit_template(name, info)
        fit.perturb(rng, 50.0)  # wild parameters: Box actions must still be within bounds
        source = edits.render_template(info, fit)
        assert "import" not in source  # self-contained and stdlib-only, not even stdlib
        assert edits.find_constants(source), "a template has tunable constants"
        module = load_policy(tmp_path, name, source)
        env = benchmark.make_environment(benchmark.plan("train", 0, 1)[0])
        try:
            observation = env.reset()
            policy = module.make_policy(context_for(benchmark))
            for _ in range(20):
                seen = decode_value(encode_value(observation))  # as the policy receives it
                for form in (seen, seen.tolist() if hasattr(seen, "tolist") else seen):
                    benchmark.validate_action(policy.act(form))
                result = env.step(benchmark.validate_action(policy.act(seen)))
                if result.terminated or result.truncated:
                    break
                observation = result.observation
        finally:
            env.close()


def test_value_table_template_for_discrete_observations_and_box_actions(tmp_path: Path):
    info = edits.space_info(
        {"type": "discrete", "n": 5, "start": 1},
        {"type": "box", "shape": [2], "dtype": "float32", "low": [-1.0, 0.0], "high": [1.0, None]},
    )
    assert edits.template_library(info) == ["value-table"]
    fit = edits.fit_template("value-table", info, [1, 3], [[0.5, 2.0], [-0.25, 7.0]])
    assert fit.agreement == 1.0
    fit.perturb(random.Random(0), 0.0)
    module = load_policy(tmp_path, "table", edits.render_template(info, fit))
    policy = module.make_policy(None)
    assert policy.act(1) == [0.5, 2.0]
    assert policy.act(3) == [-0.25, 7.0]
    wild = fit.copy()
    wild.table = [[100.0, -100.0]] * 5
    module = load_policy(tmp_path, "wild", edits.render_template(info, wild))
    low, high = module.make_policy(None).act(4)
    assert 0.999 < low < 1.0 and 0.0 < high < 0.001  # clipped just inside the bounds


def test_a_scalar_box_action_is_a_bare_number(tmp_path: Path):
    box = {"type": "box", "shape": [3], "dtype": "float32", "low": None, "high": None}
    scalar = {"type": "box", "shape": [], "dtype": "float32", "low": -2.0, "high": 2.0}
    info = edits.space_info(box, scalar)
    fit = edits.fit_template(
        "clipped-linear", info, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [1.5, -0.5]
    )
    module = load_policy(tmp_path, "scalar", edits.render_template(info, fit))
    action = module.make_policy(None).act([1.0, 0.0, 0.0])
    assert isinstance(action, float) and -2.0 < action < 2.0


def test_unsupported_spaces_have_no_template():
    image = {"type": "box", "shape": [64, 64, 3], "dtype": "uint8", "low": 0, "high": 255}
    assert edits.template_library(edits.space_info(image, {"type": "discrete", "n": 3})) == []
    text = {"type": "other", "repr": "Text()"}
    assert edits.template_library(edits.space_info(text, {"type": "discrete", "n": 3})) == []


def test_a_fitted_template_acts_like_the_program_it_was_fitted_to(tmp_path: Path):
    benchmark = load_benchmark("cartpole")
    task_json = tmp_path / "task.json"
    task_json.write_text(json.dumps({"benchmark": msgspec.to_builtins(benchmark.spec)}))
    program = baseline_dir(benchmark)
    assert program is not None
    probe = edits.run_probe(program, task_json, samples=128, seed=3)
    assert probe.ok and probe.errors == 0 and len(probe.actions) == 128
    info = edits.space_info(benchmark.spec.observation_space, benchmark.spec.action_space)
    fit = edits.fit_template("linear-threshold", info, probe.observations, probe.actions)
    assert fit.agreement is not None and fit.agreement > 0.95
    module = load_policy(tmp_path, "fitted", edits.render_template(info, fit))
    policy = module.make_policy(context_for(benchmark))
    same = sum(policy.act(o) == a for o, a in zip(probe.observations, probe.actions, strict=True))
    assert same / len(probe.actions) > 0.95


def test_an_action_table_fitted_to_a_table_program_copies_it_exactly(tmp_path: Path):
    benchmark = load_benchmark("frozen-lake")
    task_json = tmp_path / "task.json"
    task_json.write_text(json.dumps({"benchmark": msgspec.to_builtins(benchmark.spec)}))
    program = baseline_dir(benchmark)
    assert program is not None
    probe = edits.run_probe(program, task_json)
    assert probe.ok and probe.observations == list(range(16))
    info = edits.space_info(benchmark.spec.observation_space, benchmark.spec.action_space)
    fit = edits.fit_template("action-table", info, probe.observations, probe.actions)
    module = load_policy(tmp_path, "table", edits.render_template(info, fit))
    policy = module.make_policy(context_for(benchmark))
    assert [policy.act(s) for s in range(16)] == probe.actions


def test_a_probe_of_a_crashing_program_fails_softly(tmp_path: Path):
    (tmp_path / "program").mkdir()
    (tmp_path / "program" / "policy.py").write_text("raise RuntimeError('no')\n")
    (tmp_path / "task.json").write_text(
        json.dumps({"benchmark": msgspec.to_builtins(load_benchmark("cartpole").spec)})
    )
    probe = edits.run_probe(tmp_path / "program", tmp_path / "task.json")
    assert not probe.ok and "RuntimeError" in probe.output


# --------------------------------------------------------------------------- budget planning


def test_plan_for_budget_64():
    plan = plan_budget(64, 64, 64, 64, exhaust=True)
    assert plan == BudgetPlan(episodes_per_evaluation=4, evaluations=15, confirmations=(4,))
    assert plan.episodes == 64 and plan.submissions == 16 and plan.matched_indices == [0, 1, 2, 3]


def test_plan_grows_evaluations_when_submissions_are_scarce():
    plan = plan_budget(64, 64, 4, 64, exhaust=True)
    assert plan.episodes == 64 and plan.submissions <= 4 and plan.evaluations == 4
    # Without the exhaustion rule it still uses the budget rather than leave it unspent.
    assert plan_budget(64, 64, 4, 64, exhaust=False).episodes == 64


def test_plan_respects_the_per_submission_limit_and_the_pool():
    plan = plan_budget(64, 64, 64, 3, exhaust=True)
    assert plan.episodes_per_evaluation == 3 and max(plan.confirmations) <= 3
    assert plan.episodes == 64
    plan = plan_budget(64, 2, None, 64, exhaust=True, episodes_per_evaluation=10)
    assert plan.episodes_per_evaluation == 2 and plan.episodes == 64


@settings(max_examples=300, deadline=None)
@given(
    budget=st.integers(1, 400),
    pool=st.integers(1, 120),
    limit=st.integers(1, 120),
    subs=st.integers(1, 400),
    wanted=st.one_of(st.none(), st.integers(1, 50)),
    exhaust=st.booleans(),
)
def test_plan_never_breaks_a_limit_and_spends_exactly_when_required(
    budget: int, pool: int, limit: int, subs: int, wanted: int | None, exhaust: bool
):
    limit = min(limit, pool)  # the Host's own rule
    plan = plan_budget(budget, pool, subs, limit, exhaust, episodes_per_evaluation=wanted)
    k = plan.episodes_per_evaluation
    assert 1 <= k <= min(limit, pool, budget)
    assert all(1 <= c <= min(limit, pool) for c in plan.confirmations)
    assert plan.episodes <= budget
    assert plan.submissions <= subs
    assert plan.evaluations >= 1
    if exhaust and subs * limit >= budget:
        assert plan.episodes == budget


@settings(max_examples=200, deadline=None)
@given(budget=st.integers(0, 200), subs=st.integers(0, 60), k=st.integers(1, 8))
def test_a_replan_keeps_the_matched_size(budget: int, subs: int, k: int):
    plan = plan_budget(
        budget, 64, subs, 16, True, episodes_per_evaluation=k, fixed=True, min_evaluations=0
    )
    assert plan.episodes_per_evaluation == k
    assert plan.episodes <= budget and plan.submissions <= subs
    if subs * 16 >= budget:
        assert plan.episodes == budget


def test_outranks_uses_the_direction_then_failures():
    assert outranks(Outcome(2.0), Outcome(1.0), maximize=True)
    assert outranks(Outcome(1.0), Outcome(2.0), maximize=False)
    assert outranks(Outcome(1.0, failures=0), Outcome(1.0, failures=1), maximize=True)
    assert not outranks(Outcome(1.0), Outcome(1.0), maximize=True)
    assert outranks(Outcome(-5.0), Outcome(None), maximize=True)
    assert not outranks(Outcome(None), None, maximize=True)


# --------------------------------------------------------------------------- the search


class Quadratic:
    """A cheap deterministic objective over programs: how close the program's tunable
    constants are to a target (a stand-in Benchmark; it is not what the tests measure)."""

    def __init__(self, target: float = 0.3) -> None:
        self.target = target
        self.calls: list[tuple[str, tuple[int, ...]]] = []

    def __call__(self, files: Mapping[str, str], indices: Sequence[int]) -> float:
        source = files["policy.py"]
        self.calls.append((source, tuple(indices)))
        values = [c.value for c in edits.find_constants(source)]
        return -sum((v - self.target) ** 2 for v in values) if values else -100.0


def test_evolve_spends_the_budget_exactly_within_the_limits():
    task = cartpole_task(max_submissions=20)
    objective = Quadratic()
    evolution = evolve(task, {"policy.py": SOURCE}, objective, seed=1)
    spent = sum(len(indices) for _, indices in objective.calls)
    assert spent == 64 and evolution.budget_left == 0
    assert len(objective.calls) <= 20
    matched = evolution.plan.matched_indices
    kinds = [c.edit for c in evolution.candidates]
    assert kinds[0] == "baseline" and {"synthesis", "parametric"} <= set(kinds)
    assert all(c.outcome is not None for c in evolution.candidates)
    assert [i for _, i in objective.calls[: len(kinds)]] == [tuple(matched)] * len(kinds)
    best = evolution.best
    assert best is not None and best.outcome is not None and evolution.baseline is not None
    assert evolution.baseline.outcome is not None
    assert best.outcome.score is not None and evolution.baseline.outcome.score is not None
    assert best.outcome.score > evolution.baseline.outcome.score
    # Distinct programs, best first.
    assert len({c.digest for c in evolution.ranking}) == len(evolution.ranking)


def test_evolve_is_deterministic_for_a_seed():
    runs = []
    for _ in range(2):
        objective = Quadratic()
        evolve(cartpole_task(), {"policy.py": SOURCE}, objective, seed=5)
        runs.append(objective.calls)
    assert runs[0] == runs[1]
    other = Quadratic()
    evolve(cartpole_task(), {"policy.py": SOURCE}, other, seed=6)
    assert other.calls != runs[0]


def test_evolve_handles_rejections():
    task = cartpole_task(finish_budget_policy="allow_early")
    objective = Quadratic()
    refusals = iter(["duplicate_submission", "program_invalid"])

    def evaluate(files: Mapping[str, str], indices: Sequence[int]) -> float:
        if len(objective.calls) == 3:
            code = next(refusals, None)
            if code is not None:
                raise Rejected(code, "refused for the test")
        if len(objective.calls) == 6:
            raise Rejected("budget_exhausted", "the budget is spent")
        return objective(files, indices)

    evolution = evolve(task, {"policy.py": SOURCE}, evaluate, seed=0)
    assert evolution.stopped == "budget_exhausted"
    assert len(evolution.candidates) == 6 and evolution.best is not None


def test_evolve_minimizes_when_the_benchmark_says_so():
    spec = msgspec.to_builtins(load_benchmark("cartpole").spec)
    spec["score_direction"] = "minimize"
    objective = Quadratic()
    evolution = evolve(
        cartpole_task(benchmark=spec), {"policy.py": SOURCE}, lambda f, i: -objective(f, i)
    )
    scores = [c.outcome.score for c in evolution.ranking if c.outcome]
    assert scores == sorted(s for s in scores if s is not None)


def real_evaluation(benchmark: Benchmark, evaluator: Evaluator, pool_size: int):
    pool = plan_episodes(benchmark, "train", 0, pool_size)

    def evaluate(files: Mapping[str, str], indices: Sequence[int]) -> Outcome:
        result = evaluator.evaluate(
            Program.from_files(files),
            benchmark,
            EvaluationConfig(episodes=len(indices), seed=0, jobs=1),
            episodes=[pool[i] for i in indices],
        )
        return Outcome(score=result.feedback.score, failures=result.failures)

    return evaluate


def test_evolution_beats_the_cartpole_baseline_with_the_real_evaluator():
    benchmark = load_benchmark("cartpole")
    task = cartpole_task()
    program = baseline_dir(benchmark)
    assert program is not None
    files = {"policy.py": (program / "policy.py").read_text()}
    notes: list[str] = []
    with Evaluator() as evaluator:
        evaluate = real_evaluation(benchmark, evaluator, task.episode_pool_size)
        evolution = evolve(
            task, files, evaluate, seed=0, probe_fn=temp_probe(task), say=notes.append
        )
        baseline, best = evolution.baseline, evolution.best
        assert baseline is not None and baseline.outcome is not None
        assert best is not None and best.outcome is not None
        base_score, best_score = baseline.outcome.score, best.outcome.score
        assert base_score is not None and best_score is not None
        print(f"cartpole, budget 64: baseline {base_score}, best {best_score} ({best.edit})")
        assert best_score > 2 * base_score and best_score > 300
        # The same comparison, re-run on the same matched Episodes, holds.
        again = evaluate(best.files, evolution.plan.matched_indices)
        assert again.score == best_score
    assert evolution.budget_left == 0
    assert {"synthesis", "parametric"} <= {c.edit for c in evolution.candidates}
    assert edits.detect_template(best.source) in ("linear-threshold", "quadratic-threshold")
    assert any("probe observations" in note for note in notes)


# --------------------------------------------------------------------------- the agent process


def test_agent_without_a_session_writes_a_transcript_and_exits_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    workspace = tmp_path / "workspace"
    (workspace / "program").mkdir(parents=True)
    program = baseline_dir(load_benchmark("cartpole"))
    assert program is not None
    (workspace / "program" / "policy.py").write_text((program / "policy.py").read_text())
    task = cartpole_task()
    (workspace / "task.json").write_text(json.dumps({**task.__dict__, "benchmark": task.benchmark}))
    out = io.BytesIO()
    # The real session client with no session to talk to: every command fails (exit 2).
    monkeypatch.delenv("EVOPOLICY_SESSION", raising=False)
    cli = [sys.executable, "-m", "evopolicygym.cli"]
    assert run_agent(workspace, cli, seed=0, episodes=None, out=out) == 0
    messages = [msgspec.json.decode(line, type=Message) for line in out.getvalue().splitlines()]
    first = messages[0]
    assert first.role == "assistant" and first.content.startswith("Plan:")
    assert first.tool_calls[0].name == "read_file"
    assert first.tool_calls[0].arguments == {"path": "task.json"}
    calls = {m.tool_calls[0].id: m.tool_calls[0] for m in messages if m.tool_calls}
    for message in messages:
        assert message.at > 0
        if message.role == "tool":
            assert message.tool_call_id in calls
            assert message.name == calls[message.tool_call_id].name
    submits = [c for c in calls.values() if c.name == "bash"]
    assert (
        submits
        # The initial program, said to be edited from the initial program (0).
        and submits[0].arguments["command"]
        == "evopolicy session submit program --episodes 0:4 --parent 0"
    )
    assert "[exit code 2]" in next(m.content for m in messages if m.tool_call_id == submits[0].id)
    assert messages[-1].role == "assistant"


def test_transcript_puts_reasoning_on_the_next_tool_call():
    out = io.BytesIO()
    transcript = TranscriptWriter(out)
    transcript.say("why")
    assert transcript.tool("bash", {"command": "true"}, lambda: "[exit code 0]") == "[exit code 0]"
    transcript.say("done")
    transcript.flush()
    lines = [msgspec.json.decode(line, type=Message) for line in out.getvalue().splitlines()]
    assert [(m.role, m.content) for m in lines] == [
        ("assistant", "why"),
        ("tool", "[exit code 0]"),
        ("assistant", "done"),
    ]
    assert lines[0].tool_calls[0].id == lines[1].tool_call_id


# --------------------------------------------------------------------------- the handoff


def test_the_handoff_ranks_on_matched_evidence_and_never_lets_the_worst_outrank_a_better():
    matched = (0, 1, 2, 3)
    history = [
        Published(1, -500.0, 0, "baseline", matched),  # the failure score: the worst there is
        Published(2, -500.0, 0, "b", matched),
        Published(3, -500.0, 0, "c", matched),
        Published(4, -250.0, 1, "d", matched),
        Published(5, -103.8, 0, "e", matched),
        Published(6, -250.0, 0, "f", matched),  # ties d, with fewer failures
        Published(7, None, 0, "g", matched),  # failed: never named
        # The best's re-evaluation on fresh Episodes: the same program, named once.
        Published(8, -90.0, 0, "e", (4, 5, 6, 7)),
        # Never on the matched set: its better-looking score compares with nothing.
        Published(9, -60.0, 0, "h", (8, 9)),
        # The worst ran elsewhere: it still comes after every better program.
        Published(10, -20.0, 0, "b", (10, 11)),
    ]
    ranked = rank_programs(history, True, matched=matched, failure_score=-500.0)
    assert [r.submission_id for r in ranked] == [5, 6, 4, 9, 1, 2, 3]
    assert [r.matched for r in ranked] == [True, True, True, False, True, True, True]
    assert [r.worst for r in ranked] == [False] * 4 + [True] * 3
    assert ranked[0].score == -103.8  # its matched score, not its fresh one
    assert ranked[3].score == -60.0 and ranked[3].digest == "h"
    assert rank_published(history, True, 3, matched=matched, failure_score=-500.0) == [5, 6, 4]
    assert rank_published(history, True, 10, matched=matched, failure_score=-500.0) == [5, 6, 4, 9]
    # The matched set is the one most programs ran on when the agent does not say.
    assert rank_published(history, True, 3, failure_score=-500.0) == [5, 6, 4]
    # Nothing better than a failure: the best of the worst, still in order.
    worst = [Published(sid, -500.0, 0, f"p{sid}", matched) for sid in (1, 2, 3)]
    assert rank_published(worst, True, 2, failure_score=-500.0) == [1, 2]


def test_the_handoff_follows_the_benchmark_direction():
    matched = (0, 1)
    history = [
        Published(1, 40.0, 0, "a", matched),
        Published(2, 12.5, 0, "b", matched),
        Published(3, 1000.0, 0, "c", matched),  # a minimizing Benchmark's failure score
        Published(4, 12.5, 2, "d", matched),
        Published(5, 3.0, 0, "e", (2, 3)),  # unmatched
    ]
    assert rank_published(history, False, 5, matched=matched, failure_score=1000.0) == [2, 4, 1, 5]
    assert rank_published(history, True, 5, matched=matched) == [3, 1, 2, 4, 5]


def test_leaders_re_evaluated_on_the_same_episodes_compare_on_all_of_them():
    matched, fresh, more = (0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11)
    history = [
        Published(1, 0.75, 0, "a", matched),
        Published(2, 0.5, 0, "b", matched),
        Published(3, 0.25, 0, "c", matched),
        Published(4, 0.0, 0, "a", fresh),
        Published(5, 0.75, 0, "b", fresh),
    ]
    # Both leaders ran on the same eight Episodes: b is better there (0.625 to 0.375).
    assert rank_published(history, True, 3, matched=matched) == [2, 1, 3]
    # One more re-evaluation of a alone: their evidence is no longer the same, so the
    # matched set decides.
    extra = [*history, Published(6, 1.0, 0, "a", more)]
    assert rank_published(extra, True, 3, matched=matched) == [1, 2, 3]


def test_without_indices_the_handoff_ranks_by_each_programs_own_score():
    # What the chat agent knows: scores and digests, no indices.
    history = [
        Published(1, 12.5, 0, "a"),
        Published(2, 20.0, 0, "b"),
        Published(3, 30.0, 0, "a"),  # a again: 21.25 over both
        Published(4, None, 0, "c"),
    ]
    assert rank_published(history, True, 3) == [1, 2]


def test_the_search_hands_off_its_best_on_the_matched_set_and_leaves_the_worst_out():
    """Scores like acrobot's: negative, the failure score at -500, most edits at -500; the
    one improvement is neither first nor confirmed away by a worse fresh score."""
    spec = msgspec.to_builtins(load_benchmark("cartpole").spec)
    spec["failure_score"] = -500.0
    task = cartpole_task(benchmark=spec, finish_budget_policy="allow_early")
    scores: dict[str, float] = {}

    def evaluate(files: Mapping[str, str], indices: Sequence[int]) -> Outcome:
        digest = files_digest(files)
        if digest not in scores:
            scores[digest] = -103.8 if len(scores) == 6 else -500.0
        return Outcome(score=scores[digest], submission_id=len(scores))

    evolution = evolve(task, {"policy.py": SOURCE}, evaluate, seed=0)
    best = evolution.best
    assert best is not None and best.outcome is not None and best.outcome.score == -103.8
    assert best.number == 6 and evolution.handoff == [best]
    assert [c.outcome.score for c in evolution.ranking if c.outcome][:2] == [-103.8, -500.0]
    # What was left of the budget re-evaluated the best, not a -500 candidate.
    assert best.confirmations and all(not c.confirmations for c in evolution.ranking[1:])


def test_re_evaluations_never_repeat_an_index_the_program_already_ran():
    """With no edit to make, the budget goes to re-evaluating the baseline, on Episodes it
    has not run: a second run of the same Episodes is charged and tells nothing new."""
    spec = msgspec.to_builtins(load_benchmark("cartpole").spec)
    spec["observation_space"] = {"type": "other", "repr": "Text()"}  # no template fits
    task = cartpole_task(
        benchmark=spec,
        episode_pool_size=10,
        max_episodes_per_submission=4,
        finish_budget_policy="allow_early",
    )
    source = "def make_policy(context):\n    return type('P', (), {'act': lambda s, o: 1})()\n"
    calls: list[tuple[int, ...]] = []

    def evaluate(files: Mapping[str, str], indices: Sequence[int]) -> float:
        calls.append(tuple(indices))
        return 10.0

    evolution = evolve(task, {"policy.py": source}, evaluate, episodes_per_evaluation=4)
    assert calls == [(0, 1, 2, 3), (4, 5, 6, 7), (8, 9)]
    assert evolution.budget_left == 64 - 10 and evolution.handoff == evolution.candidates


def test_a_restarted_agent_takes_what_its_earlier_start_published(tmp_path: Path):
    """After a restart, a program already evaluated on the same Episodes is not submitted
    (and charged) again, and the matched set stays the earlier start's."""
    workspace = tmp_path / "workspace"
    files = {"policy.py": SOURCE}
    digest = files_digest(files)
    feedback = workspace / "feedback" / "submission-0001"
    feedback.mkdir(parents=True)
    document = {
        "submission_id": 1,
        "status": "published",
        "program_digest": digest,
        "indices": [0, 1, 2],
        "score": 42.0,
        "failures": 0,
        "budget_left": 61,
        "episodes": [],
    }
    (feedback / "feedback.json").write_text(json.dumps(document))
    (workspace / "feedback" / "latest.json").write_text(json.dumps(document))
    out = io.BytesIO()
    # A session command that would refuse everything: nothing may reach it.
    agent = SessionAgent(workspace, ["false"], TranscriptWriter(out), seed=0)
    assert agent.read_history() == (61, 1, 3)
    outcome = agent.evaluate(files, [0, 1, 2])
    assert outcome == Outcome(42.0, 0, 1, budget_left=61, charged=False)
    with pytest.raises(Rejected):  # once only, and never for other Episodes
        agent.evaluate(files, [0, 1, 2])
    assert [p.submission_id for p in agent.published] == [1]


# A weak start for each Benchmark, which the search improves on only after a few tries.
ACROBOT_START = (
    '"""Torque by the middle joint\'s swing, biased so far that it hardly ever switches."""\n'
    """
GAIN = 1.0
BIAS = 20.0


class Biased:
    def act(self, observation):
        return 2 if GAIN * float(observation[5]) + BIAS > 0 else 0


def make_policy(context):
    return Biased()
"""
)

FROZEN_LAKE_START = """\"\"\"One-step lookahead on walking distance to the goal, counting a hole as
only HOLE steps away, far too close: it often walks into one.\"\"\"

HOLE = 3.0
ROWS = ["SFFF", "FHFH", "FFFH", "HFFG"]
MOVES = [(0, -1), (1, 0), (0, 1), (-1, 0)]  # left, down, right, up
SIDEWAYS = [(1, 3), (0, 2), (1, 3), (0, 2)]


def move(r, c, action):
    dr, dc = MOVES[action]
    return min(max(r + dr, 0), 3), min(max(c + dc, 0), 3)


def distances():
    distance, frontier = {(3, 3): 0}, [(3, 3)]
    while frontier:
        r, c = frontier.pop(0)
        for action in range(4):
            cell = move(r, c, action)
            if cell not in distance and ROWS[cell[0]][cell[1]] != "H":
                distance[cell] = distance[(r, c)] + 1
                frontier.append(cell)
    return distance


class Lookahead:
    def __init__(self):
        self.distance = distances()

    def cost(self, cell):
        return HOLE if ROWS[cell[0]][cell[1]] == "H" else self.distance.get(cell, 50)

    def act(self, observation):
        r, c = divmod(int(observation), 4)
        return min(
            range(4),
            key=lambda a: sum(self.cost(move(r, c, m)) for m in (a, *SIDEWAYS[a])),
        )


def make_policy(context):
    return Lookahead()
"""


@pytest.mark.parametrize(
    ("benchmark_id", "start", "agent_seed"),
    [("acrobot", ACROBOT_START, 4), ("frozen-lake", FROZEN_LAKE_START, 1)],
)
def test_a_real_run_hands_off_the_best_on_matched_evidence(
    tmp_path: Path, benchmark_id: str, start: str, agent_seed: int
):
    """Budget 32 through the real session, from a weak start: the best program is found
    late, most others score no better than a failure. The finish names the best on the
    matched Episodes first, then the next best there, and none at the failure score."""
    config = RunConfig(
        episode_budget=32,
        validation=ValidationConfig(enabled=False, max_candidates=3),
        assessment=AssessmentConfig(enabled=False),
    )
    with open_store(tmp_path / "store", create=True) as store:
        run_id = create_run(
            store,
            benchmark_id,
            config,
            agent_identity("reference", seed=agent_seed),
            program=Program.from_files({"policy.py": start}),
        )
        RunHost(store, run_id, launcher=ProviderLauncher()).drive()
        _, events = load_run(store, run_id)
    created = next(e for e in events if isinstance(e, RunCreated))
    spec = created.benchmark_spec
    sign = 1.0 if spec["score_direction"] == "maximize" else -1.0
    failure = spec["failure_score"]
    started = {e.submission_id: e for e in events if isinstance(e, EvaluationStarted)}
    scores = {e.submission_id: e.score for e in events if isinstance(e, SubmissionPublished)}
    matched = started[1].indices  # the baseline's Episodes, which every candidate ran
    on_matched: dict[str, tuple[float, int]] = {}  # program -> (matched score, Submission)
    for sid in sorted(scores):
        if started[sid].indices == matched:
            on_matched.setdefault(started[sid].program_digest, (scores[sid], sid))
    assert len(on_matched) >= 8
    best = max(sign * score for score, _ in on_matched.values())
    better_than_failure = [s for s, _ in on_matched.values() if sign * s > sign * failure]
    # The scenario: the best is none of the first Submissions, and few beat a failure.
    assert min(sid for s, sid in on_matched.values() if sign * s == best) > 3
    assert 1 <= len(better_than_failure) < 3

    finish = [e for e in events if isinstance(e, FinishAccepted)]
    assert len(finish) == 1
    named = finish[0].candidates
    named_scores = [scores[sid] for sid in named]
    assert all(started[sid].indices == matched for sid in named)
    assert len({started[sid].program_digest for sid in named}) == len(named)
    assert sign * named_scores[0] == best
    assert named_scores == sorted(named_scores, key=lambda s: -sign * s)
    # Every program named beats a failure, and every better one is named.
    assert all(sign * s > sign * failure for s in named_scores)
    assert sorted(named_scores) == sorted(better_than_failure)
    messages = [m for chunk in events if isinstance(chunk, AgentMessages) for m in chunk.messages]
    assert any("left out" in (m.content or "") for m in messages if m.role == "assistant")
