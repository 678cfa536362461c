"""The reference agent: program edits, budget planning, its search loop and its transcript.

The session Host is not needed here: ``evolve`` takes the evaluation as a function, so the
end-to-end test runs it against the real evaluator in-process.
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
from evopolicygym.agents.reference import run_agent
from evopolicygym.agents.reference_budget import BudgetPlan, Task, plan_budget
from evopolicygym.agents.reference_search import Outcome, better, evolve, temp_probe
from evopolicygym.agents.session_client import Rejected
from evopolicygym.agents.transcript_writer import TranscriptWriter
from evopolicygym.benchmark import Benchmark
from evopolicygym.evaluation import EvaluationConfig, Evaluator, plan_episodes
from evopolicygym.policy import PolicyContext
from evopolicygym.program import Program
from evopolicygym.registry import baseline_dir, load_benchmark
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


def test_better_uses_the_direction_then_failures():
    assert better(Outcome(2.0), Outcome(1.0), maximize=True)
    assert better(Outcome(1.0), Outcome(2.0), maximize=False)
    assert better(Outcome(1.0, failures=0), Outcome(1.0, failures=1), maximize=True)
    assert not better(Outcome(1.0), Outcome(1.0), maximize=True)
    assert better(Outcome(-5.0), Outcome(None), maximize=True)
    assert not better(Outcome(None), None, maximize=True)


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
        and submits[0].arguments["command"] == "evopolicy session submit program --episodes 0:4"
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
