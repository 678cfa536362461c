"""Training Runs are data: the ``rl_tools`` config a trainer's environment reads its prompts
from, and the Runs a trainer's model made exported, filtered by trainer step and model.

Two real CartPole Runs of one task: one by the reference agent, one recorded under the
identity a trainer's environment gives its Runs (provider ``trainer``, a model, the
trainer's step and the ``rl`` row's task), played by the reference agent's program so
that it is quick and certain to hand off. Its id sorts first, so it is the task's first
Run, the one ``rl`` takes its prompt from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pytest
from click.testing import CliRunner

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity, launch_for
from evopolicygym.cli.group import main
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.verify import verify_store
from evopolicygym.run import RunHost, create_run
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.replay import replay_run
from evopolicygym.transcript import KICKOFF, TOOLS_NOTE, AgentIdentity, task_files
from evopolicygym_exporters import ExportOptions, RunFilter, export, read_histories
from evopolicygym_exporters.rl import skills_in
from evopolicygym_exporters.tasks import task_id

pytestmark = pytest.mark.timeout(240)

TRAINER_RUN = "a-trainer"  # sorts before the reference Run: the task's first
REFERENCE_RUN = "b-reference"


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # datasets reads its cache location at import: patch the value it uses.
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


class ReferencePlays(ProviderLauncher):
    """Whatever the Run's agent identity, the reference agent's program does the work."""

    def launch(self, agent: AgentIdentity, task: str) -> Any:
        return launch_for(agent_identity("reference"), task)


def _config(seed: int) -> RunConfig:
    return RunConfig(
        episode_budget=6,
        seed=seed,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=2),
        assessment=AssessmentConfig(episodes=2),
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("training") / "store"
    with open_store(root, create=True) as opened:
        create_run(
            opened, "cartpole", _config(1), agent_identity("reference"), run_id=REFERENCE_RUN
        )
        RunHost(opened, REFERENCE_RUN, launcher=ProviderLauncher()).drive()
        (history,) = read_histories(opened, RunFilter())
        trainer = AgentIdentity(
            name="trainer",
            provider="trainer",
            model="tiny",
            options={"trainer_step": 3, "task_id": task_id(history)},
        )
        create_run(opened, "cartpole", _config(2), trainer, run_id=TRAINER_RUN)
        RunHost(opened, TRAINER_RUN, launcher=ReferencePlays()).drive()
        yield opened


def load(out: Path, config: str) -> list[dict[str, Any]]:
    loaded = datasets.load_dataset(str(out), config)
    return [row for split in sorted(loaded) for row in loaded[split]]


def run_export(store: Store, out: Path, formats: list[str], **options: Any) -> Any:
    return export(store, formats, out, ExportOptions(**options))


def _recorded_task(store: Store, out: Path) -> dict[str, str]:
    """Each Run's task text as the Host gave it (the system message its ``sft`` row opens with)."""
    run_export(store, out, ["sft"])
    return {row["run_id"]: row["messages"][0]["content"] for row in load(out, "sft")}


# --------------------------------------------------------------------------- rl_tools


def test_rl_tools_prompts_in_tool_form_and_rl_keeps_the_shell_form(
    store: Store, tmp_path: Path
) -> None:
    told = _recorded_task(store, tmp_path / "sft")
    assert "submit(episodes)" in told[TRAINER_RUN]  # the Host told the trainer's model so
    assert "./evopolicy session" in told[REFERENCE_RUN]
    out = tmp_path / "out"
    report = run_export(store, out, ["rl", "rl_tools"])
    assert report.runs == 2
    (rl,) = load(out, "rl")
    (tools,) = load(out, "rl_tools")
    assert rl["runs"] == tools["runs"] == 2  # one task
    assert [m["role"] for m in tools["prompt"]] == ["system", "user"]
    system, user = (m["content"] for m in tools["prompt"])
    for call in ("submit(episodes)", "finish(candidates)", "write_file(path, content)"):
        assert call in system
    assert "./evopolicy session" not in system and "evopolicy session" not in user
    # The task text exactly as the Host writes it for a trainer's model.
    assert system == told[TRAINER_RUN]
    # The kickoff and the initial program, as rl's; never the chat agent's tool note.
    assert user == rl["prompt"][1]["content"]
    assert user.startswith(KICKOFF + "\n\nThe initial program:\n\n### policy.py\n")
    assert TOOLS_NOTE.split(".")[0] not in user
    # rl keeps the shell form although the task's first Run was a trainer's: the text the
    # reference agent was given.
    assert rl["prompt"][0]["content"] == told[REFERENCE_RUN]
    assert "submit(episodes)" not in rl["prompt"][0]["content"]
    # Every other column is rl's.
    assert {k: v for k, v in tools.items() if k != "prompt"} == {
        k: v for k, v in rl.items() if k != "prompt"
    }
    assert tools["task_id"] == rl["task_id"]
    card = (out / "README.md").read_text()
    assert "## Training in the loop (`rl_tools`)" in card
    assert "clip(d * (A - I) / max(|I - R|, 1e-9), -1, 1)" in card


def test_rl_from_reference_runs_alone_is_the_recorded_task(store: Store, tmp_path: Path) -> None:
    told = _recorded_task(store, tmp_path / "sft")
    out = tmp_path / "out"
    run_export(store, out, ["rl", "rl_tools"], run_filter=RunFilter(agent=("reference",)))
    (rl,) = load(out, "rl")
    (tools,) = load(out, "rl_tools")
    assert rl["runs"] == 1
    assert rl["prompt"][0]["content"] == told[REFERENCE_RUN]
    # Made in tool form from the reference Run's config: what the trainer's Run was told.
    assert tools["prompt"][0]["content"] == told[TRAINER_RUN]
    assert "./evopolicy session" not in tools["prompt"][0]["content"]


def test_skills_listed_in_a_task_are_listed_again_in_the_other_form(store: Store) -> None:
    history = next(read_histories(store, RunFilter(agent=("reference",))))
    spec, config = history.created.benchmark_spec, history.created.config
    skills = [("tuning", "How to tune a gain — carefully."), ("notes", "")]
    cli = task_files(spec, config, skills)[0]
    assert skills_in(cli) == skills
    assert skills_in(task_files(spec, config)[0]) == []
    tools = task_files(spec, config, skills_in(cli), session="tools")[0]
    assert "`skills/tuning/SKILL.md` — How to tune a gain — carefully." in tools
    assert "submit(episodes)" in tools


# --------------------------------------------------------------------------- training Runs


def test_a_training_run_verifies_and_replays(store: Store) -> None:
    report = verify_store(store)
    assert report.ok, [p.describe() for p in report.problems]
    replay = replay_run(store, TRAINER_RUN)
    assert replay.ok, replay.problems
    assert replay.status == "finished" and replay.submissions > 0


def test_training_runs_carry_their_trainer_step(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    run_export(store, out, ["sft", "distill", "programs"])
    sft = {row["run_id"]: row for row in load(out, "sft")}
    assert sft[TRAINER_RUN]["trainer_step"] == 3
    assert sft[REFERENCE_RUN]["trainer_step"] is None
    agent = sft[TRAINER_RUN]["agent"]
    assert (agent["name"], agent["provider"], agent["model"]) == ("trainer", "trainer", "tiny")
    assert agent["options"]["trainer_step"] == 3
    assert agent["options"]["task_id"] == sft[TRAINER_RUN]["task_id"]  # the row it was made from
    distill = {row["run_id"]: row["trainer_step"] for row in load(out, "distill")}
    assert distill == {TRAINER_RUN: 3, REFERENCE_RUN: None}
    programs = load(out, "programs")
    steps = {(row["run_id"], row["trainer_step"]) for row in programs}
    assert steps == {(TRAINER_RUN, 3), (REFERENCE_RUN, None)}


def _cli_runs(store: Store, out: Path, *args: str) -> tuple[int, set[str], str]:
    result = CliRunner().invoke(
        main,
        ["export", "--format", "sft,programs", "-o", str(out), "--store", str(store.path), *args],
    )
    if result.exit_code != 0:
        return result.exit_code, set(), result.output
    runs = {row["run_id"] for row in load(out, "sft")}
    assert runs == {row["run_id"] for row in load(out, "programs")}
    return 0, runs, result.output


def test_export_filters_by_trainer_step_and_model(store: Store, tmp_path: Path) -> None:
    def runs(name: str, *args: str) -> set[str]:
        code, found, output = _cli_runs(store, tmp_path / name, *args)
        assert code == 0, output
        return found

    assert runs("all") == {TRAINER_RUN, REFERENCE_RUN}
    assert runs("3-4", "--trainer-step", "3:4") == {TRAINER_RUN}
    assert runs("3", "--trainer-step", "3") == {TRAINER_RUN}
    assert runs("from-0", "--trainer-step", "0:") == {TRAINER_RUN}
    assert runs("tiny", "--agent", "tiny") == {TRAINER_RUN}
    assert runs("trainer", "--agent", "trainer") == {TRAINER_RUN}
    assert runs("reference", "--agent", "reference") == {REFERENCE_RUN}
    # Half-open: 0:3 stops before step 3, and a Run without a step is never in a range.
    for name, steps in (("0-2", "0:2"), ("0-3", "0:3"), ("from-4", "4:")):
        code, found, output = _cli_runs(store, tmp_path / name, "--trainer-step", steps)
        assert code == 1 and found == set(), output
        assert "no finished Run in the store matches the filters" in output
    card = (tmp_path / "3-4" / "README.md").read_text()
    assert "trainer_step: [3, 4]" in card


@pytest.mark.parametrize("steps", ["5:5", "7:2", ":", "-1:3", "a:b", "1.5"])
def test_a_bad_trainer_step_range_is_a_usage_error(
    store: Store, tmp_path: Path, steps: str
) -> None:
    code, _, output = _cli_runs(store, tmp_path / "out", "--trainer-step", steps)
    assert code == 2, output
    assert "--trainer-step" in output
    assert not (tmp_path / "out").exists()


def test_export_options_refuse_an_empty_step_range() -> None:
    with pytest.raises(ValueError, match="trainer steps"):
        ExportOptions(run_filter=RunFilter(trainer_step=(3, 3)))
    with pytest.raises(ValueError, match="trainer steps"):
        ExportOptions(run_filter=RunFilter(trainer_step=(-1, None)))
    assert ExportOptions(run_filter=RunFilter(trainer_step=(None, 4))).run_filter.trainer_step
