"""SIGKILL the Host at a random moment, resume, and check the record is exactly what happened."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from evopolicygym.records.events import (
    AgentStarted,
    EpisodeCompleted,
    EvaluationFailed,
    EvaluationStarted,
    RunFinished,
    SubmissionPublished,
)
from evopolicygym.records.location import open_store
from evopolicygym.records.store import StoreError
from evopolicygym.records.verify import verify_store
from evopolicygym.run.ledger import load_run
from evopolicygym.run.liveness import host_alive

# Submits two Episodes at a time on fresh indices until the budget is spent, then finishes
# with its best two. A restarted attempt reads where it stands from the feedback files.
AGENT = textwrap.dedent(
    """
    import glob, json, os, subprocess, sys
    CLI = json.loads(os.environ["EVOPOLICY_CLI"])
    ws = os.environ["EVOPOLICY_WORKSPACE"]

    def cli(*args):
        done = subprocess.run([*CLI, "session", *args], capture_output=True, text=True)
        return done.returncode, done.stdout, done.stderr

    def published():
        found = []
        pattern = os.path.join(ws, "feedback", "submission-*", "feedback.json")
        for path in sorted(glob.glob(pattern)):
            data = json.load(open(path))
            if data["status"] == "published":
                found.append(data)
        return found

    while True:
        done = published()
        start = 2 * len(done)
        code, out, err = cli("submit", "--episodes", f"{start}:{start + 2}")
        if code != 0:
            if code == 1 and json.loads(err)["error"]["code"] == "duplicate_submission":
                continue
            break
    best = sorted(published(), key=lambda d: -d["score"])[:2]
    if best:
        cli("finish", *[str(d["submission_id"]) for d in best])
    """
)

TRIALS = 20


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "evopolicygym.cli", *args]


def _run_ids(store_dir: Path) -> list[str]:
    if not (store_dir / "events.db").exists():
        return []
    with open_store(store_dir) as store:
        return [info.stream_id[len("run-") :] for info in store.events.streams("run-")]


def _lock_holders(store_dir: Path) -> list[str]:
    """The processes with a Run lock of ``store_dir`` open, for a failure to name them."""
    holders = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            targets = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
            if any(str(store_dir) in t and t.endswith(".lock") for t in targets):
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200]
                holders.append(f"{pid}: {command!r}")
        except OSError:
            continue
    return holders


def _wait_for_version(store_dir: Path, target: int, host: subprocess.Popen[bytes]) -> None:
    """Poll the log until the Run's stream has ``target`` events or the Host has exited."""
    deadline = time.monotonic() + 120
    while host.poll() is None and time.monotonic() < deadline:
        if (store_dir / "events.db").exists():
            try:
                with open_store(store_dir) as store:
                    versions = [info.version for info in store.events.streams("run-")]
            except StoreError:  # caught the Host creating the store: look again
                versions = []
            if versions and versions[0] >= target:
                return
        time.sleep(0.01)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_sigkill_the_host_anywhere_then_resume(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    rng = random.Random(20261129)
    env = {**os.environ, "EVOPOLICY_CONTAINMENT": os.environ.get("EVOPOLICY_CONTAINMENT", "")}
    env = {k: v for k, v in env.items() if v}
    resumed_mid_run = 0
    for trial in range(TRIALS):
        store_dir = tmp_path / f"store-{trial}"
        command = _cli(
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "command",
            "--agent-command",
            f"{sys.executable} {agent}",
            "--budget",
            "8",
            "--validation-episodes",
            "3",
            "--assessment-episodes",
            "3",
            "--max-candidates",
            "2",
            "--store",
            str(store_dir),
        )
        host = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # A random moment: once the Run's stream reaches a random version (a Run here has
        # about 30 events), plus a random fraction of the time to the next one.
        target = rng.randint(1, 24)
        _wait_for_version(store_dir, target, host)
        time.sleep(rng.uniform(0.0, 0.05))
        if host.poll() is None:
            host.send_signal(signal.SIGKILL)
        host.wait()
        runs = _run_ids(store_dir)
        if not runs:  # killed before the Run was created: nothing to resume, nothing recorded
            continue
        (run_id,) = runs
        with open_store(store_dir) as store:
            # The Host's children die with it by a signal the kernel sends as it dies; one
            # still between fork and exec holds the lock for that moment.
            deadline = time.monotonic() + 10.0
            while host_alive(store, run_id) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not host_alive(store, run_id), _lock_holders(store_dir)
            state, _ = load_run(store, run_id)
        if state.finished is None:
            resumed_mid_run += 1
            done = subprocess.run(
                _cli("resume", run_id, "--store", str(store_dir)),
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, done.stderr
        with open_store(store_dir) as store:
            state, events = load_run(store, run_id)
            report = verify_store(store)
        assert report.ok, report.problems
        assert state.finished in ("finished", "budget_exhausted", "agent_exited"), state.finished
        assert isinstance(events[-1], RunFinished)
        started = [e for e in events if isinstance(e, EvaluationStarted)]
        ended = [e for e in events if isinstance(e, SubmissionPublished | EvaluationFailed)]
        # Every reserved evaluation ended exactly once, and the budget is exactly theirs.
        assert [e.submission_id for e in started] == [e.submission_id for e in ended]
        assert state.budget_used == sum(len(e.indices) for e in started)
        episodes = collections.Counter(
            (e.submission_id, e.index) for e in events if isinstance(e, EpisodeCompleted)
        )
        assert all(n == 1 for n in episodes.values()), "an Episode was recorded twice"
        assert sum(episodes.values()) == sum(len(e.indices) for e in started)
        assert len({e.attempt for e in events if isinstance(e, AgentStarted)}) == len(
            [e for e in events if isinstance(e, AgentStarted)]
        )
    assert resumed_mid_run >= TRIALS - 3, f"only {resumed_mid_run} trials were killed mid-run"


@pytest.mark.timeout(120)
def test_an_interrupted_run_says_so_until_resumed(tmp_path: Path) -> None:
    agent = tmp_path / "agent.py"
    agent.write_text("import time\ntime.sleep(600)\n")
    store_dir = tmp_path / "store"
    host = subprocess.Popen(
        _cli(
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "command",
            "--agent-command",
            f"{sys.executable} {agent}",
            "--budget",
            "4",
            "--store",
            str(store_dir),
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            runs = _run_ids(store_dir)
            if runs:
                with open_store(store_dir) as store:
                    _, events = load_run(store, runs[0])
                if any(isinstance(e, AgentStarted) for e in events):
                    break
            time.sleep(0.1)
        host.send_signal(signal.SIGKILL)
        host.wait()
    finally:
        if host.poll() is None:
            host.kill()
    (run_id,) = _run_ids(store_dir)
    listing = subprocess.run(
        _cli("record", "--store", str(store_dir), "list", "--json"), capture_output=True, text=True
    )
    assert listing.returncode == 0, listing.stderr
    import json

    (row,) = json.loads(listing.stdout)
    assert (row["run_id"], row["status"]) == (run_id, "interrupted")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_resumed_reference_agent_goes_on_from_what_it_did(tmp_path: Path) -> None:
    """SIGKILL the Host once the reference agent has published a few Submissions: after
    resume, its new start takes what the log (through its feedback) says it did and never
    submits a program again on Episodes it was already charged for."""
    store_dir = tmp_path / "store"
    command = _cli(
        "run",
        "--benchmark",
        "cartpole",
        "--agent",
        "reference",
        "--budget",
        "32",
        "--validation-episodes",
        "3",
        "--assessment-episodes",
        "3",
        "--store",
        str(store_dir),
    )
    host = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    published = 0
    while host.poll() is None and time.monotonic() < deadline and published < 3:
        time.sleep(0.1)
        if (store_dir / "events.db").exists():
            try:
                with open_store(store_dir) as store:
                    runs = _run_ids(store_dir)
                    if runs:
                        _, events = load_run(store, runs[0])
                        published = sum(isinstance(e, SubmissionPublished) for e in events)
            except StoreError:
                continue
    assert published >= 3, "the reference agent published fewer than 3 Submissions"
    host.send_signal(signal.SIGKILL)
    host.wait()
    (run_id,) = _run_ids(store_dir)
    done = subprocess.run(
        _cli("resume", run_id, "--store", str(store_dir)),
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    with open_store(store_dir) as store:
        state, events = load_run(store, run_id)
    assert state.finished == "finished"
    attempt, charged = 0, collections.defaultdict(set)
    for event in events:
        if isinstance(event, AgentStarted):
            attempt = event.attempt
        elif isinstance(event, EvaluationStarted):
            charged[attempt].add((event.program_digest, tuple(event.indices)))
    assert attempt == 2 and charged[1] and charged[2]
    assert not charged[1] & charged[2], (
        "the resumed agent submitted what it had already been charged for"
    )
