"""PolicyEvolutionEnv: a Run per rollout, tools that answer and never raise, the reward.

The trainer is played by the test the way TRL's GRPOTrainer plays it (construct with no
arguments, ``reset(**row)``, call public methods as tools, ``get_reward()``); the real
trainer drives it in the trainer tier (tests/trainer).
"""

from __future__ import annotations

import functools
import inspect
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evopolicygym.records import open_store
from evopolicygym.records.events import AgentMessages, RunCreated
from evopolicygym.run import load_run
from evopolicygym.training import (
    NO_HANDOFF,
    PolicyEvolutionEnv,
    RowError,
    TrainingProgress,
    normalized_reward,
)
from evopolicygym.training import files as workspace_files
from evopolicygym.transcript import TRAINER_TOOLS
from tests.support.cli import cli, invoke
from tests.support.requires import require_group
from tests.support.training import cartpole_row

TOOLS = {"finish", "list_files", "read_file", "submit", "write_file"}


@pytest.fixture
def factory(tmp_path: Path) -> functools.partial[PolicyEvolutionEnv]:
    return functools.partial(
        PolicyEvolutionEnv,
        store=tmp_path / "store",
        model="tiny-test",
        validation_episodes=2,
        assessment_episodes=4,
        jobs=1,
    )


def run_streams(store: Any) -> list[str]:
    return sorted(info.stream_id for info in store.events.streams("run-"))


def events_of(store_dir: Path, run_id: str) -> list[Any]:
    return load_run(open_store(store_dir), run_id)[1]


# --- the TRL contract ------------------------------------------------------------------------


def test_public_methods_are_the_tools_reset_and_get_reward() -> None:
    # TRL turns every public function of the class into a tool.
    public = {
        name
        for name, _ in inspect.getmembers(PolicyEvolutionEnv, predicate=inspect.isfunction)
        if not name.startswith("_")
    }
    assert public == TOOLS | {"reset", "get_reward"}


def test_tool_schemas_are_what_trl_renders() -> None:
    require_group("interop", "transformers")
    from transformers import utils

    rendered = {
        name: utils.get_json_schema(getattr(PolicyEvolutionEnv, name)) for name in sorted(TOOLS)
    }
    assert rendered == {tool["function"]["name"]: tool for tool in TRAINER_TOOLS}


# --- a whole rollout -------------------------------------------------------------------------


def test_a_rollout_is_a_run_that_verifies(factory: Any, tmp_path: Path) -> None:
    env = factory()
    assert (env.run_id, env.done, env.tool_calls) == (None, True, 0)
    extra = env.reset(**cartpole_row())
    assert env.run_id is not None and not env.done
    # The row's system text is not this Run's: the Run's task text is appended.
    assert extra is not None and "submit(episodes)" in extra
    assert "./evopolicy session" not in extra
    listing = env.list_files()
    assert "TASK.md" in listing and "program/policy.py" in listing
    assert "evopolicy " not in listing.split("\n")[0]
    source = env.read_file("program/policy.py")
    assert "def make_policy" in source
    assert env.write_file("program/policy.py", source + "\n# edited\n").startswith("wrote ")
    reply = msgspec.json.decode(env.submit("0:2"))
    assert reply["submission_id"] == 1 and reply["budget_used"] == 2
    assert msgspec.json.decode(env.finish([1]))["accepted"] is True
    assert env.done and env.tool_calls == 5
    reward = env.get_reward()
    assert -1.0 <= reward <= 1.0
    assert env.get_reward() == reward  # read again, the same
    assert env.submit("0:1").startswith("error: session_closed")

    store = tmp_path / "store"
    verified = invoke("record", "verify", "--store", str(store))
    assert verified.exit_code == 0, verified.output
    (run,) = run_streams(open_store(store))
    events = load_run(open_store(store), run.removeprefix("run-"))[1]
    created = events[0]
    assert isinstance(created, RunCreated)
    assert created.agent.provider == "trainer" and created.agent.model == "tiny-test"
    assert created.agent.options == {"task_id": cartpole_row()["task_id"]}
    messages = [m for e in events if isinstance(e, AgentMessages) for m in e.messages]
    assert [m.role for m in messages[:2]] == ["system", "user"]
    assert "submit(episodes)" in messages[0].content
    calls = [c.name for m in messages for c in m.tool_calls]
    assert calls == ["list_files", "read_file", "write_file", "submit", "finish"]
    answers = [m for m in messages if m.role == "tool"]
    assert len(answers) == 5 and all(m.tool_call_id for m in answers)
    state = load_run(open_store(store), run.removeprefix("run-"))[0]
    assert state.finished == "finished" and state.handoff == "agent"
    assert state.submission(1) is not None
    assert state.submission(1).program_digest != created.initial_program_digest


def test_a_rollout_that_hands_nothing_off_gets_minus_one(factory: Any, tmp_path: Path) -> None:
    env = factory()
    env.reset(**cartpole_row())
    assert not env.submit("0:1").startswith("error")
    assert env.get_reward() == NO_HANDOFF == -1.0
    (run,) = run_streams(open_store(tmp_path / "store"))
    state = load_run(open_store(tmp_path / "store"), run.removeprefix("run-"))[0]
    assert state.finished == "agent_exited" and state.handoff is None


def test_reset_again_concludes_the_unscored_rollout(factory: Any, tmp_path: Path) -> None:
    env = factory()  # one pooled instance, reused across batches
    env.reset(**cartpole_row())
    env.reset(**cartpole_row())  # the first rollout's reward was never read
    assert env.finish([]).startswith("error")  # the new Run's session is open
    assert env.get_reward() == -1.0
    store = open_store(tmp_path / "store")
    finished = [load_run(store, s.removeprefix("run-"))[0].finished for s in run_streams(store)]
    assert finished == ["agent_exited", "agent_exited"]


# --- bad input is an answer ------------------------------------------------------------------


def test_bad_tool_calls_are_answers_never_exceptions(factory: Any, monkeypatch: Any) -> None:
    env = factory()
    assert env.submit("0:1").startswith("error: session_closed")  # before reset
    env.reset(**cartpole_row(budget=2))
    monkeypatch.setattr(workspace_files, "MAX_FILE_BYTES", 1000)
    answers = {
        "absolute": env.read_file("/etc/passwd"),
        "dotdot": env.read_file("../../etc/passwd"),
        "missing": env.read_file("program/nothing.py"),
        "not a string": env.read_file(None),  # type: ignore[arg-type]
        "read-only": env.write_file("TASK.md", "mine now"),
        "outside": env.write_file("../escape.py", "x"),
        "too big": env.write_file("program/big.py", "x" * 1001),
        "content not text": env.write_file("program/x.py", 5),  # type: ignore[arg-type]
        "selector": env.submit("zero"),
        "out of pool": env.submit("0:9"),
        "selector not text": env.submit(None),  # type: ignore[arg-type]
        "unknown id": env.finish([7]),
        "ids not ints": env.finish("1"),  # type: ignore[arg-type]
        "bools": env.finish([True]),
    }
    for what, answer in answers.items():
        assert isinstance(answer, str) and answer.startswith("error: "), (what, answer)
    assert (
        "invalid_request" in answers["selector"] and "unknown_submission" in answers["unknown id"]
    )
    assert not Path(env_workspace(env), "program", "big.py").exists()
    # Budget: 2 Episodes; the third is refused, nothing charged.
    assert not env.submit("0:2").startswith("error")
    assert env.submit("0:1").startswith("error: budget_exhausted")
    # A program that does not compile is the Host's program_invalid, recorded.
    env.write_file("program/policy.py", "def make_policy(:\n")
    assert env.submit("0:1").startswith("error: ")
    assert env.get_reward() == -1.0


def env_workspace(env: PolicyEvolutionEnv) -> Path:
    agent = env._agent  # the test looks inside: the workspace is the Host's
    assert agent is not None
    return agent.workspace


def test_a_bad_row_is_a_clear_error(factory: Any) -> None:
    env = factory()
    with pytest.raises(RowError, match="task_id"):
        env.reset(prompt="no task here")
    with pytest.raises(RowError, match="not the one the row was recorded on"):
        env.reset(**cartpole_row(environment_digest="sha256:" + "0" * 64))


# --- groups, steps, many instances -----------------------------------------------------------


def seeds_of(store_dir: Path) -> list[tuple[dict[str, Any], dict[str, int]]]:
    store = open_store(store_dir)
    out = []
    for stream in sorted(run_streams(store)):
        created = events_of(store_dir, stream.removeprefix("run-"))[0]
        out.append((dict(created.agent.options), dict(created.seeds)))
    return out


def test_a_group_shares_its_episodes_and_steps_do_not(factory: Any, tmp_path: Path) -> None:
    progress = TrainingProgress()
    make = functools.partial(factory, progress=progress)
    envs = [make(), make()]
    progress.on_step_begin(None, type("State", (), {"global_step": 3})(), None)
    for env in envs:  # two generations of one row in one step
        env.reset(**cartpole_row())
    for env in envs:
        env.get_reward()
    progress.on_step_begin(None, type("State", (), {"global_step": 4})(), None)
    envs[0].reset(**cartpole_row())
    envs[0].get_reward()
    runs = sorted(seeds_of(tmp_path / "store"), key=lambda r: r[0]["trainer_step"])
    assert [r[0]["trainer_step"] for r in runs] == [3, 3, 4]
    assert runs[0][1] == runs[1][1]  # the group: the same pool, validation, assessment
    assert runs[2][1]["pool"] != runs[0][1]["pool"]


def test_many_instances_in_one_process(factory: Any, tmp_path: Path) -> None:
    envs = [factory() for _ in range(3)]
    rewards: list[float] = []

    def rollout(env: PolicyEvolutionEnv, finish: bool) -> None:
        env.reset(**cartpole_row())
        env.submit("0:1")
        if finish:
            env.finish([1])
        rewards.append(env.get_reward())

    threads = [threading.Thread(target=rollout, args=(env, i != 1)) for i, env in enumerate(envs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(rewards) == 3 and sorted(rewards)[0] == -1.0
    assert all(-1.0 <= r <= 1.0 for r in rewards)
    assert invoke("record", "verify", "--store", str(tmp_path / "store")).exit_code == 0


# --- a trainer that dies ---------------------------------------------------------------------


def test_a_dead_trainers_run_is_closed_by_resume(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})
        from tests.support.training import cartpole_row
        from evopolicygym.training import PolicyEvolutionEnv
        env = PolicyEvolutionEnv(store={str(tmp_path / "store")!r}, jobs=1)
        env.reset(**cartpole_row())
        print(env.submit("0:2")[:1], flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr
    store = tmp_path / "store"
    resumed = cli("resume", "latest", "--store", str(store))
    assert "cannot be started again" in resumed.stderr
    assert resumed.code != 0  # no handoff: the Run did not succeed
    (stream,) = run_streams(open_store(store))
    state = load_run(open_store(store), stream.removeprefix("run-"))[0]
    assert state.finished == "agent_failed" and state.budget_used == 2
    assert invoke("record", "verify", "--store", str(store)).exit_code == 0


# --- the reward's rule -----------------------------------------------------------------------

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(finite, finite, finite)
def test_normalized_reward_is_bounded_and_signed(a: float, i: float, r: float) -> None:
    up = normalized_reward(a, i, r, "maximize")
    down = normalized_reward(a, i, r, "minimize")
    assert -1.0 <= up <= 1.0 and -1.0 <= down <= 1.0
    assert math.isclose(up, -down, abs_tol=0.0) or up == -down
    if a == i:
        assert up == 0.0
    if a > i:
        assert up > 0.0 or abs(i - r) > 1e300


def test_normalized_reward_values() -> None:
    assert normalized_reward(150.0, 100.0, 0.0, "maximize") == 0.5
    assert normalized_reward(300.0, 100.0, 0.0, "maximize") == 1.0
    assert normalized_reward(-10.0, -20.0, -40.0, "minimize") == -0.5
    assert normalized_reward(5.0, 5.0, 5.0, "maximize") == 0.0
    assert normalized_reward(6.0, 5.0, 5.0, "maximize") == 1.0  # |I - R| = 0: eps, clipped


def test_the_reward_normalizes_against_initial_and_random(factory: Any) -> None:
    env = factory()
    env.reset(**cartpole_row())
    env.submit("0:1")  # the initial program, unchanged
    env.finish([1])
    assert env.get_reward() == 0.0  # it is the initial program: A == I
    env.reset(**cartpole_row())
    env.write_file(
        "program/policy.py",
        "class P:\n    def act(self, obs):\n        return 0\n\n"
        "def make_policy(context):\n    return P()\n",
    )
    env.submit("0:1")
    env.finish([1])
    assert env.get_reward() < 0.0  # always pushing left: worse than the baseline


def test_env_module_stays_importable_without_trl() -> None:
    code = "import evopolicygym.training.env, sys; print('trl' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ}
    )
    assert out.stdout.strip() == "False", out.stderr


# --- rows as the exporter writes them --------------------------------------------------------


def test_rows_of_a_recorded_run_start_runs(tmp_path: Path, monkeypatch: Any) -> None:
    """A CLI Run exported as `rl_tools` and `rl`, loaded with `datasets`, every column passed
    to reset as TRL does: the `rl_tools` prompt already holds the Run's task text (reset adds
    nothing), the `rl` one gets the tool form appended."""
    import datasets

    from evopolicygym_exporters import ExportOptions, export

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")
    store = tmp_path / "store"
    recorded = cli(
        "run", "--benchmark", "cartpole", "--agent", "reference", "--budget", "4",
        "--validation-episodes", "2", "--assessment-episodes", "2", "--max-candidates", "2",
        "--store", str(store),
    )  # fmt: skip
    assert recorded.code == 0, recorded.stderr
    with open_store(store) as opened:
        export(opened, ["rl", "rl_tools"], tmp_path / "dataset", ExportOptions(test_fraction=0))
    env = PolicyEvolutionEnv(store=store, validation_episodes=2, assessment_episodes=2, jobs=1)
    (tools_row,) = datasets.load_dataset(str(tmp_path / "dataset"), "rl_tools", split="train")
    assert env.reset(**tools_row) is None
    assert "def make_policy" in env.read_file("program/policy.py")
    assert env.get_reward() == -1.0
    (rl_row,) = datasets.load_dataset(str(tmp_path / "dataset"), "rl", split="train")
    extra = env.reset(**rl_row)
    assert extra is not None and "submit(episodes)" in extra
    assert _system(tools_row) in extra
    env.get_reward()


def _system(row: dict[str, Any]) -> str:
    return next(m["content"] for m in row["prompt"] if m["role"] == "system")
