"""The trainer tier (issue 30): TRL's own GRPOTrainer drives ``PolicyEvolutionEnv``.

The tutorial ``docs/tutorials/train-with-grpo.md`` is this test's code: its blocks marked
``TIER_MARK`` run here in page order, in one temporary directory, the bash commands as
subprocesses with this environment's console scripts first on PATH (a leading ``uv run`` is
dropped), the python blocks as one script, in one namespace, in this process; the tests then
read what they made: the trainer (its logged metrics, its environments) and the store.

A randomly initialized model calls no tool, so a second test drives the tools through the
trainer's own tool-calling path: a trainer whose generation step emits scripted text (tool
calls, good and bad); TRL parses the calls from it, dispatches them to the environment's
methods and feeds the answers back, exactly as for a real model.

Nothing is downloaded: the model and its tokenizer are built by the page, and the Hub is
offline. Run from this directory, in its own environment: ``uv run pytest``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from evopolicygym.records import RunSummary, open_store, program_of, summarize, verify_store
from evopolicygym.records.events import AgentMessages

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorials" / "train-with-grpo.md"
# The root suite has no torch, so the page's blocks say "not run" to it, and why.
TIER_MARK = "<!-- not run: the trainer tier runs this page (tests/trainer), with torch -->"
BIN = Path(sys.executable).parent
REWARD = "rewards/PolicyEvolutionEnv/mean"


@dataclass(frozen=True)
class Block:
    lang: str
    line: int  # of the opening fence, 1-based
    code: str


def tier_blocks(text: str) -> list[Block]:
    """The page's bash and python blocks marked ``TIER_MARK``, in order."""
    lines = text.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        fence = re.fullmatch(r"```(bash|python)", lines[i].strip())
        if fence:
            start = i
            i += 1
            while lines[i].strip() != "```":
                i += 1
            if start and lines[start - 1].strip() == TIER_MARK:
                code = "\n".join(lines[start + 1 : i]) + "\n"
                blocks.append(Block(fence[1], start + 1, code))
        i += 1
    return blocks


def commands(code: str) -> list[str]:
    """A bash block's commands: continuation lines joined, comments and blanks dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", code)
    return [c.strip() for c in joined.splitlines() if c.strip() and not c.strip().startswith("#")]


@pytest.fixture(scope="session", autouse=True)
def offline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No Hub, a cache of this session's own, no store chosen by the caller's environment.
    Set before anything imports huggingface_hub (it reads these once)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
            patch.setenv(name, "1")
        patch.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf")))
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        for name in [n for n in os.environ if n.startswith("EVOPOLICY_")]:
            patch.delenv(name)
        yield


@dataclass
class Followed:
    """The page as a reader who ran it has it: the directory, the python namespace and
    what each command printed."""

    cwd: Path
    namespace: dict[str, Any]
    printed: dict[str, str]


@pytest.fixture(scope="module")
def tutorial(tmp_path_factory: pytest.TempPathFactory, offline: None) -> Followed:
    cwd = tmp_path_factory.mktemp("reader")
    followed = Followed(cwd, {"__name__": "__main__"}, {})
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("VIRTUAL_ENV", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        for block in tier_blocks(PAGE.read_text(encoding="utf-8")):
            if block.lang == "python":
                where = f"{PAGE.relative_to(ROOT)} line {block.line}"
                exec(compile(block.code, where, "exec"), followed.namespace)
                continue
            for command in commands(block.code):
                done = subprocess.run(
                    ["bash", "-c", command.removeprefix("uv run ")],
                    cwd=cwd,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=300,
                    check=False,
                )
                assert done.returncode == 0, f"{command!r}:\n{done.stdout}\n{done.stderr}"
                followed.printed[command] = done.stdout + done.stderr
    return followed


def trainer_runs(store_path: Path) -> list[RunSummary]:
    """The Runs of the store whose Agent was a trainer's model, oldest first."""
    store = open_store(store_path)
    try:
        summaries = [summarize(store.events, s.stream_id) for s in store.events.streams("run-")]
    finally:
        store.close()
    runs = [s for s in summaries if s.agent is not None and s.agent.provider == "trainer"]
    return sorted(runs, key=lambda s: s.created_at or 0)


def rollouts(trainer: Any) -> int:
    args = trainer.args
    return args.max_steps * args.per_device_train_batch_size * args.gradient_accumulation_steps


def check_groups(runs: list[RunSummary], steps: int, group: int) -> None:
    """Each trainer step made one group of Runs, which share the Run seed (so the Episodes);
    each step's seed is new."""
    by_step: dict[int, set[int]] = {}
    for run in runs:
        assert run.agent is not None and run.config is not None
        by_step.setdefault(run.agent.options["trainer_step"], set()).add(run.config["seed"])
    assert sorted(by_step) == list(range(steps))
    assert all(len(seeds) == 1 for seeds in by_step.values()), by_step
    assert len(set.union(*by_step.values())) == steps
    assert len(runs) == steps * group


def tool_answers(store_path: Path, run: RunSummary) -> list[tuple[str, str]]:
    """(tool, answer) of every call the Run's transcript records, in order."""
    store = open_store(store_path)
    try:
        events = [e.event() for e in store.events.read_stream(run.stream_id)]
    finally:
        store.close()
    return [
        (str(m.name), str(m.content))
        for event in events
        if isinstance(event, AgentMessages)
        for m in event.messages
        if m.role == "tool"
    ]


def check_verified(store_path: Path) -> None:
    store = open_store(store_path)
    try:
        report = verify_store(store)
    finally:
        store.close()
    assert report.ok, report


def test_the_page_has_the_tier_blocks() -> None:
    blocks = tier_blocks(PAGE.read_text(encoding="utf-8"))
    assert [b.lang for b in blocks].count("python") >= 2
    assert any("GRPOTrainer(" in b.code and "environment_factory" in b.code for b in blocks)
    assert commands("a \\\n  b\n# c\n\nd\n") == ["a b", "d"]


def test_the_tutorial_trains_through_the_environment(tutorial: Followed) -> None:
    """Every rollout of the page's two steps is a Run in the store, and the env's reward is
    what the trainer logged. A random model hands nothing off: -1 each."""
    trainer = tutorial.namespace["trainer"]
    store = tutorial.cwd / "evopolicy-store"
    runs = trainer_runs(store)
    assert len(runs) == rollouts(trainer) == 4
    check_groups(runs, steps=trainer.args.max_steps, group=trainer.args.num_generations)
    for run in runs:
        assert run.agent is not None and run.agent.model == "tiny-qwen3"
        assert run.terminal_reason == "agent_exited"
        assert run.submissions == {} and run.finish_candidates is None
    logged = [entry for entry in trainer.state.log_history if REWARD in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    assert [entry[REWARD] for entry in logged] == [-1.0, -1.0]
    assert [entry["tools/call_frequency"] for entry in logged] == [0.0, 0.0]
    assert [env.get_reward() for env in trainer.environments] == [-1.0, -1.0]
    check_verified(store)
    verified = next(out for command, out in tutorial.printed.items() if "record verify" in command)
    assert re.search(r"(?m)^ok: \d+ events", verified), verified


# --------------------------------------------------------------------------- scripted model

POLICY = (
    "def make_policy(context):\n    return Lean()\n\n\nclass Lean:\n"
    "    def act(self, observation):\n        return int(float(observation[2]) > 0)\n"
)
OUTSIDE = "../../etc/hostname"


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def scripted_turn(text: str, position: int) -> str:
    """What the scripted model says next, given the conversation so far (prompt, its own
    turns, the tool answers). Rollouts at even positions keep the initial program, odd ones
    rewrite it; turn 0 makes bad calls first, every one of which must come back as an answer."""
    turn = text.count("<|im_start|>assistant") - 1
    rewrite = "Plan: rewrite." in text if turn else position % 2 == 1
    if turn == 0:
        plan = "Plan: rewrite." if rewrite else "Plan: keep."
        bad = [
            call("read_file", path=OUTSIDE),
            call("submit", episodes="zero to two"),
            call("submit", episodes="0:99"),
        ]
        return plan + "\n" + "".join(bad)
    if turn == 1:
        edit = call("write_file", path="program/policy.py", content=POLICY) if rewrite else ""
        return call("list_files") + edit
    if turn == 2:
        return call("submit", episodes="0:2")
    if turn == 3:
        submission = re.findall(r'"submission_id": (\d+)', text)[-1]
        # Over the budget (2 of 4 left), then the handoff.
        return call("submit", episodes="0:4") + call("finish", candidates=[int(submission)])
    return "Done."


def scripted_trainer_class() -> type:
    from trl import GRPOTrainer

    class ScriptedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer whose model's text is scripted: only the generation step is replaced;
        parsing the tool calls, calling the environment and scoring are TRL's."""

        def _generate_single_turn(
            self,
            prompt_ids: list[list[int]],
            images: Any,
            multimodal_fields: Any,
            num_generations: int,
            has_tool_images: bool = False,
        ) -> tuple[list[list[int]], None]:
            tokenizer = self.processing_class
            completions = []
            for position, ids in enumerate(prompt_ids):
                reply = scripted_turn(tokenizer.decode(ids), position) + "<|im_end|>"
                completions.append(tokenizer.encode(reply, add_special_tokens=False))
            return completions, None

    return ScriptedGRPOTrainer


def test_scripted_tool_calls_reach_the_runs(tutorial: Followed, tmp_path: Path) -> None:
    """TRL's parsing and dispatch call the tools; the Runs hold what the calls did, bad calls
    are answers (never an exception), and keeping the initial program scores exactly 0."""
    from trl import GRPOConfig

    from evopolicygym.training import PolicyEvolutionEnv, TrainingProgress

    page = tutorial.namespace
    model = type(page["model"])(page["model"].config)  # fresh weights, the page's shape
    store = tmp_path / "scripted-store"
    progress = TrainingProgress()
    trainer = scripted_trainer_class()(
        model=model,
        processing_class=page["tokenizer"],
        train_dataset=page["dataset"],
        environment_factory=functools.partial(
            PolicyEvolutionEnv,
            store=str(store),
            model="scripted",
            progress=progress,
            episode_budget=4,
            validation_episodes=2,
            assessment_episodes=2,
        ),
        callbacks=[progress],
        args=GRPOConfig(
            output_dir=str(tmp_path / "out"),
            max_steps=2,
            per_device_train_batch_size=2,
            num_generations=2,
            # Room for every tool answer (a Feedback is long): the scripted model ends by itself.
            max_completion_length=8192,
            use_cpu=True,
            bf16=False,
            report_to="none",
            logging_steps=1,
            save_strategy="no",
        ),
    )
    trainer.train()

    runs = trainer_runs(store)
    check_groups(runs, steps=2, group=2)
    assert len(runs) == rollouts(trainer)
    kept = rewritten = 0
    for run in runs:
        assert run.terminal_reason == "finished" and run.terminal_handoff == "agent", run
        assert run.rejected_submissions == 3  # a bad selector, outside the pool, over budget
        assert list(run.submissions) == [1] and run.submissions[1].indices == [0, 1]
        assert run.finish_candidates == [1] and run.final_submission_id == 1
        assert run.assessment_score is not None
        answers = tool_answers(store, run)
        names = [name for name, _ in answers]
        assert names[:4] == ["read_file", "submit", "submit", "list_files"], names
        assert names[-3:] == ["submit", "submit", "finish"], names
        refused = [answer for name, answer in answers if answer.startswith("error:")]
        assert [name for name, answer in answers if answer.startswith("error:")] == [
            "read_file",
            "submit",
            "submit",
            "submit",
        ], answers
        assert OUTSIDE in refused[0]  # refused, the path named
        digest, _ = program_of(run, 1)
        if digest == run.initial_program_digest:
            kept += 1
            continue
        rewritten += 1
        opened = open_store(store)
        try:
            files = dict(opened.blobs.get_program(digest).files)
        finally:
            opened.close()
        assert files["policy.py"] == POLICY.encode()
    assert kept == rewritten == 2

    logged = [entry for entry in trainer.state.log_history if REWARD in entry]
    assert len(logged) == 2
    # Every call was dispatched (keep: 7 calls, rewrite: 8) and none raised in the trainer.
    assert [entry["tools/call_frequency"] for entry in logged] == [7.5, 7.5]
    assert [entry["tools/failure_frequency"] for entry in logged] == [0.0, 0.0]
    rewards = [env.get_reward() for env in trainer.environments]  # the last step's
    assert rewards[0] == 0.0  # the initial program against itself on the same Episodes
    assert -1.0 <= rewards[1] <= 1.0 and rewards[1] != 0.0
    assert logged[-1][REWARD] == pytest.approx(sum(rewards) / len(rewards))
    check_verified(store)

    # Training Runs are data: the second step's, exported as conversations.
    from datasets import load_dataset

    exported = tmp_path / "exported"
    command = ["evopolicy", "export", "--store", str(store), "--format", "sft", "--agent"]
    command += ["trainer", "--trainer-step", "1:2", "-o", str(exported)]
    subprocess.run([str(BIN / command[0]), *command[1:]], check=True, capture_output=True)
    sft = load_dataset(str(exported), "sft", split="train")
    assert sorted(sft["trainer_step"]) == [1, 1]
    second = {run.run_id for run in runs if run.agent and run.agent.options["trainer_step"] == 1}
    assert set(sft["run_id"]) == second
    for messages in sft["messages"]:
        called = [c["function"]["name"] for m in messages for c in m["tool_calls"] or []]
        assert called[:3] == ["read_file", "submit", "submit"] and called[-1] == "finish"
