"""Measuring a trained model, as README documents it: `experiment run` with the built-in chat
Agent against a served model (here a scripted OpenAI-compatible server on loopback) on a
held-out task list, then `experiment summary`.

The model's side is two tool calls per Run (submit two Episodes, finish with that
Submission), so each Run ends `finished` with an Assessment score, and the summary's
leaderboard holds the model's label over exactly the spec's Benchmarks and seeds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evopolicygym.analysis import messages_df, runs_df
from evopolicygym.experiments.spec import load_spec
from evopolicygym.records.location import open_store
from tests.support.chatserver import ChatServer, Reply

CLI = [sys.executable, "-m", "evopolicygym.cli"]
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "experiments" / "heldout-chat.toml"
MODEL = "my-trained-model"
KEY_ENV = "EVOPOLICY_TEST_MODEL_KEY"
KEY = "sk-heldout-test"


def _turns() -> list[Reply]:
    submit = {"content": None, "tool_calls": [{"name": "submit", "arguments": {"episodes": "0:2"}}]}
    finish = {
        "content": "Done.",
        "tool_calls": [{"name": "finish", "arguments": {"candidates": [1]}}],
    }
    return [submit, finish]


def test_the_example_spec_is_the_chat_agent_on_held_out_benchmarks() -> None:
    spec = load_spec(EXAMPLE)
    assert [a.provider for a in spec.agents] == ["chat"]
    assert spec.agents[0].base_url and spec.agents[0].model
    assert [b.id for b in spec.benchmarks] == ["acrobot", "mountain-car-continuous"]
    assert spec.profile == "paper-128"


def test_a_served_model_is_measured_on_held_out_tasks(tmp_path: Path) -> None:
    # The example, pointed at the loopback server, with a budget a test can afford.
    text = EXAMPLE.read_text()
    text = text.replace('profile = "paper-128"', 'profile = "quick"').replace(
        "seeds = 3", "seeds = 1"
    )
    text = text.replace(
        "[run]\njobs = 1",
        (
            "[run]\njobs = 1\nepisode_budget = 4\n"
            "[run.validation]\nepisodes_per_candidate = 2\nmax_candidates = 1\n"
            "[run.assessment]\nepisodes = 2"
        ),
    )
    benchmarks = ["acrobot", "mountain-car-continuous"]
    with ChatServer(_turns() * len(benchmarks), api_key=KEY, model=MODEL) as server:
        text = text.replace('model = "my-model"', f'model = "{MODEL}"')
        text = text.replace('"http://127.0.0.1:8000/v1"', json.dumps(server.url))
        text = text.replace('api_key_env = "OPENAI_API_KEY"', f'api_key_env = "{KEY_ENV}"')
        spec = tmp_path / "heldout.toml"
        spec.write_text(text)
        store = tmp_path / "store"
        env = {**os.environ, KEY_ENV: KEY}
        done = subprocess.run(
            [
                *CLI,
                "experiment",
                "run",
                str(spec),
                "--store",
                str(store),
                "--max-runs",
                "1",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr
        assert server.remaining == 0 and set(server.statuses) == {200}
    # Every request carried the key and named the served model.
    assert all(h.get("Authorization") == f"Bearer {KEY}" for h in server.headers)
    assert {r["model"] for r in server.requests} == {MODEL}

    summary = subprocess.run(
        [*CLI, "experiment", "summary", "heldout-chat", "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert summary.returncode == 0, summary.stderr
    board = json.loads(summary.stdout)
    text_out = json.dumps(board)
    assert "my-model" in text_out

    with open_store(store) as opened:
        runs = runs_df(opened, experiment="heldout-chat")
        messages = messages_df(opened, experiment="heldout-chat")
    assert sorted(runs["benchmark_id"]) == sorted(benchmarks)
    assert set(runs["status"]) == {"finished"}
    assert runs["assessment_score"].notna().all()
    assert KEY not in messages.to_json(
        date_format="iso"
    )  # the key reached the server, never the record
    assistant = messages[messages["role"] == "assistant"]
    assert set(assistant["model"].dropna()) == {MODEL}
    assert (assistant.groupby("run_id").size() == 2).all()
