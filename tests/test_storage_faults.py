"""The store's disk fills up or turns read-only in the middle of a Run: the Host stops with
one line saying what happened and how to carry on, charges no budget for it, records no
failed evaluation, and `evopolicy resume` finishes the Run with the budget exact.

Real faults, not patched ones: the store lives on a small tmpfs of its own, mounted in a
user and mount namespace made for the test (``unshare``), and the Agent — in that same
namespace, since nothing contains it here — fills that tmpfs, or makes the store's blob
directory a read-only mount, between two Submissions. The remedy (delete the filler,
remount writable) happens before the resume, as a user would do it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evopolicygym.records.events import (
    EvaluationFailed,
    RunFinished,
    RunInterrupted,
    SubmissionPublished,
)
from evopolicygym.records.location import open_store
from evopolicygym.records.verify import verify_store
from evopolicygym.run.ledger import load_run

pytestmark = pytest.mark.skipif(
    shutil.which("unshare") is None, reason="util-linux's unshare is not installed"
)

AGENT = r"""
import json, os, subprocess, sys
disk, fault, mark = sys.argv[1], sys.argv[2], sys.argv[3]
def session(*args):
    return subprocess.run(["./evopolicy", "session", *args], capture_output=True, text=True)
if not os.path.exists(mark):  # the first attempt: one Submission, then the fault, then another
    open(mark, "w").close()
    assert session("submit", "--episodes", "0:2").returncode == 0
    if fault == "full":
        try:
            with open(os.path.join(disk, "filler"), "wb") as handle:
                while True:
                    handle.write(b"\0" * 65536)
                    handle.flush()
        except OSError:
            pass
    else:  # the blobs' part of the store on read-only media (the log is open for writing,
        # which a read-only remount of its own mount would refuse with EBUSY)
        blobs = os.path.join(disk, "store", "blobs")
        remount = f"mount --bind {blobs} {blobs} && mount -o remount,bind,ro {blobs}"
        subprocess.run(["sh", "-c", remount], check=True)
    session("submit", "--episodes", "2:4")
    import time; time.sleep(60)  # the Host stops this attempt
else:  # the resumed attempt: whatever the fault left undone, then finish
    session("submit", "--episodes", "2:4")
    session("finish", "1")
"""

DRIVER = r"""
import json, os, subprocess, sys
disk, store, agent, mark, fault, out = sys.argv[1:7]
cli = [sys.executable, "-m", "evopolicygym.cli"]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", disk], check=True)
run = subprocess.run([*cli, "run", "--benchmark", "cartpole", "--budget", "4",
                      "--validation-episodes", "2", "--max-candidates", "1",
                      "--assessment-episodes", "2", "--agent", "command",
                      "--agent-command", f"{sys.executable} {agent} {disk} {fault} {mark}",
                      "--agent-timeout", "120", "--store", store, "--json"],
                     capture_output=True, text=True)
# the remedy
if fault == "full":
    os.remove(os.path.join(disk, "filler"))
else:
    subprocess.run(["umount", os.path.join(store, "blobs")], check=True)
listed = subprocess.run([*cli, "record", "--store", store, "list", "--json"],
                        capture_output=True, text=True, check=True)
run_id = json.loads(listed.stdout)[0]["run_id"]
resumed = subprocess.run([*cli, "resume", run_id, "--store", store, "--json"],
                         capture_output=True, text=True)
subprocess.run(["cp", "-a", store, out], check=True)
print(json.dumps({"run": [run.returncode, run.stderr],
                  "resumed": [resumed.returncode, resumed.stderr], "run_id": run_id}))
"""


@pytest.mark.parametrize(
    ("fault", "what"), [("full", "store full"), ("readonly", "store on read-only media")]
)
def test_a_store_fault_interrupts_the_run_and_resume_finishes_it(
    tmp_path: Path, fault: str, what: str
) -> None:
    disk, out = tmp_path / "disk", tmp_path / "copy"
    disk.mkdir()
    agent, driver = tmp_path / "agent.py", tmp_path / "driver.py"
    agent.write_text(AGENT)
    driver.write_text(DRIVER)
    env = {**os.environ, "EVOPOLICY_CONTAINMENT": "process-group"}  # the Agent shares the namespace
    done = subprocess.run(
        [
            "unshare",
            "--user",
            "--map-root-user",
            "--mount",
            sys.executable,
            str(driver),
            str(disk),
            str(disk / "store"),
            str(agent),
            str(tmp_path / "started"),
            fault,
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    (code, stderr), (resumed_code, resumed_stderr) = report["run"], report["resumed"]
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert code != 0 and "Traceback" not in stderr, stderr
    assert (
        len(lines) == 1 and what in lines[0] and f"evopolicy resume {report['run_id']}" in lines[0]
    ), stderr
    assert resumed_code == 0, resumed_stderr

    with open_store(out) as store:
        state, events = load_run(store, report["run_id"])
        assert verify_store(store).ok
    assert not [e for e in events if isinstance(e, EvaluationFailed)]
    assert [e for e in events if isinstance(e, RunInterrupted)]
    assert state.budget_used == 4
    assert sorted(e.submission_id for e in events if isinstance(e, SubmissionPublished)) == [1, 2]
    assert next(e for e in events if isinstance(e, RunFinished)).reason == "finished"
