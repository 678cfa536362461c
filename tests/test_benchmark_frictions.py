"""A newcomer's first steps with Benchmarks (issue 27): the conformance check's synthetic
score labelled as such; an Episode cut at the step limit called ``truncated``, also in Runs
recorded when it was ``timed_out``."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
from click.testing import CliRunner, Result

from evopolicygym.cli import main
from evopolicygym.evaluation import EvaluationConfig, evaluate
from evopolicygym.program import Program
from evopolicygym.records.events import NewEvent, current_terminations, decode_event
from evopolicygym.records.location import open_store
from evopolicygym.registry import load_benchmark


def invoke(*args: str) -> Result:
    options: dict[str, Any] = {}
    if "mix_stderr" in inspect.signature(CliRunner).parameters:
        options["mix_stderr"] = False
    result = CliRunner(**options).invoke(main, list(args), prog_name="evopolicy")
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result


POLICY = """
def make_policy(context):
    return Balance()


class Balance:
    # Holds CartPole's pole up for the whole step limit (500 steps).
    def act(self, observation):
        x, x_dot, theta, theta_dot = observation
        return 1 if theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0 else 0
"""


def balancing_program(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "policy.py").write_text(POLICY)
    return root


# --------------------------------------------------------------------------- check's synthetic score


def test_check_labels_its_synthetic_score() -> None:
    result = invoke("benchmarks", "check", "acrobot", "--json")
    assert result.exit_code == 0, result.output
    checks = {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    # Returns 0 and 1 and a failed Episode at acrobot's failure score -500: not a measurement.
    assert checks["scoring"] == {
        "name": "scoring",
        "ok": True,
        "detail": "on synthetic records, not a measurement: -166.333",
    }
    human = invoke("benchmarks", "check", "acrobot")
    assert human.exit_code == 0
    assert "on synthetic records" in human.stdout and "score -166.333" not in human.stdout


# --------------------------------------------------------------------------- truncated


def test_a_cartpole_episode_at_the_step_limit_is_truncated(tmp_path: Path) -> None:
    program = Program.from_directory(balancing_program(tmp_path / "program"))
    result = evaluate(
        program,
        load_benchmark("cartpole"),
        EvaluationConfig(split="assessment", episodes=2, seed=0, jobs=1),
    )
    content = result.feedback.content
    assert [e.steps for e in result.episodes] == [500, 500]
    assert [e["termination"] for e in content["episodes"]] == ["truncated", "truncated"]
    assert content["terminations"] == {"truncated": 2}
    assert b"timed_out" not in msgspec.json.encode(content)


def test_old_words_are_mapped_once() -> None:
    old = {
        "episodes": [
            {"termination": "timed_out", "truncated": True},
            {"termination": "policy_timeout"},
        ],
        "terminations": {"policy_timeout": 1, "timed_out": 1},
        "mean_return": 3.0,
    }
    assert current_terminations(old) == {
        "episodes": [
            {"termination": "truncated", "truncated": True},
            {"termination": "policy_timeout"},
        ],
        "terminations": {"policy_timeout": 1, "truncated": 1},
        "mean_return": 3.0,
    }
    assert old["terminations"] == {
        "policy_timeout": 1,
        "timed_out": 1,
    }  # the argument is left alone


_CONTENT_EVENTS = ("SubmissionPublished", "AssessmentCompleted", "CandidateAssessed")


def _as_recorded_before(payload: bytes) -> bytes:
    """A v2 payload as the code before the rename wrote it (v1): ``timed_out`` for ``truncated``."""
    data = msgspec.json.decode(payload)
    content = data["content"]
    for episode in content.get("episodes", []):
        if episode.get("termination") == "truncated":
            episode["termination"] = "timed_out"
    counts = content.get("terminations", {})
    content["terminations"] = {
        ("timed_out" if k == "truncated" else k): v for k, v in counts.items()
    }
    return msgspec.json.encode(data, order="sorted")


def test_a_run_recorded_with_timed_out_reads_as_truncated_and_keeps_its_bytes(
    tmp_path: Path,
) -> None:
    program = balancing_program(tmp_path / "program")
    new_store, old_store = tmp_path / "new", tmp_path / "old"
    done = invoke("run", "--benchmark", "cartpole", "--agent", "reference", "--budget", "2", "--program", str(program),
                  "--validation-episodes", "1", "--assessment-episodes", "1", "--jobs", "1", "--store", str(new_store),
                  "--allow-uncontained-agent", "--json")  # fmt: skip
    assert done.exit_code == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    stream = f"run-{run_id}"
    # The same Run in a store as the code before the rename would have written it.
    with open_store(new_store) as store:
        envelopes = list(store.events.read_stream(stream, 0))
    written: dict[str, bytes] = {}
    events = []
    for envelope in envelopes:
        if envelope.type in _CONTENT_EVENTS:
            payload = _as_recorded_before(envelope.payload)
            written[envelope.event_id] = payload
            events.append(NewEvent(envelope.event_id, envelope.type, 1, payload))
        else:
            events.append(
                NewEvent(
                    envelope.event_id, envelope.type, envelope.schema_version, envelope.payload
                )
            )
    assert any(b'"timed_out"' in payload for payload in written.values())
    with open_store(old_store, create=True) as store:
        shutil.copytree(new_store / "blobs", old_store / "blobs", dirs_exist_ok=True)
        store.events.append(stream, events, 0)
    with open_store(old_store) as store:
        old = [e for e in store.events.read_stream(stream, 0) if e.type in _CONTENT_EVENTS]
    assert {e.event_id: e.payload for e in old} == written  # stored as written
    assert all(e.schema_version == 1 for e in old)
    truncated = 0
    for envelope in old:
        content = envelope.event().content  # type: ignore[attr-defined]
        assert b"timed_out" not in msgspec.json.encode(content)
        truncated += content.get("terminations", {}).get("truncated", 0)
        assert decode_event(envelope.type, 1, envelope.payload) == envelope.event()
    assert truncated >= 1
    verified = invoke("record", "verify", "--store", str(old_store))
    assert verified.exit_code == 0, verified.output
    replayed = invoke("record", "replay", run_id, "--store", str(old_store))
    assert replayed.exit_code == 0, replayed.output
