"""The packaged reward (issue 11): a program scored on an ``rl`` row's train Episodes.

Two real Runs of the reference agent on CartPole, with different budgets (so two tasks,
two ``rl`` rows), are exported and loaded with ``datasets.load_dataset``. The reward
function is called exactly as TRL's GRPOTrainer calls a custom reward function (the
trainer needs torch, which is not installed; the call is reproduced from
``GRPOTrainer._calculate_rewards`` and pinned to the installed TRL's source), on both rows
with two completions each: the initial program, which must score what the Host recorded
for it on the same Episodes, to the bit, and a crashing program, which scores the failure
score.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pytest

from evopolicygym.records.events import RunCreated
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.pools import RecordedPool
from evopolicygym.records.runs import SubmissionSummary, summarize
from evopolicygym_exporters import ExportOptions, export
from evopolicygym_exporters.rewards import (
    RewardError,
    RewardTask,
    program_files,
    reward_function,
    score_program,
)
from tests.support.requires import require_group

pytestmark = pytest.mark.timeout(240)

FAILURE = 0.0  # CartPole's failure score: no completed Episode returns less
CRASH = (
    "class Crash:\n"
    "    def act(self, observation):\n"
    "        raise RuntimeError('boom')\n"
    "\n\n"
    "def make_policy(context):\n"
    "    return Crash()\n"
)
BUDGETS = {1: 8, 2: 6}  # Run seed -> episode budget: two budgets, two tasks


@dataclass
class Recorded:
    """One recorded Run: its pool, as the Host planned it, and its Submissions."""

    created: RunCreated
    submissions: list[SubmissionSummary]

    @property
    def pool_seed(self) -> int:
        return self.created.seeds["pool"]

    def baselines(self) -> list[SubmissionSummary]:
        """The Host's published Submissions of the initial program."""
        initial = self.created.initial_program_digest
        return [
            s for s in self.submissions if s.program_digest == initial and s.status == "published"
        ]


@dataclass
class Exported:
    store: Store
    runs: list[Recorded]
    rows: list[dict[str, Any]]

    def run_of(self, row: dict[str, Any]) -> Recorded:
        (run,) = [r for r in self.runs if r.pool_seed in row["train_pool_seeds"]]
        return run


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Exported]:
    from evopolicygym.agents.launcher import ProviderLauncher
    from evopolicygym.agents.providers import agent_identity
    from evopolicygym.run import RunHost, create_run
    from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig

    root = tmp_path_factory.mktemp("rewards")
    with pytest.MonkeyPatch.context() as patch, open_store(root / "store", create=True) as store:
        patch.setenv("HF_DATASETS_OFFLINE", "1")
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", root / "hf-cache")
        for seed, budget in BUDGETS.items():
            config = RunConfig(
                episode_budget=budget,
                seed=seed,
                jobs=1,
                validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
                assessment=AssessmentConfig(episodes=2),
            )
            run_id = create_run(store, "cartpole", config, agent_identity("reference"))
            RunHost(store, run_id, launcher=ProviderLauncher()).drive()
        runs = []
        for info in store.events.streams("run-"):
            first = next(iter(store.events.read_stream(info.stream_id))).event()
            assert isinstance(first, RunCreated)
            summary = summarize(store.events, info.stream_id)
            runs.append(Recorded(first, list(summary.submissions.values())))
        export(store, ["rl"], root / "out", ExportOptions())
        loaded = datasets.load_dataset(str(root / "out"), "rl")
        rows = [dict(row) for split in sorted(loaded) for row in loaded[split]]
        yield Exported(store, runs, sorted(rows, key=lambda r: r["pool_size"]))


def initial_files(row: dict[str, Any]) -> dict[str, str]:
    return {f["path"]: f["content"] for f in row["initial_program"]}


# --------------------------------------------------------------------------- TRL's call


def grpo_reward_call(
    reward_func: Callable[..., list[float | None]],
    inputs: list[dict[str, Any]],
    completions: list[Any],
) -> list[float]:
    """What ``GRPOTrainer._calculate_rewards`` does with a synchronous custom reward function:
    every input column but prompt/completion/completion_ids as a keyword list (one item per
    completion), the trainer state and the two logging hooks, then
    ``reward_func(prompts=, completions=, completion_ids=, **reward_kwargs)``; None reads as
    NaN and there must be one reward per completion."""
    require_group("interop", "trl", "transformers")
    from transformers import TrainerState

    prompts = [x["prompt"] for x in inputs]
    completion_ids_list = [[0] for _ in completions]  # token ids: unused by this reward
    keys = [key for key in inputs[0] if key not in ["prompt", "completion", "completion_ids"]]
    reward_kwargs: dict[str, Any] = {key: [example[key] for example in inputs] for key in keys}
    reward_kwargs["trainer_state"] = TrainerState()
    reward_kwargs["log_extra"] = lambda column, values: None
    reward_kwargs["log_metric"] = lambda name, value: None
    output = reward_func(
        prompts=prompts,
        completions=completions,
        completion_ids=completion_ids_list,
        **reward_kwargs,
    )
    output = [reward if reward is not None else math.nan for reward in output]
    assert len(output) == len(prompts)
    return [float(r) for r in output]


def test_the_reproduced_call_is_the_installed_trls() -> None:
    """The statements ``grpo_reward_call`` reproduces are in the installed GRPOTrainer."""
    require_group("interop", "trl", "transformers")
    import trl

    source = (Path(trl.__file__).parent / "trainer" / "grpo_trainer.py").read_text(encoding="utf-8")
    for statement in (
        "keys = [key for key in inputs[0] if key not in "
        '["prompt", "completion", "completion_ids"]]',
        "reward_kwargs = {key: [example[key] for example in inputs] for key in keys}",
        'reward_kwargs["trainer_state"] = self.state',
        'reward_kwargs["log_extra"] = self._log_completion_extra',
        'reward_kwargs["log_metric"] = self._log_metric',
        "prompts=prompts, completions=completions, completion_ids=completion_ids_list, "
        "**reward_kwargs",
        "output_reward_func = [reward if reward is not None else torch.nan "
        "for reward in output_reward_func]",
    ):
        assert statement in source, statement


def fenced(text: str, policy: str) -> list[dict[str, Any]]:
    return [{"role": "assistant", "content": f"{text}\n\n```python\n{policy}```\n"}]


def write_file(path: str, content: str) -> dict[str, Any]:
    arguments = {"path": path, "content": content}
    return {"type": "function", "function": {"name": "write_file", "arguments": arguments}}


def crashing() -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": "", "tool_calls": [write_file("program/policy.py", CRASH)]}
    ]


def test_grpo_rewards_on_two_rows_are_the_hosts_scores(exported: Exported) -> None:
    """Each row as a GRPO group of two: the initial program (in a fenced block) scores what
    the Host published for it on the same Episodes, exactly; a crashing program (written
    with write_file) scores the failure score."""
    assert len(exported.rows) == 2
    inputs, completions, expected = [], [], []
    for row in exported.rows:
        recorded = exported.run_of(row).baselines()[0]
        assert recorded.score is not None
        # The Episodes the Host scored the initial program on (the row's train_indices).
        row = {**row, "train_indices": recorded.indices}
        policy = initial_files(row)["policy.py"]
        for completion in (fenced("The program as it is:", policy), crashing()):
            inputs.append(row)  # GRPO repeats each row once per generation
            completions.append(completion)
        expected += [recorded.score, FAILURE]
    reward = functools.partial(reward_function, jobs=1)
    rewards = grpo_reward_call(reward, inputs, completions)
    assert rewards == expected
    assert all(type(r) is float for r in rewards)
    # Deterministic: the same Episodes give the same floats again.
    assert grpo_reward_call(reward, inputs, completions) == rewards
    # Relative: the improvement over the row's baseline_score, in its direction.
    relative = grpo_reward_call(functools.partial(reward, relative=True), inputs, completions)
    assert relative == [r - row["baseline_score"] for r, row in zip(rewards, inputs, strict=True)]


def test_score_program_is_the_hosts_score_for_every_baseline_submission(exported: Exported) -> None:
    for row in exported.rows:
        run = exported.run_of(row)
        assert run.baselines()
        for submission in run.baselines():
            score = score_program(row, initial_files(row), indices=submission.indices, jobs=1)
            assert score == submission.score, submission


def test_the_rows_episodes_are_the_pool_the_host_planned(exported: Exported) -> None:
    for row in exported.rows:
        run = exported.run_of(row)
        task = RewardTask(row)
        assert task.indices() == row["train_indices"]  # by default the baseline's Episodes
        every = list(range(row["pool_size"]))
        pool = list(RecordedPool.of(run.created, exported.store.blobs))  # as the Host stored it
        assert task.indices(every) == [e.index for e in pool]
        planned = task.episodes(run.pool_seed, every)
        host = [(e.split, e.index, e.seed, e.policy_seed, dict(e.scenario)) for e in pool]
        ours = [
            (e.spec.split, e.spec.index, e.spec.seed, e.policy_seed, dict(e.spec.scenario))
            for e in planned
        ]
        assert ours == host


def test_several_pool_seeds_score_the_mean_of_their_pools(exported: Exported) -> None:
    """Index 0 of either Run's pool (the plan of an index does not depend on the pool size)."""
    row = exported.rows[0]
    seeds = [run.pool_seed for run in exported.runs]
    firsts = [next(s.score for s in run.baselines() if s.indices == [0]) for run in exported.runs]
    both = score_program(row, initial_files(row), indices=[0], pool_seeds=seeds, jobs=1)
    assert both == math.fsum(s for s in firsts if s is not None) / 2


def test_the_exported_train_indices_give_the_baseline_score(exported: Exported) -> None:
    """Once rows say on which Episodes ``baseline_score`` was measured, the initial program
    scores it there (the mean of the Host's scores when it was submitted more than once)."""
    for row in exported.rows:
        assert row["train_indices"] and row["baseline_pool_seed"] in row["train_pool_seeds"]
        score = score_program(row, initial_files(row), jobs=1)
        assert score == row["baseline_score"]  # the Host's own score, reproduced exactly


def test_a_completion_without_a_program_or_with_a_broken_one_scores_the_failure_score(
    exported: Exported, caplog: pytest.LogCaptureFixture
) -> None:
    row = exported.rows[0]
    completions: list[Any] = [
        [{"role": "assistant", "content": "The initial program is fine; I would not change it."}],
        fenced("A fix:", "def make_policy(context:\n    return None\n"),
        "```python\nclass\n```\n",  # a plain-text completion: the standard format
    ]
    with caplog.at_level(logging.WARNING, logger="evopolicygym_exporters.rewards"):
        rewards = grpo_reward_call(
            functools.partial(reward_function, jobs=1), [row] * 3, completions
        )
    assert rewards == [FAILURE] * 3
    assert "writes no program" in caplog.text and "SyntaxError" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="evopolicygym_exporters.rewards"):
        assert score_program(row, {"helpers.py": "X = 1\n"}) == FAILURE
        assert score_program(row, {"policy.py": "", "../escape.py": ""}) == FAILURE
    assert "no policy.py" in caplog.text and "not a normalized relative path" in caplog.text
    # Relative to the baseline in the row's direction; no baseline: None, which TRL reads as NaN.
    relative = functools.partial(reward_function, relative=True)
    silent = [{"role": "assistant", "content": "nothing"}]
    minimize = {**row, "score_direction": "minimize"}
    assert grpo_reward_call(relative, [minimize], [silent]) == [row["baseline_score"] - FAILURE]
    (nan,) = grpo_reward_call(relative, [{**row, "baseline_score": None}], [silent])
    assert math.isnan(nan)


def test_a_row_of_another_environment_raises(exported: Exported) -> None:
    row = {**exported.rows[0], "environment_digest": "sha256:" + "0" * 64}
    with pytest.raises(RewardError, match="environment digest"):
        score_program(row, initial_files(row))
    with pytest.raises(RewardError, match="environment digest"):
        grpo_reward_call(reward_function, [row], [crashing()])
    with pytest.raises(RewardError, match="unknown benchmark"):
        score_program({**row, "benchmark_id": "no-such-benchmark"}, initial_files(row))
    with pytest.raises(RewardError, match="train indices"):
        score_program(exported.rows[0], initial_files(row), indices=[row["pool_size"]])


def test_program_files_reads_tool_calls_and_fenced_blocks(exported: Exported) -> None:
    # The prompt's own format (### <path> over a fence) gives the program back.
    row = exported.rows[0]
    shown = program_files(row["prompt"][1]["content"])
    assert {p: t.rstrip("\n") for p, t in shown.items()} == {
        p: t.rstrip("\n") for p, t in initial_files(row).items()
    }
    # write_file calls under program/ (arguments as JSON text too), the last one winning;
    # other paths and tools are not the program, and tool calls win over text.
    calls = [
        write_file("program/policy.py", "A = 1\n"),
        write_file("analysis/notes.py", "B = 2\n"),
        {
            "type": "function",
            "function": {
                "name": "write_file",
                "arguments": '{"path": "program/policy.py", "content": "C = 3\\n"}',
            },
        },
        write_file("program/lib/helpers.py", "D = 4\n"),
        {
            "type": "function",
            "function": {"name": "read_file", "arguments": {"path": "program/x.py"}},
        },
    ]
    message = {"role": "assistant", "content": "```python\nIGNORED = 1\n```", "tool_calls": calls}
    assert program_files([message]) == {"policy.py": "C = 3\n", "lib/helpers.py": "D = 4\n"}
    # The last python block is policy.py; a heading names a file; ~~~ fences work too.
    text = (
        "```python\nFIRST = 1\n```\nthen\n~~~py\nLAST = 2\n~~~\n\n"
        "### program/weights.json\n\n```json\n[1, 2]\n```\n```\nuntagged\n```\n"
    )
    assert program_files(text) == {"policy.py": "LAST = 2\n", "weights.json": "[1, 2]\n"}
    assert program_files([{"role": "assistant", "content": "no code"}]) == {}
