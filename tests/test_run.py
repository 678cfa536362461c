"""Runs end to end: a real store, real session socket, real Agent processes, real CartPole."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import AgentError, agent_identity
from evopolicygym.cli.group import main
from evopolicygym.program import Program
from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    AssessmentStarted,
    CandidateValidated,
    EpisodeCompleted,
    EvaluationStarted,
    FinalSubmissionSelected,
    FinishRejected,
    RunCreated,
    RunFinished,
    RunInterrupted,
    RunResumed,
    SubmissionPublished,
    SubmissionRejected,
    ValidationStarted,
    new_event,
)
from evopolicygym.records.location import Store, open_store
from evopolicygym.records.runs import run_stream_id
from evopolicygym.records.verify import verify_store
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.create import create_run
from evopolicygym.run.decider import Submit, decide
from evopolicygym.run.host import RunHost
from evopolicygym.run.ledger import event_id, load_run
from evopolicygym.run.liveness import RunBusy, run_lock
from evopolicygym.run.workspace import build_feedback
from tests.support.hostruns import agent_script, drive, new_run, of

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with open_store(tmp_path / "store", create=True) as opened:
        yield opened


def test_a_command_agent_runs_end_to_end(store: Store, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        assert cli("submit", "--episodes", "0:3")[0] == 0
        code, out, err = cli("submit", "program", "--episodes", "3:6")
        assert code == 0 and out["budget_left"] == 6, (code, out, err)
        feedback = os.path.join(os.environ["EVOPOLICY_WORKSPACE"], "feedback")
        latest = json.load(open(os.path.join(feedback, "latest.json")))
        assert latest["submission_id"] == 2 and latest["indices"] == [3, 4, 5]
        print(json.dumps({"role": "assistant", "content": "finishing with both"}), flush=True)
        assert cli("finish", "2", "1")[0] == 0
        """,
    )
    workspace = tmp_path / "ws"
    run_id = new_run(store, command)
    state, events = drive(store, run_id, workspace)
    assert state.finished == "finished"
    assert [type(e).__name__ for e in events[:2]] == ["RunCreated", "AgentStarted"]
    assert [e.submission_id for e in of(events, SubmissionPublished)] == [1, 2]
    assert of(events, AgentExited)[0].exit_code == 0
    validation = of(events, ValidationStarted)[0]
    assert validation.candidates == [2, 1] and validation.split == "validation"
    assert [c.submission_id for c in of(events, CandidateValidated)] == [2, 1]
    selected = of(events, FinalSubmissionSelected)[0]
    assessed = of(events, AssessmentStarted)[0]
    assert assessed.submission_id == selected.submission_id and assessed.split == "assessment"
    finished = of(events, RunFinished)[0]
    assert finished.reason == "finished" and finished.assessment_score is not None
    # The transcript starts with the task and holds what the Agent printed.
    messages = [m for chunk in of(events, AgentMessages) for m in chunk.messages]
    assert messages[0].role == "system" and "Session" in messages[0].content
    assert any(m.content == "finishing with both" for m in messages)
    # The workspace the Agent saw is exactly the projection of the log.
    on_disk = {
        str(p.relative_to(workspace / "feedback")): p.read_bytes()
        for p in (workspace / "feedback").rglob("*")
        if p.is_file()
    }
    assert on_disk == build_feedback(events, store.blobs, state.cfg.bulk_feedback_retention_bytes)
    report = verify_store(store)
    assert report.ok, report.problems
    # Train Episodes keep whole step traces (record_trajectories="train"); held-out ones none.
    from evopolicygym.records.traces import decode_trace

    for episode in of(events, EpisodeCompleted):
        assert episode.trace_blob is not None
        trace = decode_trace(store.blobs.get(episode.trace_blob))
        assert len(trace.steps) == episode.steps
        assert sum(step[1] for step in trace.steps) == episode.total_reward
        assert trace.initial_observation is not None and len(trace.initial_observation) == 4


def test_every_rejection_is_answered_and_recorded(store: Store, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        import shutil
        ws = os.environ["EVOPOLICY_WORKSPACE"]
        codes = []
        def code_of(result):
            return result[2]["error"]["code"] if result[0] == 1 else result[0]
        codes.append(code_of(cli("submit", "--episodes", "5:2")))        # invalid_request
        codes.append(code_of(cli("submit", "--episodes", "40")))         # invalid_request (outside)
        codes.append(code_of(cli("submit", "--episodes", "0:5")))        # episode_limit
        bad = os.path.join(ws, "analysis", "bad")
        os.makedirs(bad)
        open(os.path.join(bad, "policy.py"), "w").write("def make_policy(:\\n")
        codes.append(code_of(cli("submit", bad, "--episodes", "0")))     # program_invalid
        os.symlink("/etc/hostname", os.path.join(bad, "link"))
        codes.append(code_of(cli("submit", bad, "--episodes", "0")))     # program_invalid
        codes.append(code_of(cli("finish", "1")))                        # unknown_submission
        codes.append(code_of(cli("submit", "--episodes", "0:4")))        # ok
        codes.append(code_of(cli("submit", "--episodes", "0:4")))        # ok: a repeat is charged
        codes.append(code_of(cli("finish", "1", "1")))                   # duplicate_submission
        codes.append(code_of(cli("finish", "1", "1", "1")))              # duplicate_submission
        codes.append(code_of(cli("finish", "1")))                        # budget_remaining
        other = os.path.join(ws, "analysis", "other")
        shutil.copytree(os.path.join(ws, "program"), other)
        open(os.path.join(other, "note.txt"), "w").write("a different program")
        codes.append(code_of(cli("submit", other, "--episodes", "4:8")))   # budget_allocation
        codes.append(code_of(cli("submit", other, "--episodes", "8:11")))  # budget_allocation
        codes.append(code_of(cli("submit", other, "--episodes", "8:10")))  # ok: budget spent
        codes.append(code_of(cli("submit", other, "--episodes", "0")))     # budget_exhausted
        codes.append(code_of(cli("finish", "1", "2", "1")))                # duplicate_submission
        codes.append(code_of(cli("finish", "1", "2")))                     # ok
        codes.append(code_of(cli("finish", "1")))                          # session_closed
        codes.append(code_of(cli("submit", "--episodes", "0")))           # session_closed
        print(json.dumps({"role": "assistant", "content": json.dumps(codes)}), flush=True)
        """,
    )
    config = RunConfig(
        episode_budget=10,
        episode_pool_size=12,
        max_episodes_per_submission=4,
        max_submissions=4,
        finish_budget_policy="require_budget_exhaustion",
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=2),
        assessment=AssessmentConfig(enabled=False),
    )
    run_id = new_run(store, command, config)
    state, events = drive(store, run_id)
    messages = [
        m for chunk in of(events, AgentMessages) for m in chunk.messages if m.role == "assistant"
    ]
    codes = json.loads(messages[-1].content)
    assert codes == [
        "invalid_request",
        "invalid_request",
        "episode_limit",
        "program_invalid",
        "program_invalid",
        "unknown_submission",
        0,
        0,
        "duplicate_submission",
        "duplicate_submission",
        "budget_remaining",
        "budget_allocation",
        "budget_allocation",
        0,
        "budget_exhausted",
        "duplicate_submission",
        0,
        "session_closed",
        "session_closed",
    ]
    recorded = [e.code for e in events if isinstance(e, SubmissionRejected | FinishRejected)]
    assert recorded == [c for c in codes if c != 0]  # every rejection is in the log, in order
    assert state.budget_used == 10 and state.finished == "finished"
    assert state.selected in (1, 2, 3) and state.assessment_score is None


def test_an_agent_that_exits_without_finishing(store: Store, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        cli("submit", "--episodes", "0:2")
        sys.exit(3)
        """,
    )
    run_id = new_run(store, command)
    state, events = drive(store, run_id)
    assert of(events, AgentExited)[0].exit_code == 3
    # No handoff, no candidates: the Run has no final program.
    assert state.finished == "agent_failed"
    assert not of(events, ValidationStarted) and state.selected is None
    (done,) = of(events, RunFinished)
    assert (done.handoff, done.final_submission_id, done.improved) == ("none", None, None)


def test_host_nomination_is_asked_for_and_recorded(store: Store, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        cli("submit", "--episodes", "0:2")
        sys.exit(3)
        """,
    )
    config = RunConfig(
        episode_budget=4,
        host_nomination=True,
        validation=ValidationConfig(episodes_per_candidate=2),
        assessment=AssessmentConfig(episodes=2),
    )
    run_id = new_run(store, command, config)
    state, events = drive(store, run_id)
    # The Host nominated the Agent's only published Submission and still measured it.
    assert state.finished == "agent_failed"
    (started,) = of(events, ValidationStarted)
    assert (started.candidates, started.handoff) == ([1], "host")
    assert state.selected == 1 and state.assessment_score is not None
    (done,) = of(events, RunFinished)
    assert done.handoff == "host" and done.reference_score is not None


def test_an_agent_that_exits_cleanly_without_candidates(store: Store, tmp_path: Path) -> None:
    run_id = new_run(store, agent_script(tmp_path, "pass\n"))
    state, events = drive(store, run_id)
    assert state.finished == "agent_exited"
    assert not of(events, ValidationStarted) and state.selected is None


def test_an_agent_over_its_time_is_stopped(store: Store, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        import time
        cli("submit", "--episodes", "0:2")
        time.sleep(600)
        """,
    )
    config = RunConfig(
        episode_budget=4,
        agent_timeout=3.0,
        host_nomination=True,
        validation=ValidationConfig(enabled=False),
        assessment=AssessmentConfig(enabled=False),
    )
    run_id = new_run(store, command, config)
    state, events = drive(store, run_id)
    exited = of(events, AgentExited)[0]
    assert exited.reason == "timeout" and exited.signal is not None
    assert state.finished == "agent_failed"
    assert state.selected == 1  # validation disabled: the nominated candidate is taken as is


def test_a_missing_agent_command_is_refused_before_the_run() -> None:
    with pytest.raises(AgentError, match="not found"):
        agent_identity("command", command="no-such-agent-binary --x")


def test_only_one_host_carries_a_run(store: Store, tmp_path: Path) -> None:
    run_id = new_run(store, agent_script(tmp_path, "pass\n"))
    with run_lock(store, run_id), pytest.raises(RunBusy):
        RunHost(store, run_id, launcher=ProviderLauncher()).drive()


def test_resume_reruns_a_reserved_evaluation_once_and_restarts_the_agent(
    store: Store, tmp_path: Path
) -> None:
    """The Host died after reserving budget for Submission 1 and before publishing it."""
    marker = tmp_path / "attempts"
    command = agent_script(
        tmp_path,
        f"""
        with open({str(marker)!r}, "a") as f:
            f.write("x")
        ws = os.environ["EVOPOLICY_WORKSPACE"]
        latest = json.load(open(os.path.join(ws, "feedback", "latest.json")))
        assert latest["submission_id"] == 1 and latest["status"] == "published"
        cli("finish", "1")
        """,
    )
    run_id = new_run(store, command)
    state, events = load_run(store, run_id)
    program = Program.from_files(
        {
            "policy.py": "def make_policy(c):\n    return P()\n"
            "class P:\n    def act(self, o):\n        return 0\n"
        }
    )
    store.blobs.put_program(program)
    stream = run_stream_id(run_id)
    started = AgentStarted(attempt=1, command=["gone"], pid=None)
    store.events.append(stream, [new_event(started, event_id(run_id, 2))], 1)
    state, _ = load_run(store, run_id)
    decision = decide(state, Submit(request_id="r1", selector="0:4", program_digest=program.digest))
    assert isinstance(decision, list)
    store.events.append(stream, [new_event(decision[0], event_id(run_id, 3))], 2)

    state, events = drive(store, run_id)
    assert state.finished == "finished"
    assert marker.read_text() == "x"  # the Agent was started once more, on attempt 2
    assert [e.attempt for e in of(events, AgentStarted)] == [1, 2]
    assert of(events, AgentExited)[0].reason == "host_interrupted"
    assert len(of(events, RunInterrupted)) == 1 and len(of(events, RunResumed)) == 1
    assert len(of(events, EvaluationStarted)) == 1
    assert [e.index for e in of(events, EpisodeCompleted)] == [0, 1, 2, 3]
    assert state.budget_used == 4


def test_run_and_replay_from_the_command_line(tmp_path: Path) -> None:
    command = agent_script(tmp_path, 'cli("submit", "--episodes", "0:2")\ncli("finish", "1")\n')
    store = str(tmp_path / "cli-store")
    runner = CliRunner()
    result = runner.invoke(
        main,
        [
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "command",
            "--agent-command",
            command,
            "--budget",
            "4",
            "--validation-episodes",
            "2",
            "--assessment-episodes",
            "2",
            "--store",
            store,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    assert outcome["status"] == "finished" and outcome["final_submission_id"] == 1
    assert outcome["budget_used"] == 2 and outcome["assessment_score"] is not None
    assert "seed" not in result.stdout
    with open_store(store) as opened:
        created = next(iter(opened.events.read_stream(run_stream_id(outcome["run_id"])))).event()
        assert isinstance(created, RunCreated) and created.agent.provider == "command"


def test_bad_run_options_are_one_line_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    store = str(tmp_path / "s")
    for args, needle in [
        (["--agent", "command"], "--agent-command"),
        (
            ["--budget", "4", "--max-episodes-per-submission", "9"],
            "--max-episodes-per-submission must be between 1 and --pool-size",
        ),
        (["--agent", "command", "--agent-command", "no-such-agent-x"], "not found"),
    ]:
        result = runner.invoke(main, ["run", "--benchmark", "cartpole", "--store", store, *args])
        assert result.exit_code != 0 and needle in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    result = runner.invoke(main, ["run", "--benchmark", "no-such-bench", "--store", store])
    assert result.exit_code != 0 and "no-such-bench" in result.output


@pytest.mark.slow
def test_the_reference_agent_evolves_cartpole_beyond_its_baseline(store: Store) -> None:
    """Budget 64 through the real session: its selected program must clearly beat the
    packaged baseline on the same hidden validation Episodes."""
    from evopolicygym.evaluation import EvaluationConfig, evaluate
    from evopolicygym.registry import baseline_dir, load_benchmark
    from evopolicygym.run.pool import planned_split

    config = RunConfig(
        episode_budget=64,
        validation=ValidationConfig(episodes_per_candidate=16, max_candidates=3),
        assessment=AssessmentConfig(episodes=16),
    )
    run_id = create_run(store, "cartpole", config, agent_identity("reference"))
    state, events = drive(store, run_id)
    assert state.finished == "finished" and state.budget_used <= 64
    published = of(events, SubmissionPublished)
    assert len(published) >= 8
    # Its transcript is a real conversation: reasoning, tool calls and their results.
    messages = [m for chunk in of(events, AgentMessages) for m in chunk.messages]
    calls = [c for m in messages for c in m.tool_calls]
    assert {c.name for c in calls} >= {"read_file", "write_file", "bash"}
    results = {m.tool_call_id for m in messages if m.role == "tool"}
    assert {c.id for c in calls} <= results
    assert any("session submit" in str(c.arguments.get("command", "")) for c in calls)
    assert any("session finish" in str(c.arguments.get("command", "")) for c in calls)

    benchmark = load_benchmark("cartpole")
    directory = baseline_dir(benchmark)
    assert directory is not None
    episodes = planned_split(benchmark, "validation", state.seeds["validation"], 16)
    baseline = evaluate(
        Program.from_directory(directory),
        benchmark,
        EvaluationConfig(split="validation", episodes=16),
        episodes=episodes,
    ).feedback.score
    assert state.selected_score is not None
    assert state.selected_score >= 1.5 * baseline, (state.selected_score, baseline)
    assert state.selected_score >= 300


def test_the_session_client_stays_light() -> None:
    """Agents call `evopolicy session` once per request: it must not import the engine."""
    import subprocess

    probe = (
        "import sys, evopolicygym.cli.group, evopolicygym.cli.session; "
        "print(sorted(m for m in ('numpy', 'gymnasium', 'evopolicygym.evaluation') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_whole_transcript_is_kept_and_leftovers_are_ended(store: Store, tmp_path: Path) -> None:
    """Every message line the Agent printed before exiting is recorded (stdout is read to its
    end before the last flush); a process it left behind dies with the attempt; a line too
    long for the transcript stays in the raw stream only."""
    heartbeat = tmp_path / "leftover.beat"
    command = agent_script(
        tmp_path,
        f"""
        import subprocess
        subprocess.Popen(["sh", "-c", "while true; do date +%s%N > {heartbeat}; sleep 0.05; done"])
        sys.stdout.write("x" * (3 << 20) + "\\n")
        for i in range(3000):
            print(json.dumps({{"role": "assistant", "content": f"line {{i}}", "at": 10**23}}))
        sys.stdout.flush()
        """,
    )
    run_id = new_run(store, command)
    _, events = drive(store, run_id)
    messages = [
        m for chunk in of(events, AgentMessages) for m in chunk.messages if m.role == "assistant"
    ]
    assert [m.content for m in messages] == [f"line {i}" for i in range(3000)]
    assert all(m.at < 10**19 for m in messages)  # stamped by the Host, not the Agent
    raw = store.blobs.get(of(events, AgentExited)[0].stdout_blob)
    assert raw.startswith(b"x" * (3 << 20))
    # The leftover (it beats every 50 ms; its pid lives in the Agent's own PID namespace)
    # has stopped beating.
    last = heartbeat.read_text()
    time.sleep(0.5)
    assert heartbeat.read_text() == last


def test_a_resumed_run_keeps_the_agents_unsubmitted_edits(tmp_path: Path) -> None:
    """SIGKILL the Host while the Agent has an unsubmitted edit in program/; the resumed
    Agent finds it in the same (remembered) workspace."""
    import signal
    import subprocess

    command = agent_script(
        tmp_path,
        """
        import time
        edit = os.path.join(os.environ["EVOPOLICY_WORKSPACE"], "program", "unsubmitted.txt")
        if os.path.exists(edit):
            cli("submit", "--episodes", "0:2")
            cli("finish", "1")
            sys.exit(0)
        open(edit, "w").write("work in progress")
        time.sleep(600)
        """,
    )
    store_dir = tmp_path / "store"
    cli = [sys.executable, "-m", "evopolicygym.cli"]
    host = subprocess.Popen(
        [
            *cli,
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "command",
            "--agent-command",
            command,
            "--budget",
            "4",
            "--no-validation",
            "--no-assessment",
            "--store",
            str(store_dir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            notes = list(store_dir.glob("runs/*.workspace"))
            if (
                notes
                and (Path(notes[0].read_text().strip()) / "program" / "unsubmitted.txt").exists()
            ):
                break
            time.sleep(0.05)
        host.send_signal(signal.SIGKILL)
        host.wait()
    finally:
        if host.poll() is None:
            host.kill()
    with open_store(store_dir) as opened:
        (info,) = opened.events.streams("run-")
        run_id = info.stream_id[len("run-") :]
    done = subprocess.run(
        [*cli, "resume", run_id, "--store", str(store_dir), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "finished" and outcome["final_submission_id"] == 1
    assert not list(store_dir.glob("runs/*.workspace"))  # the temporary workspace is gone


@pytest.mark.skipif(
    os.environ.get("EVOPOLICY_CONTAINMENT") == "process-group", reason="containment turned off"
)
def test_the_agent_cannot_see_the_store_or_the_host(store: Store, tmp_path: Path) -> None:
    """The Agent runs in its own mount and PID namespaces: the store directory is an empty
    tmpfs for it, and /proc holds only its own processes (not the Host's cwd or files)."""
    command = agent_script(
        tmp_path,
        f"""
        store = {str(store.path.resolve())!r}
        seen = {{"store": sorted(os.listdir(store)) if os.path.isdir(store) else None}}
        try:
            open(os.path.join(store, "events.db"), "rb").read(16)
            seen["events_db"] = "readable"
        except OSError:
            seen["events_db"] = "hidden"
        cmdlines = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    environ = open(f"/proc/{{pid}}/environ", "rb").read()
                    cmdlines.append(environ.decode(errors="replace"))
                except OSError:
                    pass
        seen["host_visible"] = any("PYTEST_CURRENT_TEST" in c for c in cmdlines)  # pytest's own
        seen["processes"] = len(cmdlines)
        print(json.dumps({{"role": "assistant", "content": json.dumps(seen)}}), flush=True)
        cli("submit", "--episodes", "0:2")
        cli("finish", "1")
        """,
    )
    run_id = new_run(store, command)
    state, events = drive(store, run_id)
    assert state.finished == "finished"  # the session still works from inside
    messages = [
        m for chunk in of(events, AgentMessages) for m in chunk.messages if m.role == "assistant"
    ]
    seen = json.loads(messages[0].content)
    assert seen["store"] == [] and seen["events_db"] == "hidden"
    assert seen["host_visible"] is False and seen["processes"] <= 8
    assert (store.path / "events.db").exists()  # hidden from the Agent only


def test_a_malformed_request_is_refused_and_recorded(store: Store, tmp_path: Path) -> None:
    command = agent_script(
        tmp_path,
        """
        import socket, struct
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(os.environ["EVOPOLICY_SESSION"])
        sock.sendall(struct.pack(">I", 5) + b"\\xc1\\xc1\\xc1\\xc1\\xc1")
        size = struct.unpack(">I", sock.recv(4))[0]
        reply = b""
        while len(reply) < size:
            reply += sock.recv(size - len(reply))
        print(json.dumps({"role": "assistant", "content": reply.hex()}), flush=True)
        """,
    )
    run_id = new_run(store, command)
    state, events = drive(store, run_id)
    (rejected,) = of(events, SubmissionRejected)
    assert rejected.code == "invalid_request" and rejected.message.startswith("malformed request")
    assert state.budget_used == 0


def test_quickstart_runs_replays_and_verifies(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["quickstart", "--store", str(tmp_path / "qs"), "--budget", "8"]
    )
    assert result.exit_code == 0, result.output
    assert "the Run verifies" in result.stdout
    assert "packaged baseline" in result.stdout and "What next:" in result.stdout
    with open_store(tmp_path / "qs") as opened:
        (info,) = opened.events.streams("run-")
        state, _ = load_run(opened, info.stream_id[len("run-") :])
    assert state.finished == "finished" and state.budget_used <= 8
