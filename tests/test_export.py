"""Exporters: every format's rows, filters, splits, fingerprints, the leakage guard, the CLI.

Synthetic recorded Runs (tests/support/runlogs.py) pin the semantics of each format;
one real Run of the reference agent on CartPole checks that what the Host
records exports whole.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import datasets
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from evopolicygym.cli.group import main
from evopolicygym.program import Program
from evopolicygym.records.events import AgentMessages, EpisodeCompleted, Event
from evopolicygym.records.location import Store, open_store
from evopolicygym.transcript import KICKOFF, AgentIdentity
from evopolicygym_exporters import EXPORTERS, ExportOptions, RunFilter, export
from evopolicygym_exporters.programs import edit_kind
from evopolicygym_exporters.writer import split_of
from tests.support.blobdamage import lose_blob
from tests.support.runlogs import (
    CANARY,
    CANARY_SEEDS,
    Planned,
    SynthRun,
    files,
    policy_source,
    standard_run,
    write_run,
)

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # datasets reads its cache location at import: patch the value it uses.
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-cache")


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


def load(out: Path, config: str) -> list[dict[str, Any]]:
    loaded = datasets.load_dataset(str(out), config)
    return [row for split in sorted(loaded) for row in loaded[split]]


def run_export(store: Store, out: Path, formats: list[str] | None = None, **options: Any) -> Any:
    return export(store, formats or list(EXPORTERS), out, ExportOptions(**options))


# --------------------------------------------------------------------------- the leakage guard


def _strings(value: Any) -> list[str]:
    return [json.dumps(value, default=str, sort_keys=True)]


@pytest.mark.parametrize("inline_pool", [False, True], ids=["pool-blob", "pool-inline"])
def test_no_held_out_or_private_value_reaches_any_training_column(
    store: Store, tmp_path: Path, inline_pool: bool
) -> None:
    """Canaries in the pool's scenarios, held-out feedback and failures, and distinct seeds in
    every seed domain: none reaches a training column; held-out ones reach no column at all.
    The pool as the Host keeps it (a blob) and as older Runs hold it (inline in RunCreated)."""
    write_run(store, standard_run("alpha", inline_pool=inline_pool))
    write_run(
        store,
        standard_run(
            "beta", agent=AgentIdentity(name="other", provider="command"), inline_pool=inline_pool
        ),
    )
    held_out = [str(CANARY_SEEDS["validation"]), str(CANARY_SEEDS["assessment"]), CANARY]
    episode_seeds = [str(CANARY_SEEDS["pool"] * 10 + i) for i in range(120)]
    for per_turn in (False, True):
        out = tmp_path / f"out-{per_turn}"
        report = run_export(store, out, per_turn=per_turn, test_fraction=0.5)
        for name, entry in report.configs.items():
            rows = load(out, name)
            assert rows, name
            for row in rows:
                whole = _strings(row)[0]
                for secret in held_out + episode_seeds:
                    assert secret not in whole, (name, secret)
                training = json.dumps({c: row[c] for c in entry["training_columns"]}, default=str)
                assert str(CANARY_SEEDS["pool"]) not in training, name
        # The card and manifest name no secret either.
        for path in (out / "README.md", out / "export.json"):
            text = path.read_text()
            assert not any(secret in text for secret in held_out + episode_seeds)
    # The pool seed is in rl's reward columns only: what a reward needs to replay train Episodes.
    (task,) = load(tmp_path / "out-False", "rl")
    assert task["train_pool_seeds"] == [CANARY_SEEDS["pool"]]


SECRETS = (
    "sk-proj-Zx9Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z",  # an OpenAI key in a program's comment
    "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",  # a Hugging Face token in a file of its own
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",  # a GitHub token in the initial program
)


def test_a_planted_secret_appears_in_no_export(store: Store, tmp_path: Path) -> None:
    """Secrets in a program comment, a file of their own and the initial program: in no
    value of any config (whole and per turn), the card or the manifest; rows holding one
    say so, and digests still name the programs as submitted."""
    commented = {"policy.py": f"# my key: {SECRETS[0]}\n" + policy_source(0.7)}
    with_file = {"policy.py": policy_source(0.9), "creds.env": f"HF_TOKEN={SECRETS[1]}\n"}
    run = SynthRun(
        run_id="alpha",
        initial={"policy.py": policy_source(0.0) + f"# token {SECRETS[2]}\n"},
        submissions=[
            Planned(files(0.5), [0, 1], [1.0, 2.0]),
            Planned(commented, [0, 1], [3.0, 4.0]),
            Planned(with_file, [0, 1], [5.0, 6.0]),
            Planned(files(0.6), [0, 1], [0.0, 0.5]),
        ],
        candidates=[3],
    )
    write_run(store, run)  # as recorded (the Host would have redacted its transcript too)
    exported = []
    for per_turn in (False, True):
        out = tmp_path / f"out-{per_turn}"
        report = run_export(store, out, per_turn=per_turn)
        for name in report.configs:
            rows = load(out, name)
            assert rows, name
            exported += [(name, row) for row in rows]
        for path in (out / "README.md", out / "export.json"):
            assert not any(secret in path.read_text() for secret in SECRETS)
    for name, row in exported:
        text = json.dumps(row, default=str)
        assert not [secret for secret in SECRETS if secret in text], name
    programs = {r["submission_id"]: r for name, r in exported if name == "programs"}
    # 1's diff removes the initial program's token line; 4's parent is 1: nothing to redact.
    assert [programs[i]["redacted"] for i in (1, 2, 3, 4)] == [True, True, True, False]
    assert programs[4]["parent_submission_id"] == 1
    assert programs[2]["files"][0]["content"].startswith("# my key: [REDACTED]\n")
    assert {f["path"]: f["content"] for f in programs[3]["files"]}[
        "creds.env"
    ] == "HF_TOKEN=[REDACTED]\n"
    assert "[REDACTED]" in programs[2]["diff"]
    assert programs[2]["program_digest"] == Program.from_files(commented).digest  # as submitted
    dpo = [r for name, r in exported if name == "dpo"]
    involved = [r for r in dpo if {r["chosen_submission_id"], r["rejected_submission_id"]} & {2, 3}]
    assert involved and all(r["redacted"] for r in involved)
    rl = next(r for name, r in exported if name == "rl")
    assert rl["redacted"] and "[REDACTED]" in rl["initial_program"][0]["content"]
    assert all(
        r["redacted"] for name, r in exported if name in ("sft", "distill") and "messages" in r
    )
    assert any(r["redacted"] for name, r in exported if name == "events")
    assert not any(
        r["redacted"] for name, r in exported if name == "events" and r["type"] == "RunFinished"
    )


# --------------------------------------------------------------------------- sft and distill


def test_sft_is_one_conversation_per_run_with_outcome_columns(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    failed = standard_run("beta", reason="assessment_failed", assessment_score=None)
    write_run(store, failed)
    run_export(store, tmp_path / "out", ["sft"])
    rows = {r["run_id"]: r for r in load(tmp_path / "out", "sft")}
    alpha = rows["alpha"]
    assert "prompt" not in alpha
    roles = [m["role"] for m in alpha["messages"]]
    assert roles[:3] == ["system", "user", "assistant"]
    assert alpha["messages"][0]["content"].startswith("# Task: evolve a policy for `toy-counter`")
    assert alpha["messages"][1]["content"] == KICKOFF
    calls = [c for m in alpha["messages"] for c in m["tool_calls"] or []]
    assert calls[0]["function"] == {"name": "read_file", "arguments": {"path": "TASK.md"}}
    answered = {m["tool_call_id"] for m in alpha["messages"] if m["role"] == "tool"}
    assert {c["id"] for c in calls} == answered  # every call has its result
    assert {t["function"]["name"] for t in alpha["tools"]} == {"read_file", "write_file", "bash"}
    assert alpha["num_submissions"] == 5
    assert alpha["best_train_score"] == 9.0
    assert alpha["final_score"] == 42.0 and alpha["success"] is True
    assert alpha["terminal_reason"] == "finished"
    assert alpha["agent"] == {
        "name": "reference",
        "provider": "reference",
        "model": None,
        "options": {},
    }
    assert rows["beta"]["success"] is False and rows["beta"]["final_score"] is None

    run_export(store, tmp_path / "ok", ["sft"], success_only=True)
    assert [r["run_id"] for r in load(tmp_path / "ok", "sft")] == ["alpha"]


def test_per_turn_rows_end_at_each_assistant_turn(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    run_export(store, tmp_path / "whole", ["sft"])
    run_export(store, tmp_path / "turns", ["sft"], per_turn=True)
    (whole,) = load(tmp_path / "whole", "sft")
    turns = load(tmp_path / "turns", "sft")
    messages = whole["messages"]
    assistant = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    assert len(turns) == len(assistant)
    for row, i in zip(sorted(turns, key=lambda r: r["turn"]), assistant, strict=True):
        assert "messages" not in row
        assert row["prompt"] == messages[:i]
        assert row["completion"] == [messages[i]]


def test_distill_keeps_the_teacher_and_its_token_usage(store: Store, tmp_path: Path) -> None:
    teacher = AgentIdentity(
        name="big", provider="chat", model="teacher-70b", options={"effort": "high"}
    )
    write_run(store, standard_run("alpha", agent=teacher))
    write_run(store, standard_run("beta"))
    run_export(store, tmp_path / "out", ["distill"], teacher=("teacher-70b",))
    (row,) = load(tmp_path / "out", "distill")
    assert row["run_id"] == "alpha"
    assert row["teacher"] == {
        "name": "big",
        "provider": "chat",
        "model": "teacher-70b",
        "options": {"effort": "high"},
    }
    calls = sum(len(m["tool_calls"] or []) for m in row["messages"])
    assert row["teacher_usage"] == {
        "input_tokens": 100 * calls,
        "output_tokens": 20 * calls,
        "cached_tokens": 0,
    }


# --------------------------------------------------------------------------- dpo


def test_dpo_pairs_only_matched_evidence_with_the_better_program_chosen(
    store: Store, tmp_path: Path
) -> None:
    write_run(store, standard_run("alpha"))
    run_export(store, tmp_path / "out", ["dpo"])
    rows = load(tmp_path / "out", "dpo")
    pairs = {(r["chosen_submission_id"], r["rejected_submission_id"]): r for r in rows}
    # 1, 2 and 5 share indices [0, 1, 2]; 3 stands alone; 4 failed.
    assert set(pairs) == {(2, 1), (2, 5), (1, 5)}
    widest = rows[0]
    assert (widest["chosen_submission_id"], widest["rejected_submission_id"]) == (2, 5)
    assert (
        widest["margin"] == 5.0
        and widest["chosen_score"] == 5.0
        and widest["rejected_score"] == 0.0
    )
    assert widest["indices"] == [0, 1, 2]
    for row in rows:
        assert row["prompt"][-1]["role"] in ("user", "tool")
        (chosen,) = row["chosen"]
        (rejected,) = row["rejected"]
        assert chosen["role"] == rejected["role"] == "assistant"
        assert chosen["tool_calls"] != rejected["tool_calls"]
        assert all(c["function"]["name"] == "write_file" for c in chosen["tool_calls"])
    # The pair decided at submission 2 sees submission 1's result, not 2's own edit.
    (later,) = [
        r for r in rows if {r["chosen_submission_id"], r["rejected_submission_id"]} == {2, 5}
    ]
    context = json.dumps(later["prompt"])
    assert "gain = 0.5" in context and "gain = 0.7" not in context
    assert later["prompt"][-1]["content"] == '{"submission_id": 1, "score": 2.0}'  # 1's answer
    chosen_text = later["chosen"][0]["tool_calls"][0]["function"]["arguments"]["content"]
    assert "gain = 0.7" in chosen_text

    run_export(store, tmp_path / "wide", ["dpo"], dpo_min_margin=3.5)
    assert {
        (r["chosen_submission_id"], r["rejected_submission_id"])
        for r in load(tmp_path / "wide", "dpo")
    } == {(2, 5)}
    run_export(store, tmp_path / "one", ["dpo"], dpo_max_pairs=1)
    assert len(load(tmp_path / "one", "dpo")) == 1


def test_dpo_follows_the_benchmarks_direction(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha", direction="minimize"))
    run_export(store, tmp_path / "out", ["dpo"])
    rows = load(tmp_path / "out", "dpo")
    assert all(r["chosen_score"] < r["rejected_score"] for r in rows), [
        (r["chosen_score"], r["rejected_score"], r["score_direction"]) for r in rows
    ]
    assert {(r["chosen_submission_id"], r["rejected_submission_id"]) for r in rows} == {
        (5, 2),
        (5, 1),
        (1, 2),
    }


# ------------------------------------------------------------------- rl, rollouts, programs, events


def test_rl_is_one_row_per_task(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    write_run(store, standard_run("beta"))
    write_run(store, standard_run("gamma", benchmark_id="other-bench"))
    baseline = standard_run("delta")
    baseline.submissions.insert(0, Planned(dict(baseline.initial), [0, 1], [2.0, 4.0]))
    write_run(store, baseline)
    run_export(store, tmp_path / "out", ["rl"])
    rows = {r["benchmark_id"]: r for r in load(tmp_path / "out", "rl")}
    assert set(rows) == {"toy-counter", "other-bench"}
    task = rows["toy-counter"]
    assert task["runs"] == 3 and rows["other-bench"]["runs"] == 1
    assert [m["role"] for m in task["prompt"]] == ["system", "user"]
    assert "gain = 0.0" in task["prompt"][1]["content"]  # the initial program
    assert task["initial_program"] == [
        {"path": "policy.py", "content": policy_source(0.0), "size": len(policy_source(0.0))}
    ]
    assert task["baseline_score"] == 3.0 and task["best_known_score"] == 9.0
    # On which Episodes: delta's Submission of the initial program, on its pool.
    assert task["train_indices"] == [0, 1] and task["baseline_pool_seed"] == CANARY_SEEDS["pool"]
    assert task["score_direction"] == "maximize" and task["train_split"] == "train"
    assert task["budget"]["episode_budget"] == 8 and "seed" not in task["budget"]


def test_rollouts_hold_whole_recorded_episodes(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    run_export(store, tmp_path / "out", ["rollouts"])
    rows = load(tmp_path / "out", "rollouts")
    assert len(rows) == 3 + 3 + 2 + 3  # every Episode of the published Submissions
    row = rows[0]
    assert row["observations"] == [[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [3.0, 0.0]]
    assert row["actions"] == [1, 1, 0]
    assert row["rewards"] == [1.0, 0.0, 0.0] and sum(row["rewards"]) == row["total_reward"]
    assert row["terminations"] == [False, False, True] and row["truncations"] == [False] * 3
    assert row["complete"] is True and row["steps"] == 3


def test_programs_classify_edits_and_track_the_best(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    run_export(store, tmp_path / "out", ["programs"])
    rows = sorted(load(tmp_path / "out", "programs"), key=lambda r: r["submission_id"])
    assert [r["edit_kind"] for r in rows] == [
        "parametric",
        "parametric",
        "parametric",
        "parametric",
        "synthesis",
    ]
    assert [r["best_so_far"] for r in rows] == [True, True, True, False, False]
    # 2 ran on 1's indices; 3 on others (its best is over unmatched evidence); 4 failed.
    assert [r["best_so_far_basis"] for r in rows] == [
        "first",
        "matched",
        "unmatched",
        None,
        "unmatched",
    ]
    assert [r["best_so_far_matched"] for r in rows] == [None, True, None, None, False]
    assert [r["status"] for r in rows] == ["published"] * 3 + ["failed", "published"]
    assert [r["selected"] for r in rows] == [False, True, False, False, False]
    assert rows[0]["previous_submission_id"] is None and rows[1]["previous_submission_id"] == 1
    assert "-    gain = 0.5\n+    gain = 0.7\n" in rows[1]["diff"]
    assert rows[3]["score"] is None
    # 5 is 1's program plus a helper: 1 is its parent (4, the previous one, has another gain).
    assert [r["parent_submission_id"] for r in rows] == [None, 1, 2, 3, 1]
    assert (
        rows[4]["previous_submission_id"] == 4
        and rows[4]["parent_digest"] == rows[0]["program_digest"]
    )
    assert rows[4]["parent_distance"] == 4
    assert not [
        line
        for line in rows[4]["diff"].splitlines()
        if line.startswith("-") and not line.startswith("---")
    ]
    assert rows[0]["parent_digest"] == Program.from_files(standard_run("x").initial).digest
    # Matched comparisons with the parent: on the indices both ran, null where none.
    assert [r["matched_indices"] for r in rows] == [[], [0, 1, 2], [], [], [0, 1, 2]]
    assert (
        rows[1]["matched_score"],
        rows[1]["parent_matched_score"],
        rows[1]["matched_delta"],
    ) == (5.0, 2.0, 3.0)
    assert (
        rows[4]["matched_score"],
        rows[4]["parent_matched_score"],
        rows[4]["matched_delta"],
    ) == (0.0, 2.0, -2.0)
    assert [r["matched_better"] for r in rows] == [None, True, None, None, False]
    assert [r["budget_spent"] for r in rows] == [3, 3, 2, 1, 3]
    assert [r["budget_used"] for r in rows] == [3, 6, 8, 9, 12]


def test_a_parent_the_agent_names_is_the_parent(store: Store, tmp_path: Path) -> None:
    """An Agent that says what it edited (submit --parent) is taken at its word: the diff
    and the edit kind are against that program, even where another is nearer."""
    run = standard_run("stated")
    run.submissions[2].parent = 1  # 3 says it edited 1 (the nearest is 2)
    run.submissions[4].parent = 0  # 5 says it edited the initial program
    write_run(store, run)
    run_export(store, tmp_path / "out", ["programs"])
    rows = sorted(load(tmp_path / "out", "programs"), key=lambda r: r["submission_id"])
    assert [r["parent_basis"] for r in rows] == [
        "nearest",
        "nearest",
        "stated",
        "nearest",
        "stated",
    ]
    assert [r["parent_submission_id"] for r in rows] == [None, 1, 1, 3, None]
    assert rows[4]["parent_digest"] == Program.from_files(run.initial).digest
    assert "-    gain = 0.5\n+    gain = 0.9\n" in rows[2]["diff"]  # against 1, not 2 (0.7)


def test_the_parent_is_the_nearest_earlier_program_and_compares_on_shared_indices(
    store: Store, tmp_path: Path
) -> None:
    """An agent that keeps its best and tries variations of it: the parent of an edit is
    the program it changed, not the previous Submission; scores compare on shared indices."""
    variant = {"policy.py": policy_source(0.5, structural=True)}
    run = SynthRun(
        run_id="keeper",
        submissions=[
            Planned(files(0.5), [0, 1, 2], [1.0, 2.0, 3.0]),  # A: 2.0
            Planned(variant, [0, 1, 2], [0.0, 0.0, 0.0]),  # A + a helper: worse
            Planned(files(0.6), [1, 2, 3], [4.0, 4.0, 4.0]),  # back to A, another gain
            Planned(dict(variant), [5], [9.0]),  # the variant again, elsewhere
        ],
        candidates=[3],
    )
    write_run(store, run)
    run_export(store, tmp_path / "out", ["programs"])
    rows = sorted(load(tmp_path / "out", "programs"), key=lambda r: r["submission_id"])
    assert [r["parent_submission_id"] for r in rows] == [None, 1, 1, 2]
    assert [r["previous_submission_id"] for r in rows] == [None, 1, 2, 3]
    assert [r["edit_kind"] for r in rows] == ["parametric", "synthesis", "parametric", "none"]
    assert [r["parent_distance"] for r in rows] == [2, 4, 2, 0]
    third = rows[2]
    assert third["matched_indices"] == [1, 2]  # 1 ran on 0:3, 3 on 1:4
    assert (third["matched_score"], third["parent_matched_score"], third["matched_delta"]) == (
        4.0,
        2.5,
        1.5,
    )
    assert third["matched_better"] is True and third["best_so_far_basis"] == "unmatched"
    assert third["best_so_far_matched"] is True  # beats 1 and 2 on the indices it shares with each
    fourth = rows[3]
    assert (
        fourth["matched_indices"] == []
        and fourth["matched_score"] is None
        and fourth["matched_better"] is None
    )
    assert fourth["best_so_far"] is True and fourth["best_so_far_matched"] is None  # nothing shared
    assert fourth["diff"] == ""


def test_labels_say_who_handed_off_whether_it_improved_and_success(
    store: Store, tmp_path: Path
) -> None:
    write_run(store, standard_run("alpha"))  # the final program (1.5) beat the initial one (1.0)
    write_run(store, standard_run("beta", reference_score=2.0))  # it did not
    write_run(store, standard_run("gamma", reference_score=None))  # rules 1: not measured
    write_run(store, standard_run("delta", handoff="host"))  # improved, but the Host nominated
    run_export(store, tmp_path / "out", ["sft", "distill", "rl"])
    for config in ("sft", "distill"):
        rows = {r["run_id"]: r for r in load(tmp_path / "out", config)}
        labels = {
            k: (r["handoff"], r["improved"], r["reference_score"], r["success"])
            for k, r in rows.items()
        }
        assert labels == {
            "alpha": ("agent", True, 1.0, True),
            "beta": ("agent", False, 2.0, False),
            "gamma": ("agent", None, None, False),
            "delta": ("host", True, 1.0, False),
        }, config
    assert rows["delta"]["final_score"] == 42.0  # measured, yet not a success
    (task,) = load(tmp_path / "out", "rl")
    assert (task["reference_score"], task["reference_score_runs"], task["runs"]) == (
        (1.0 + 2.0 + 1.0) / 3,
        3,
        4,
    )
    run_export(store, tmp_path / "ok", ["sft"], success_only=True)
    assert [r["run_id"] for r in load(tmp_path / "ok", "sft")] == ["alpha"]


def test_submission_outcomes_join_the_turn_that_made_them(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    run_export(store, tmp_path / "whole", ["sft", "programs"])
    run_export(store, tmp_path / "turns", ["sft"], per_turn=True)
    (whole,) = load(tmp_path / "whole", "sft")
    programs = {r["submission_id"]: r for r in load(tmp_path / "whole", "programs")}
    outcomes = {o["submission_id"]: o for o in whole["submissions"]}
    assert sorted(outcomes) == [1, 2, 3, 4, 5]
    for sid, outcome in outcomes.items():
        row = programs[sid]
        assert (
            outcome["turn"],
            outcome["score"],
            outcome["failures"],
            outcome["budget_spent"],
        ) == (
            row["turn"],
            row["score"],
            row["failures"],
            row["budget_spent"],
        )
        assert (outcome["parent_submission_id"], outcome["matched_delta"]) == (
            row["parent_submission_id"],
            row["matched_delta"],
        )
    assert outcomes[2]["matched_delta"] == 3.0 and outcomes[2]["matched_better"] is True
    assert outcomes[4]["status"] == "failed" and outcomes[4]["score"] is None
    turns = {r["turn"]: r for r in load(tmp_path / "turns", "sft")}
    submitted = {t: r for t, r in turns.items() if r["submissions"] is not None}
    assert sorted(submitted) == sorted(o["turn"] for o in outcomes.values())
    for turn, row in submitted.items():
        (made,) = row["submissions"]
        assert (
            made["turn"] == turn
            and made == outcomes[made["submission_id"]]
            and programs[made["submission_id"]]["attempt"] == row["attempt"]
        )
        (call,) = row["completion"][0]["tool_calls"]
        assert call["function"]["arguments"]["command"].startswith("evopolicy session submit")
    assert all(r["submissions"] is None for t, r in turns.items() if t not in submitted)


def test_sft_tools_are_the_tools_the_agent_was_offered(store: Store, tmp_path: Path) -> None:
    from evopolicygym.transcript import REFERENCE_TOOLS

    write_run(store, standard_run("alpha"))  # AgentStarted records the reference agent's tools
    write_run(store, standard_run("beta", record_tools=False))  # an older Run: not recorded
    run_export(store, tmp_path / "out", ["sft", "dpo"])
    rows = {r["run_id"]: r for r in load(tmp_path / "out", "sft")}
    assert rows["alpha"]["tools"] == REFERENCE_TOOLS and rows["alpha"]["tools_inferred"] is False
    assert rows["beta"]["tools_inferred"] is True
    assert {t["function"]["name"] for t in rows["beta"]["tools"]} == {
        "read_file",
        "write_file",
        "bash",
    }
    assert all(
        r["tools"] == REFERENCE_TOOLS
        for r in load(tmp_path / "out", "dpo")
        if r["run_id"] == "alpha"
    )


@pytest.mark.parametrize("inline_pool", [False, True], ids=["pool-blob", "pool-inline"])
def test_events_are_flat_and_keep_nothing_private(
    store: Store, tmp_path: Path, inline_pool: bool
) -> None:
    write_run(store, standard_run("alpha", inline_pool=inline_pool))
    run_export(store, tmp_path / "out", ["events"])
    rows = load(tmp_path / "out", "events")
    envelopes = list(store.events.read_stream("run-alpha"))
    # Every event but the Validation of candidate 3, which was not selected (2 was).
    (unselected,) = [
        e for e in envelopes if e.type == "CandidateValidated" and e.data()["submission_id"] == 3
    ]
    assert [r["position"] for r in rows] == [e.position for e in envelopes if e is not unselected]
    assert [r["submission_id"] for r in rows if r["type"] == "CandidateValidated"] == [2]
    (reference,) = [r for r in rows if r["type"] == "ReferenceValidated"]
    assert reference["score"] == 1.0 and "episodes" not in reference["payload"]
    created = rows[0]
    assert created["type"] == "RunCreated"
    assert not {"pool", "pool_blob", "seeds"} & set(created["payload"])
    assert "seed" not in created["payload"]["config"]
    published = [r for r in rows if r["type"] == "SubmissionPublished"]
    assert [r["score"] for r in published] == [2.0, 5.0, 9.0, 0.0]
    assert published[0]["submission_id"] == 1 and published[0]["budget_used"] == 3
    assert rows[0]["recorded_at"].tzinfo is not None
    held_out = [r for r in rows if r["type"] in ("CandidateValidated", "AssessmentCompleted")]
    assert held_out and all(
        "episodes" not in r["payload"] and r["score"] is not None for r in held_out
    )
    (failed,) = [r for r in rows if r["type"] == "EvaluationFailed"]
    assert failed["payload"]["error"] == "worker lost on seed <private> (<private>)"


# -------------------------------------------------------------------- filters, splits, fingerprints


def test_run_filters(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    write_run(store, standard_run("beta", benchmark_id="other-bench", assessment_score=7.0))
    write_run(
        store, standard_run("gamma", agent=AgentIdentity(name="x", provider="codex", model="m1"))
    )

    def ids(**kw: Any) -> set[str]:
        out = tmp_path / f"out-{len(os.listdir(tmp_path))}"
        run_export(store, out, ["sft"], run_filter=RunFilter(**kw))
        return (
            {r["run_id"] for r in load(out, "sft")}
            if (out / "sft").exists() and any((out / "sft").iterdir())
            else set()
        )

    assert ids(benchmark=("other-bench",)) == {"beta"}
    assert ids(agent=("codex",)) == {"gamma"} == ids(agent=("m1",))
    assert ids(min_score=10.0) == {"alpha", "gamma"}
    assert ids(terminal_reason=("agent_exited",)) == set()
    import datetime as dt

    assert ids(since=dt.datetime(2999, 1, 1, tzinfo=dt.UTC)) == set()


def test_unfinished_runs_are_not_exported(store: Store, tmp_path: Path) -> None:
    from evopolicygym.records.events import new_event

    write_run(store, standard_run("alpha"))
    events = [e.event() for e in store.events.read_stream("run-alpha")]
    unfinished: list[Event] = events[:-1]
    store.events.append(
        "run-zeta", [new_event(e, f"zeta/{i}") for i, e in enumerate(unfinished)], 0
    )
    report = run_export(store, tmp_path / "out", ["sft", "events"])
    assert report.runs == 1
    assert {r["run_id"] for r in load(tmp_path / "out", "events")} == {"alpha"}


@given(st.text(min_size=1, max_size=40))
@settings(max_examples=200, deadline=None)
def test_split_is_a_function_of_the_key(key: str) -> None:
    assert split_of(key, 0.3) == split_of(key, 0.3)
    assert split_of(key, 0.0) == "train"
    if split_of(key, 0.3) == "test":
        assert split_of(key, 0.6) == "test"  # a larger test share only adds keys


def test_run_splits_keep_a_runs_rows_together_at_about_the_asked_share(
    store: Store, tmp_path: Path
) -> None:
    for i in range(40):  # programs of their own, so no identical row joins two Runs
        run = standard_run(f"run{i:02d}", chatter=0)
        for planned in run.submissions:
            planned.files = {"policy.py": planned.files["policy.py"] + f"RUN = {i}\n"}
        write_run(store, run)
    report = run_export(
        store, tmp_path / "out", ["sft", "programs", "rollouts"], test_fraction=0.5, split_by="run"
    )
    loaded = datasets.load_dataset(str(tmp_path / "out"), "programs")
    by_split = {split: {r["run_id"] for r in loaded[split]} for split in loaded}
    assert not by_split["train"] & by_split["test"]
    assert 8 <= len(by_split["test"]) <= 32
    sft_test = {r["run_id"] for r in datasets.load_dataset(str(tmp_path / "out"), "sft")["test"]}
    assert (
        sft_test
        == by_split["test"]
        == {f"run{i:02d}" for i in range(40) if split_of(f"run{i:02d}", 0.5) == "test"}
    )
    assert report.configs["sft"]["splits"]["test"]["rows"] == len(sft_test)
    assert report.configs["sft"]["split_by"] == "run" and report.configs["sft"]["split_units"] == 40


def test_a_unit_takes_the_split_most_of_its_groups_hash_to() -> None:
    from evopolicygym_exporters.writer import Units

    keys = [f"g{i}" for i in range(40)]
    tests = [k for k in keys if split_of(k, 0.3) == "test"]
    trains = [k for k in keys if split_of(k, 0.3) == "train"]
    units = Units()
    for group in (tests[0], trains[0], trains[1]):  # one program shared by three groups
        units.add(group, b"shared")
    units.add(tests[1], b"alone")
    units.add(tests[2], None)
    units.add(trains[2], b"pair")
    units.add(tests[3], b"pair")  # a tie: the least group key decides
    splits = units.assign(0.3)
    assert {splits[g] for g in (tests[0], trains[0], trains[1])} == {"train"}
    assert splits[tests[1]] == splits[tests[2]] == "test"
    least = min(trains[2], tests[3])
    assert splits[trains[2]] == splits[tests[3]] == split_of(least, 0.3)
    assert units.count() == 4 and len(units.groups) == 7


def _task_runs(tasks: int, runs: int, shared: bool = False) -> list[SynthRun]:
    """``runs`` Runs on each of ``tasks`` Benchmarks, programs of their task's own (with
    ``shared``, the Runs of the first half of the tasks also submit one program common to
    them, on the same indices as a program of their own)."""
    made = []
    for t in range(tasks):
        for r in range(runs):
            own = {"policy.py": policy_source(0.5 + 10 * t)}
            better = {"policy.py": policy_source(0.7 + 10 * t)}
            common = {"policy.py": policy_source(99.0)}
            submissions = [
                Planned(own, [0, 1], [1.0, 2.0]),
                Planned(better, [0, 1], [3.0, 4.0 + r]),
            ]
            if shared and t < tasks // 2:
                submissions += [
                    Planned(common, [2, 3], [5.0, 5.0]),
                    Planned(dict(own), [2, 3], [0.0, 1.0]),
                ]
            made.append(
                SynthRun(
                    run_id=f"t{t:02d}-r{r}",
                    submissions=submissions,
                    benchmark_id=f"toy-{t:02d}",
                    candidates=[2],
                )
            )
    return made


def _splits(out: Path, config: str) -> dict[str, list[dict[str, Any]]]:
    loaded = datasets.load_dataset(str(out), config)
    return {split: list(loaded[split]) for split in ("train", "test") if split in loaded}


def test_task_splits_keep_a_tasks_rows_together(store: Store, tmp_path: Path) -> None:
    from evopolicygym_exporters import read_histories
    from evopolicygym_exporters.tasks import task_id

    for run in _task_runs(12, 3):
        write_run(store, run)
    tasks = {h.run_id: task_id(h) for h in read_histories(store, RunFilter())}
    assert len(set(tasks.values())) == 12
    report = run_export(store, tmp_path / "out", test_fraction=0.5)  # the default: by task
    # The toy traces are all alike: one Episode, so every task's rollouts form one unit.
    assert report.configs["rollouts"]["split_units"] == 1
    for config in ("sft", "distill", "dpo", "programs", "events"):
        splits = _splits(tmp_path / "out", config)
        assert set(splits) == {"train", "test"}, config
        for split, rows in splits.items():
            assert {split_of(tasks[r["run_id"]], 0.5) for r in rows} == {split}, config
        assert report.configs[config]["split_by"] == "task"
        assert report.configs[config]["split_groups"] == report.configs[config]["split_units"] == 12
    rl = _splits(tmp_path / "out", "rl")
    assert {s: {r["task_id"] for r in rows} for s, rows in rl.items()} == {
        s: {t for t in tasks.values() if split_of(t, 0.5) == s} for s in ("train", "test")
    }
    (sft,) = (r for r in _splits(tmp_path / "out", "sft")["train"][:1])
    assert sft["task_id"] == tasks[sft["run_id"]] and sft["benchmark_params"] == {}


def _identity(config: str, row: dict[str, Any]) -> Any:
    """What makes two rows the same: the same program, pair, conversation or Episode."""
    if config == "programs":
        return row["program_digest"]
    if config == "dpo":
        return tuple(sorted((row["chosen_program_digest"], row["rejected_program_digest"])))
    keys = {
        "sft": ("messages", "tools"),
        "distill": ("messages", "tools"),
        "rollouts": ("observations", "actions"),
    }
    return json.dumps([row[k] for k in keys[config]], sort_keys=True)


def overlaps(out: Path, config: str, old_rule: float | None = None) -> tuple[int, int]:
    """(test rows, test rows identical to a train row) of a config; with ``old_rule``, as
    the rule before split them: by the hash of their Run id at that test fraction."""
    rows = [(split, r) for split, found in _splits(out, config).items() for r in found]
    if old_rule is not None:
        rows = [(split_of(r["run_id"], old_rule), r) for _, r in rows]
    train = {_identity(config, r) for split, r in rows if split == "train"}
    test = [r for split, r in rows if split == "test"]
    return len(test), sum(_identity(config, r) in train for r in test)


@pytest.mark.parametrize("split_by", ["task", "run"])
def test_identical_rows_never_straddle_splits(store: Store, tmp_path: Path, split_by: str) -> None:
    """A program common to half the tasks, and two Runs with the same conversation: by task
    or by Run, identical rows land in one split, and the groups they join share it."""
    runs = _task_runs(10, 2, shared=True)
    twin = _task_runs(1, 1)[0]
    twin.run_id, twin.benchmark_id = "twin", runs[0].benchmark_id
    runs.append(twin)  # the same conversation as t00-r0 (same task), under another Run id
    for run in runs:
        write_run(store, run)
    out = tmp_path / "out"
    report = run_export(store, out, test_fraction=0.5, split_by=split_by)
    for config in ("sft", "distill", "dpo", "programs", "rollouts"):
        tested, overlap = overlaps(out, config)
        assert overlap == 0, (config, tested)
    # A task's Runs share its own programs, and the common program joins the first five
    # tasks: six units, whether the groups are the 10 tasks or the 21 Runs.
    groups = {"task": 10, "run": 21}[split_by]
    assert (
        report.configs["programs"]["split_groups"],
        report.configs["programs"]["split_units"],
    ) == (groups, 6)
    programs = _splits(out, "programs")
    common = Program.from_files({"policy.py": policy_source(99.0)}).digest
    assert sum(common in {r["program_digest"] for r in rows} for rows in programs.values()) == 1
    # The twin's conversation is t00-r0's: one split for both, even split by Run.
    sft = _splits(out, "sft")
    assert [s for s, rows in sft.items() for r in rows if r["run_id"] in ("twin", "t00-r0")] in (
        ["train", "train"],
        ["test", "test"],
    )
    for config in ("sft", "dpo", "programs"):
        assert set(_splits(out, config)) == {"train", "test"}, config
    # Before: the same rows split by Run id alone put identical rows on both sides.
    assert (
        overlaps(out, "programs", old_rule=0.5)[1] > 0 and overlaps(out, "dpo", old_rule=0.5)[1] > 0
    )


def test_an_unchanged_export_is_reused_and_a_new_run_rebuilds_it(
    store: Store, tmp_path: Path
) -> None:
    write_run(store, standard_run("alpha"))
    out = tmp_path / "out"
    run_export(store, out, ["sft", "dpo"])
    shard = next((out / "sft").glob("*.parquet"))
    before = shard.stat().st_ino, shard.read_bytes()
    again = run_export(store, out, ["sft", "dpo"])
    assert sorted(again.unchanged) == ["dpo", "sft"] and again.runs == 0
    assert (shard.stat().st_ino, shard.read_bytes()) == before
    changed = run_export(store, out, ["sft", "dpo"], per_turn=True)  # sft's settings moved
    assert changed.unchanged == ["dpo"]
    write_run(store, standard_run("beta"))
    grown = run_export(store, out, ["sft", "dpo"], per_turn=True)
    assert grown.unchanged == [] and grown.runs == 2
    assert {r["run_id"] for r in load(out, "sft")} == {"alpha", "beta"}
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["configs"]["sft"]["store_head"] == store.events.head()


def test_a_new_export_is_never_read_from_a_stale_datasets_cache(tmp_path: Path) -> None:
    """datasets keys its cache on the card and file names, not the bytes: two exports with
    the same shape (same rows, same sizes) must still load as themselves."""
    loaded = []
    for direction in ("maximize", "minimize"):
        with open_store(tmp_path / direction, create=True) as store:
            write_run(store, standard_run("alpha", direction=direction))
            out = tmp_path / direction / "out"
            run_export(store, out, ["dpo"])
            loaded.append({r["score_direction"] for r in load(out, "dpo")})
    assert loaded == [{"maximize"}, {"minimize"}]


def test_a_failed_export_leaves_the_previous_one_loadable(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evopolicygym_exporters.rl import RlExporter

    write_run(store, standard_run("alpha"))
    out = tmp_path / "out"
    run_export(store, out, ["sft", "rl"])
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    write_run(store, standard_run("beta"))

    def full(self: Any) -> Any:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(RlExporter, "finish", full)
    with pytest.raises(OSError, match="No space left"):
        run_export(store, out, ["sft", "rl"])
    after = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # nothing half-switched, no building directory left
    assert [r["run_id"] for r in load(out, "sft")] == ["alpha"]
    monkeypatch.undo()
    assert run_export(store, out, ["sft", "rl"]).runs == 2
    assert {r["run_id"] for r in load(out, "sft")} == {"alpha", "beta"}
    assert len(list((out / "sft").iterdir())) == 1  # the old shard is gone once unreferenced


def test_a_killed_first_export_does_not_block_the_next(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    out = tmp_path / "out"
    (out / ".sft.building").mkdir(parents=True)
    (out / ".sft.building" / "train-00000.parquet").write_bytes(b"half")
    run_export(store, out, ["sft"])
    assert not (out / ".sft.building").exists() and len(load(out, "sft")) == 1


def test_shards_stay_under_the_maximum_size(store: Store, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    for i in range(30):
        write_run(store, standard_run(f"run{i:02d}", chatter=3))
    limit = 64 * 1024
    report = run_export(
        store, tmp_path / "out", ["sft", "events", "programs"], max_shard_bytes=limit
    )
    for name, entry in report.configs.items():
        shards = [tmp_path / "out" / name / f for s in entry["splits"].values() for f in s["files"]]
        assert len(shards) >= 2, name
        for shard in shards:
            assert shard.stat().st_size <= limit or pq.ParquetFile(shard).metadata.num_rows == 1, (
                name,
                shard.stat().st_size,
            )


def test_a_directory_that_is_not_an_export_is_left_alone(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "README.md").write_text("my notes\n")
    result = CliRunner().invoke(
        main, ["export", "--store", str(tmp_path / "store"), "--format", "sft", "-o", str(mine)]
    )
    assert result.exit_code == 1
    assert result.output.startswith("error: export failed:") and result.output.count("\n") == 1
    assert sorted(p.name for p in mine.iterdir()) == ["README.md"]
    assert (mine / "README.md").read_text() == "my notes\n"


def test_the_card_lists_loadable_configs_with_their_features(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    run_export(store, tmp_path / "out", ["sft", "rollouts"], license="cc-by-4.0")
    import yaml

    text = (tmp_path / "out" / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    assert header["license"] == "cc-by-4.0"
    assert {"text-generation", "reinforcement-learning"} <= set(header["task_categories"])
    assert [c["config_name"] for c in header["configs"]] == ["rollouts", "sft"]
    infos = {i["config_name"]: i for i in header["dataset_info"]}
    features = datasets.Features._from_yaml_list(infos["sft"]["features"])
    assert features == EXPORTERS["sft"](store, ExportOptions()).features()
    assert "How the records were produced and filtered" in text
    labels = text.split("## Labels\n", 1)[1]
    for label in (
        "handoff",
        "reference_score",
        "improved",
        "success",
        "final_score",
        "best_train_score",
        "parent_digest",
        "matched_indices",
        "matched_score",
        "matched_delta",
        "matched_better",
        "best_so_far",
        "best_so_far_basis",
        "best_so_far_matched",
        "matched",
        "submissions",
        "tools_inferred",
        "redacted",
    ):
        assert f"- `{label}`" in labels or f", `{label}`" in labels, label
    assert "grouped by task" in text and "[REDACTED]" in text


# --------------------------------------------------------------------------- the CLI


def test_export_from_the_command_line(store: Store, tmp_path: Path) -> None:
    write_run(store, standard_run("alpha"))
    out = tmp_path / "out"
    args = [
        "export",
        "--store",
        str(tmp_path / "store"),
        "--format",
        "sft,dpo",
        "--format",
        "rl",
        "-o",
        str(out),
    ]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["runs"] == 1 and set(summary["configs"]) == {"sft", "dpo", "rl"}
    assert (
        summary["configs"]["dpo"]["rows"]["train"] + summary["configs"]["dpo"]["rows"]["test"] == 3
    )
    again = CliRunner().invoke(main, args)
    assert again.exit_code == 0 and "unchanged" in again.output
    by_run = CliRunner().invoke(
        main, [*args, "--split-by", "run", "--json"]
    )  # a new grouping: rebuilt
    assert by_run.exit_code == 0 and not any(
        c["unchanged"] for c in json.loads(by_run.stdout)["configs"].values()
    )
    manifest = json.loads((out / "export.json").read_text())
    assert {c["split_by"] for c in manifest["configs"].values()} == {"run"}

    for bad, code, needle in [
        (["--format", "nope"], 2, "unknown format 'nope'"),
        (["--format", "sft", "--since", "yesterday"], 2, "is not a date"),
        (["--format", "sft", "--max-shard-size", "lots"], 2, "is not a size"),
        (["--format", "sft", "--test-fraction", "1.5"], 2, "--test-fraction must be in [0, 1)"),
        (["--format", "sft", "--create-pr"], 2, "go with --push-to-hub"),
        (["--format", "sft", "--split-by", "row"], 2, "'row' is not one of 'task', 'run'"),
    ]:
        result = CliRunner().invoke(
            main, ["export", "--store", str(tmp_path / "store"), "-o", str(out), *bad]
        )
        assert result.exit_code == code, (bad, result.output)
        assert needle in result.output and result.output.count("\n") == 1, result.output
    missing = CliRunner().invoke(
        main, ["export", "--store", str(tmp_path / "none"), "--format", "sft", "-o", str(out)]
    )
    assert missing.exit_code == 1 and "no store at" in missing.output


# --------------------------------------------------------------------------- edit kinds


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=3, max_size=3))
@settings(max_examples=100, deadline=None)
def test_changing_only_numbers_is_parametric(numbers: list[float]) -> None:
    template = (
        "W = [{}, {}]\n\ndef make_policy(context):\n    return lambda o: int(o[0] * W[0] > {})\n"
    )
    before = Program.from_files({"policy.py": template.format(0.5, -1, 2)})
    after = Program.from_files({"policy.py": template.format(*map(repr, numbers))})
    assert edit_kind(before, after) in ("parametric", "none")
    assert (
        edit_kind(
            before, Program.from_files({"policy.py": template.format(0.5, -1, 2) + "X = 1\n"})
        )
        == "synthesis"
    )
    assert (
        edit_kind(
            before, Program.from_files({"policy.py": template.format(0.5, -1, 2), "w.json": "[1]"})
        )
        == "synthesis"
    )


# --------------------------------------------------------------------------- a real Run


@pytest.fixture(scope="module")
def real_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from evopolicygym.agents.launcher import ProviderLauncher
    from evopolicygym.agents.providers import agent_identity
    from evopolicygym.run import RunHost, create_run
    from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig

    root = tmp_path_factory.mktemp("real") / "store"
    with open_store(root, create=True) as store:
        config = RunConfig(
            episode_budget=24,
            validation=ValidationConfig(episodes_per_candidate=4, max_candidates=2),
            assessment=AssessmentConfig(episodes=4),
        )
        run_id = create_run(store, "cartpole", config, agent_identity("reference"))
        RunHost(store, run_id, launcher=ProviderLauncher()).drive()
        yield store


@pytest.fixture(scope="module")
def real_tasks(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Four real Runs of the reference agent on CartPole: two tasks (budgets 6 and 8), two
    Runs each, named so that splitting by Run id would put one of each task in test."""
    from evopolicygym.agents.launcher import ProviderLauncher
    from evopolicygym.agents.providers import agent_identity
    from evopolicygym.run import RunHost, create_run
    from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig

    root = tmp_path_factory.mktemp("real-tasks") / "store"
    with open_store(root, create=True) as store:
        for run_id, budget, seed in (
            ("real-1", 6, 1),
            ("real-2", 6, 2),
            ("real-3", 8, 3),
            ("real-4", 8, 4),
        ):
            config = RunConfig(
                episode_budget=budget,
                seed=seed,
                validation=ValidationConfig(episodes_per_candidate=2, max_candidates=2),
                assessment=AssessmentConfig(episodes=2),
            )
            create_run(store, "cartpole", config, agent_identity("reference"), run_id=run_id)
            RunHost(store, run_id, launcher=ProviderLauncher()).drive()
        yield store


def test_real_runs_split_by_task_and_identical_rows_never_straddle(
    real_tasks: Store, tmp_path: Path
) -> None:
    from evopolicygym_exporters import read_histories
    from evopolicygym_exporters.tasks import task_id

    assert [split_of(f"real-{i}", 0.5) for i in range(1, 5)] == ["test", "train", "test", "train"]
    tasks = {h.run_id: task_id(h) for h in read_histories(real_tasks, RunFilter())}
    assert len(tasks) == 4 and len(set(tasks.values())) == 2
    found: dict[str, tuple[int, int]] = {}
    for split_by in ("task", "run"):
        out = tmp_path / split_by
        run_export(
            real_tasks,
            out,
            ["sft", "dpo", "programs", "rollouts", "events"],
            test_fraction=0.5,
            split_by=split_by,
        )
        for config in ("sft", "dpo", "programs", "rollouts"):
            found[f"{split_by}:{config}"] = overlaps(out, config)
            found[f"run-id:{config}"] = overlaps(out, config, old_rule=0.5)  # the rule before
            assert found[f"{split_by}:{config}"][1] == 0, (split_by, config, found)
        if split_by == "task":
            for config in ("sft", "dpo", "programs", "rollouts", "events"):
                where: dict[str, set[str]] = {}
                for split, rows in _splits(out, config).items():
                    for row in rows:
                        where.setdefault(tasks[row["run_id"]], set()).add(split)
                assert all(len(splits) == 1 for splits in where.values()), config
            assert set(_splits(out, "sft")) == {"train", "test"}  # the two tasks split apart
    print("test rows / identical to a train row:", found)
    # The reference agent writes the same programs whatever the seed: split by Run id alone,
    # identical programs and pairs were on both sides.
    assert found["run-id:programs"][1] > 0 and found["run-id:dpo"][1] > 0


def test_a_real_run_exports_whole(real_store: Store, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = run_export(real_store, out)
    assert report.runs == 1
    events = [
        e.event()
        for e in real_store.events.read_stream(real_store.events.streams("run-")[0].stream_id)
    ]
    messages = [m for e in events if isinstance(e, AgentMessages) for m in e.messages]
    (sft,) = load(out, "sft")
    assert len(sft["messages"]) == len(messages) + 1  # the kickoff user turn
    assert [m["content"] for m in sft["messages"][2:]] == [m.content for m in messages[1:]]
    traced = [e for e in events if isinstance(e, EpisodeCompleted) and e.trace_blob]
    rollouts = load(out, "rollouts")
    assert len(rollouts) == len(traced) > 0
    for row in rollouts:
        assert len(row["observations"]) == len(row["actions"]) + 1
        assert row["observations"][0] is not None and len(row["observations"][0]) == 4
        assert sum(row["rewards"]) == row["total_reward"] and row["complete"]
    finals = {e.final_submission_id for e in events if type(e).__name__ == "RunFinished"}
    unselected = [
        e
        for e in events
        if type(e).__name__ == "CandidateValidated" and e.submission_id not in finals
    ]  # type: ignore[attr-defined]
    assert len(load(out, "events")) == len(events) - len(unselected)
    assert len(load(out, "programs")) == sum(
        1 for e in events if type(e).__name__ == "EvaluationStarted"
    )
    assert all(load(out, name) for name in ("rl", "distill"))


def test_edit_kinds_and_diffs_of_odd_programs() -> None:
    from evopolicygym_exporters.programs import program_diff

    def p(text: str, **more: str) -> Program:
        return Program.from_files({"policy.py": text, **more})

    base = p("x = 1\n")
    assert edit_kind(base, p("x = 1  # why\n")) == "cosmetic"
    assert edit_kind(base, p("x = -2.5\n")) == "parametric"
    assert edit_kind(p("x = '#'\n"), p("x = 7\n")) == "synthesis"  # a string is not a number
    deep = "y = " + "+".join(["1"] * 1200) + "\n"  # compiles, but too deep to walk
    assert edit_kind(base, p(deep)) == "synthesis"
    diff = program_diff(p("A = 1\x0cB = 2\n"), p("A = 1\x0cB = 3\n"))
    assert (
        diff == "--- a/policy.py\n+++ b/policy.py\n@@ -1 +1 @@\n-A = 1\x0cB = 2\n+A = 1\x0cB = 3\n"
    )


def test_a_run_that_cannot_be_read_is_left_out_and_reported(store: Store, tmp_path: Path) -> None:
    from evopolicygym.records.events import NewEvent

    write_run(store, standard_run("alpha"))
    broken = standard_run("beta")
    broken.submissions[0].files = {"policy.py": "GONE = 1\n"}
    write_run(store, broken)
    gone = Program.from_files(broken.submissions[0].files)
    tree = store.blobs.program_tree(gone.digest)
    lose_blob(store.blobs, tree)  # its program's tree blob is lost
    write_run(store, standard_run("gamma"))
    future = NewEvent("gamma/99", "EventFromTheFuture", 1, b"{}")
    store.events.append("run-gamma", [future], store.events.streams("run-gamma")[0].version)

    result = CliRunner().invoke(
        main,
        [
            "export",
            "--store",
            str(tmp_path / "store"),
            "--format",
            "sft,programs",
            "-o",
            str(tmp_path / "out"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["runs"] == 1
    assert [s.split(":")[0] for s in summary["skipped"]] == ["run-beta", "run-gamma"]
    assert "EventFromTheFuture" in summary["skipped"][1]
    # All of a skipped Run's rows are out, in every config.
    assert {r["run_id"] for r in load(tmp_path / "out", "sft")} == {"alpha"}
    assert {r["run_id"] for r in load(tmp_path / "out", "programs")} == {"alpha"}


def test_rollouts_flag_a_trace_cut_by_the_step_limit(store: Store, tmp_path: Path) -> None:
    import msgspec

    write_run(store, standard_run("alpha"))
    # A trace written before the step limit was flagged: bare steps, the last not terminal.
    old = [
        [1, 0.5, False, False, [1.0, 0.0]],
        [1, 0.5, False, False, [2.0, 0.0]],
        [0, 0.5, False, False, [2.0, 0.0]],
    ]
    blob = store.blobs.put(msgspec.msgpack.encode(old))
    events = [e.event() for e in store.events.read_stream("run-alpha")]
    from evopolicygym.records.events import new_event

    patched = [
        msgspec.structs.replace(e, trace_blob=blob) if isinstance(e, EpisodeCompleted) else e
        for e in events
    ]
    store.events.append("run-old", [new_event(e, f"old/{i}") for i, e in enumerate(patched)], 0)
    run_export(store, tmp_path / "out", ["rollouts"], run_filter=RunFilter())
    # A Run is known by its stream (run-old), whatever its copied RunCreated says.
    rows = [
        r for r in load(tmp_path / "out", "rollouts") if r["run_id"] == "old" and r["steps"] == 3
    ]
    old_rows = [r for r in rows if r["observations"][0] is None]
    assert old_rows and all(r["truncations"] == [False, False, True] for r in old_rows)
    assert all(r["terminations"] == [False, False, False] for r in old_rows)


def test_dpo_edits_remove_dropped_files(store: Store, tmp_path: Path) -> None:
    run = SynthRun(
        run_id="alpha",
        initial={"policy.py": policy_source(0.0), "helper.py": "H = 1\n"},
        submissions=[
            Planned({"policy.py": policy_source(0.0)}, [0, 1], [5.0, 5.0]),  # drops helper.py
            Planned({"policy.py": policy_source(0.0), "helper.py": "H = 2\n"}, [0, 1], [1.0, 1.0]),
        ],
    )
    write_run(store, run)
    run_export(store, tmp_path / "out", ["dpo"])
    (pair,) = load(tmp_path / "out", "dpo")
    (chosen,) = pair["chosen"]
    assert [c["function"]["name"] for c in chosen["tool_calls"]] == ["bash"]
    assert chosen["tool_calls"][0]["function"]["arguments"] == {
        "command": "rm -f program/helper.py"
    }
    assert {t["function"]["name"] for t in pair["tools"]} >= {"bash", "write_file"}


def test_other_agents_get_inferred_tools_and_no_command_line(store: Store, tmp_path: Path) -> None:
    agent = AgentIdentity(
        name="mine", provider="command", options={"command": ["/home/me/agent", "--key=sk-123"]}
    )
    write_run(store, standard_run("alpha", agent=agent))
    run_export(store, tmp_path / "out", ["sft", "events"])
    (row,) = load(tmp_path / "out", "sft")
    assert row["agent"]["options"] == {}
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in row["tools"]}
    assert tools["bash"] == {"type": "object", "properties": {"command": {"type": "string"}}}
    events = json.dumps(load(tmp_path / "out", "events"), default=str)
    assert "sk-123" not in events and "/home/me/agent" not in events


def test_non_finite_numbers_are_refused(store: Store, tmp_path: Path) -> None:
    for option in ("--min-score", "--dpo-min-margin"):
        result = CliRunner().invoke(
            main,
            [
                "export",
                "--store",
                str(tmp_path / "store"),
                "--format",
                "sft",
                "-o",
                str(tmp_path / "o"),
                option,
                "nan",
            ],
        )
        assert result.exit_code == 2 and "finite" in result.output, result.output


def test_unused_message_keys_are_null_so_they_can_be_dropped(store: Store, tmp_path: Path) -> None:
    """Templates that test a key's presence ('tool_calls' in message) see exactly the keys a
    message uses once nulls are dropped, as the card says."""
    write_run(store, standard_run("alpha"))
    run_export(store, tmp_path / "out", ["sft"])
    (row,) = load(tmp_path / "out", "sft")
    for message in row["messages"]:
        kept = {k: v for k, v in message.items() if v is not None}
        assert ("tool_calls" in kept) == (
            message["role"] == "assistant" and bool(message["tool_calls"])
        )
        assert ("tool_call_id" in kept) == (message["role"] == "tool")


def test_what_the_agent_was_shown_is_part_of_the_task() -> None:
    """Runs under another Feedback condition are another task (their own split unit, their
    own rl row); the default condition, spelt out or absent, keeps the task id it had."""
    from types import SimpleNamespace

    from evopolicygym_exporters.tasks import task_id

    def run(config: dict[str, Any]) -> Any:
        created = SimpleNamespace(
            config={"episode_budget": 8, **config},
            benchmark_id="cartpole",
            environment_digest="sha256:" + "1" * 64,
            initial_program_digest="sha256:" + "2" * 64,
        )
        return SimpleNamespace(created=created)

    default = {"traces": "benchmark", "trace_steps": None, "episodes": True, "content": True}
    assert task_id(run({})) == task_id(run({"feedback": default})) == task_id(run({"feedback": {}}))
    conditions = [
        {"traces": 2},
        {"traces": 0},
        {"episodes": False},
        {"content": False},
        {"traces": "all"},
    ]
    ids = {task_id(run({"feedback": {**default, **c}})) for c in conditions}
    assert len(ids) == len(conditions) and task_id(run({})) not in ids


def test_the_task_catalog_labels_a_profiled_run(tmp_path: Path) -> None:
    """A curriculum's labels: the family, the profile the Run was given and its rank, and the
    family's measured baseline and random scores, as the recorded spec states them."""
    from click.testing import CliRunner

    from evopolicygym.cli import main
    from evopolicygym.registry import load_benchmark

    store = tmp_path / "store"
    done = CliRunner().invoke(
        main,
        [
            "run",
            "--benchmark",
            "frozen-lake",
            "--param",
            "profile=8x8-calm",
            "--agent",
            "reference",
            "--budget",
            "4",
            "--no-validation",
            "--no-assessment",
            "--allow-uncontained-agent",
            "--store",
            str(store),
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    out = tmp_path / "out"
    exported = CliRunner().invoke(
        main, ["export", "--format", "sft", "--format", "rl", "-o", str(out), "--store", str(store)]
    )
    assert exported.exit_code == 0, exported.output
    metadata = load_benchmark("frozen-lake", {"profile": "8x8-calm"}).spec.metadata
    expected = {
        "family": "classic",
        "profile": "8x8-calm",
        "difficulty": 1,
        "reference_baseline": (metadata.get("reference_scores") or {}).get("baseline"),
        "reference_random": (metadata.get("reference_scores") or {}).get("random"),
    }
    assert metadata["difficulty"] == 1  # 4x4-calm is 0: the second easiest
    for config in ("sft", "rl"):
        (row,) = load(out, config)
        assert row["task_catalog"] == expected, config
