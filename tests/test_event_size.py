"""The store's event size limit, as the Host meets it.

An append over ``MAX_EVENT_BYTES`` is refused whole (``test_store_contract``); here the
Host keeps every event under it: feedback content over ``CONTENT_BYTES`` is kept whole as
an artifact and the event says what it left out, transcript chunks are split and an
oversized message clipped; what cannot be made smaller (a held-out phase's Episode
list) fails that phase with the one-line error, and the Run is never left half-written.
The limits are lowered here so small Runs meet them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evopolicygym.program import Program
from evopolicygym.records import store as store_module
from evopolicygym.records.events import (
    AgentMessages,
    AssessmentFailed,
    RunFinished,
    SubmissionPublished,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.records.store import EventTooLarge
from evopolicygym.records.verify import verify_store
from evopolicygym.run import phases, supervisor
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.decider import StartAgent
from evopolicygym.run.ledger import Ledger
from evopolicygym.run.replay import replay_run
from tests.support.hostruns import agent_script, drive, new_run, of

pytestmark = pytest.mark.timeout(240)

QUICK = Program.from_files(  # fails CartPole in a few steps: Episodes cost next to nothing
    {
        "policy.py": "class P:\n    def act(self, o):\n        return 0\n\n"
        "def make_policy(c):\n    return P()\n"
    }
)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


def payload_sizes(store: Store, run_id: str) -> dict[str, int]:
    """The largest stored payload of each event type of the Run."""
    sizes: dict[str, int] = {}
    for envelope in store.events.read_stream(run_stream_id(run_id)):
        sizes[envelope.type] = max(sizes.get(envelope.type, 0), len(envelope.payload))
    return sizes


def test_a_refused_append_leaves_the_run_as_it_was(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = new_run(store, "true")
    monkeypatch.setattr(store_module, "MAX_EVENT_BYTES", 4096)
    ledger = Ledger(store, run_id)
    ledger.load()
    head = store.events.head()
    with pytest.raises(
        EventTooLarge,
        match=r"^AgentStarted event of [\d,]+ bytes is over the event size limit of 4,096",
    ):
        ledger.must(StartAgent(command=["x" * 5000]))
    assert ledger.state.version == 1 and len(ledger.events) == 1 and store.events.head() == head
    ledger.must(StartAgent(command=["agent"]))  # the Run goes on from where it was
    assert ledger.state.version == 2 and ledger.load().version == 2
    assert verify_store(store).ok


def test_a_run_under_a_small_limit_keeps_every_event_under_it(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limit = 16_000
    monkeypatch.setattr(store_module, "MAX_EVENT_BYTES", limit)
    monkeypatch.setattr(phases, "CONTENT_BYTES", 1500)
    monkeypatch.setattr(phases, "_CONTENT_FIELD_BYTES", 200)
    monkeypatch.setattr(supervisor, "CHUNK_BYTES", 6000)
    monkeypatch.setattr(supervisor, "_TEXT_CHARS", 1000)
    monkeypatch.setattr(supervisor, "_ARGUMENT_BYTES", 500)
    command = agent_script(
        tmp_path,
        """
        say = lambda text: print(json.dumps({"role": "assistant", "content": text}), flush=True)
        for i in range(12):
            say(f"thinking {i}: " + "y" * 900)  # twelve that fit a chunk only some at a time
        say("z" * 20_000)  # one too large for any chunk
        assert cli("submit", "--episodes", "0:12")[0] == 0
        assert cli("finish", "1")[0] == 0
        """,
    )
    workspace = tmp_path / "ws"
    run_id = new_run(store, command, program=QUICK)
    state, events = drive(store, run_id, workspace)
    assert state.finished == "finished"
    sizes = payload_sizes(store, run_id)
    assert max(sizes.values()) <= limit, sizes
    # The feedback content was over CONTENT_BYTES: its small fields stay, the whole is an artifact.
    (published,) = of(events, SubmissionPublished)
    note = published.content["content_truncated"]
    assert note["artifact"] == "content.json" and "episodes" in note["left_out"]
    assert "mean_return" in published.content and "episodes" not in published.content
    (artifact,) = [a for a in published.artifacts if a.name == "content.json"]
    whole = json.loads(store.blobs.get(artifact.blob))
    assert len(whole["episodes"]) == 12 and note["bytes"] == artifact.size
    assert any(path.name == "content.json" for path in (workspace / "feedback").rglob("*"))  # whole
    # The transcript came in several chunks; the message too large for one was clipped.
    messages = [m for chunk in of(events, AgentMessages) for m in chunk.messages]
    texts = [m.content for m in messages if m.role == "assistant"]
    assert [t.split(":")[0] for t in texts[:12]] == [f"thinking {i}" for i in range(12)]
    (clipped,) = [t for t in texts if t.startswith("z")]
    assert clipped == "z" * 1000 + " … [19000 more characters cut]"
    assert len([c for c in of(events, AgentMessages) if c.attempt == 1]) >= 3
    assert verify_store(store).ok


def test_a_held_out_outcome_too_large_to_record_fails_its_phase(
    store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Assessment's per-Episode list is longer than an event may be: the phase fails
    with the one-line error, and the Run ends there, whole."""
    monkeypatch.setattr(store_module, "MAX_EVENT_BYTES", 6000)
    monkeypatch.setattr(phases, "CONTENT_BYTES", 1000)
    monkeypatch.setattr(phases, "_CONTENT_FIELD_BYTES", 200)
    command = agent_script(tmp_path, 'cli("submit", "--episodes", "0:2")\ncli("finish", "1")\n')
    config = RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
        assessment=AssessmentConfig(episodes=100),
        agent_timeout=120.0,
    )
    run_id = new_run(store, command, config, program=QUICK)
    state, events = drive(store, run_id)
    assert state.finished == "assessment_failed"
    (failed,) = of(events, AssessmentFailed)
    assert failed.error.startswith("AssessmentCompleted event of ")
    assert (
        "is over the event size limit of 6,000 bytes" in failed.error and "\n" not in failed.error
    )
    assert of(events, RunFinished)[0].reason == "assessment_failed"
    assert max(payload_sizes(store, run_id).values()) <= 6000
    assert verify_store(store).ok
    assert replay_run(store, run_id).ok
