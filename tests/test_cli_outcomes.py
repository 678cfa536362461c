"""How `evopolicy run`, `resume` and `evaluate` end, as a user or a script sees it: the exit
status by terminal reason (0 only for a finished Run, the same with --json), and one clean
"interrupted" line on a real SIGINT, after which the Run resumes to its end."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from evopolicygym.cli import main
from evopolicygym.cli.run_exits import EXIT_AGENT, exit_status
from tests.support.cli import CLI, SMALL, small_run


def _agent(tmp_path: Path, body: str) -> str:
    prelude = textwrap.dedent(
        """
        import json, os, subprocess, sys, time
        CLI = json.loads(os.environ["EVOPOLICY_CLI"])
        WORKSPACE = os.environ["EVOPOLICY_WORKSPACE"]

        def cli(*args):
            done = subprocess.run([*CLI, "session", *args], capture_output=True, text=True)
            return done.returncode
        """
    )
    path = tmp_path / "agent.py"
    path.write_text(prelude + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def test_exit_status_by_terminal_reason() -> None:
    assert exit_status("finished") == 0
    assert {exit_status(r) for r in ("agent_failed", "agent_exited", "budget_exhausted")} == {3}
    assert {
        exit_status(r) for r in ("evaluation_failed", "validation_failed", "assessment_failed")
    } == {4}
    assert exit_status("interrupted") == 130


@pytest.mark.parametrize("as_json", [False, True])
def test_a_run_whose_agent_fails_exits_non_zero(tmp_path: Path, as_json: bool) -> None:
    result = CliRunner().invoke(
        main,
        [
            *small_run("false", tmp_path / "s"),
            *(["--json"] if as_json else []),
        ],
    )
    assert result.exit_code == EXIT_AGENT, result.output
    if as_json:
        assert json.loads(result.stdout)["status"] == "agent_failed"


def test_the_exit_statuses_are_documented() -> None:
    for command in ("run", "resume"):
        helped = CliRunner().invoke(main, [command, "--help"])
        assert (
            "Exit status:" in helped.output
            and "130" in helped.output
            and "agent_failed" in helped.output
        )
    helped = CliRunner().invoke(main, ["evaluate", "--help"])
    assert "every Episode failed" in helped.output
    docs = Path(__file__).parents[1] / "docs" / "reference" / "runs.md"
    reference = " ".join(docs.read_text().split())
    for documented in (
        "| `0` | the Run finished",
        "| `3` | the Agent handed nothing off",
        "| `4` | a Host evaluation failed",
        "| `130` | interrupted",
        "`3` every Episode failed",
    ):
        assert documented in reference


def test_resuming_a_finished_run_says_there_was_nothing_to_resume(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    command = _agent(tmp_path, 'cli("submit", "--episodes", "0:2")\ncli("finish", "1")\n')
    runner = CliRunner()
    ran = runner.invoke(
        main,
        [
            *small_run(command, store),
            "--json",
        ],
    )
    assert ran.exit_code == 0, ran.output
    run_id = json.loads(ran.stdout)["run_id"]
    again = runner.invoke(main, ["resume", run_id, "--store", store, "--json"])
    assert again.exit_code == 0
    assert "nothing to resume" in again.stderr
    assert json.loads(again.stdout)["status"] == "finished"


def test_sigint_stops_a_run_with_one_line_and_resume_finishes_it(tmp_path: Path) -> None:
    """A real SIGINT to a real `evopolicy run` while its Agent works: one "interrupted; resume
    with: …" line and no traceback; the pasted hint carries the Run to its end."""
    store = tmp_path / "store"
    # Attempt 1 submits, then works forever; attempt 2 (after resume) finishes.
    command = _agent(
        tmp_path,
        """
        marker = os.path.join(WORKSPACE, "analysis", "attempted")
        if os.path.exists(marker):
            sys.exit(cli("finish", "1"))
        open(marker, "w").close()
        cli("submit", "--episodes", "0:2")
        time.sleep(600)
        """,
    )
    # As a user who typed `evopolicy` sees it (under `uv run` the hint says `uv run evopolicy`).
    env = {
        **{k: v for k, v in os.environ.items() if k != "UV_RUN_RECURSION_DEPTH"},
        "NO_COLOR": "1",
    }
    process = subprocess.Popen(
        [
            *CLI,
            *small_run(command, store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # the live view's lines, off a terminal
        seen.append(line)
        if line.startswith("submission 1"):
            break
    else:
        pytest.fail(f"the Run never published its Submission: {''.join(seen)}")
    process.send_signal(signal.SIGINT)
    rest = process.stderr.read()
    assert process.wait() == 130
    stderr = "".join(seen) + rest
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if "interrupted" in line]
    assert len(lines) == 1 and lines[0].startswith("interrupted; resume with: evopolicy resume "), (
        stderr
    )
    assert stderr.strip().splitlines()[-1] == lines[0]
    hint = lines[0].split(": ", 1)[1].split()
    assert hint[:2] == ["evopolicy", "resume"] and "--store" in hint
    resumed = subprocess.run(
        [*CLI, *hint[1:], "--json"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    outcome = json.loads(resumed.stdout)
    assert outcome["status"] == "finished" and outcome["final_submission_id"] == 1
    assert not list((store / "runs").glob("*.workspace"))  # the temporary workspace is gone


@pytest.mark.parametrize(
    ("phase", "after"), [("validation", "agent exited"), ("assessment", "selected submission")]
)
def test_sigint_during_validation_or_assessment_is_one_line_and_leaves_no_temporary_directory(
    tmp_path: Path, phase: str, after: str
) -> None:
    """A real SIGINT while the Host evaluates on its own (the Agent has exited): the same one
    line and status 130, no traceback from the runners or the fork server, and neither the
    temporary workspace nor the Host's private directory is left behind."""
    store = tmp_path / "store"
    command = _agent(tmp_path, 'cli("submit", "--episodes", "0:2")\nsys.exit(cli("finish", "1"))\n')
    episodes = {
        "validation": "2",
        "assessment": "2",
        phase: "2000",
    }  # the phase interrupted is long
    process = subprocess.Popen(
        [
            *CLI,
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "command",
            "--agent-command",
            command,
            "--budget",
            "4",
            "--max-candidates",
            "1",
            "--validation-episodes",
            episodes["validation"],
            "--assessment-episodes",
            episodes["assessment"],
            "--allow-uncontained-agent",
            "--store",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        cwd=tmp_path,
    )
    assert process.stderr is not None
    seen = []
    for line in process.stderr:  # the live view's lines, off a terminal
        seen.append(line)
        if line.startswith(after):
            break
    else:
        pytest.fail(f"the Run never reached its {phase}: {''.join(seen)}")
    # The Agent is gone: these policies are the phase's.
    _sigint_once_ready(
        process, _episodes_started(3), "the Run", lambda: "".join(seen) + process.stderr.read()
    )
    stderr = "".join(seen) + process.stderr.read()
    assert process.wait() == 130, stderr
    assert "Traceback" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("interrupted")] == lines[-1:], stderr
    hint = lines[-1].removeprefix("interrupted; resume with: ").split()
    run_id = hint[hint.index("resume") + 1]
    assert not list((store / "runs").glob("*.workspace"))
    temp = tempfile.gettempdir()
    assert not glob.glob(os.path.join(temp, f"evopolicy-{run_id}-*"))  # the temporary workspace
    assert not glob.glob(os.path.join(temp, f"evopolicy-h{process.pid}-*"))  # the Host's own


def test_sigint_while_a_submission_is_evaluated_stops_its_evaluation(tmp_path: Path) -> None:
    """A real SIGINT while the Host evaluates a Submission for its Agent (in the session's
    thread, not the one the signal interrupts): that evaluation stops too, so the Run ends
    interrupted with the Submission still reserved (evaluated again on resume), neither
    published nor recorded as failed, instead of the Host waiting for all its Episodes."""
    store = tmp_path / "store"
    command = _agent(tmp_path, 'cli("submit", "--episodes", "0:3000")\ntime.sleep(600)\n')
    process = subprocess.Popen(
        [
            *CLI,
            "run",
            "--benchmark",
            "cartpole",
            "--agent",
            "command",
            "--agent-command",
            command,
            "--budget",
            "3000",
            "--max-candidates",
            "1",
            "--validation-episodes",
            "2",
            "--assessment-episodes",
            "2",
            "--allow-uncontained-agent",
            "--store",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
        cwd=tmp_path,
    )
    _sigint_once_ready(process, _episodes_started(3), "the Run")
    _, stderr = process.communicate()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "submission 1" not in stderr, stderr
    lines = stderr.strip().splitlines()
    assert lines[-1].startswith("interrupted; resume with: "), stderr
    hint = lines[-1].split(": ", 1)[1].split()
    shown = subprocess.run(
        [*CLI, "record", "show", hint[hint.index("resume") + 1], "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    run = json.loads(shown.stdout)
    assert run["status"] == "interrupted"
    assert [(s["submission_id"], s["status"], s["score"]) for s in run["submissions"]] == [
        (1, "evaluating", None)
    ]


def _interrupted_evaluate(tmp_path: Path, jobs: int, when: str) -> tuple[int, str]:
    """A real SIGINT to a real `evopolicy evaluate`, ``when`` "start-up" (its first grandchild
    exists: the fork server's serving process where it re-parents into a PID namespace of its
    own, or else the first policy process) or "episodes" (a third policy process has started:
    Episodes are under way in every job). Returns its status and all of its stderr, which
    ends only once every process that inherited it (runners, fork server) has exited."""
    process = subprocess.Popen(
        [
            *CLI,
            "evaluate",
            "baseline",
            "--benchmark",
            "cartpole",
            "--episodes",
            "100000",
            "--jobs",
            str(jobs),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    _sigint_once_ready(
        process, _has_grandchild if when == "start-up" else _episodes_started(3), "evaluate"
    )
    _, stderr = process.communicate()
    # The Host's private directory (the fork server's socket, programs, scratch) is gone.
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"evopolicy-h{process.pid}-*"))
    return process.returncode, stderr


@pytest.mark.parametrize(
    ("jobs", "when"), [(1, "start-up"), (1, "episodes"), (2, "start-up"), (2, "episodes")]
)
def test_sigint_stops_evaluate_without_a_worker_traceback(
    tmp_path: Path, jobs: int, when: str
) -> None:
    """One "interrupted" line and status 130, nothing else ("Aborted!", a traceback) from the
    CLI or the processes that share its terminal: runners ignore Ctrl-C and end quietly when
    the Host closes or resets their channel mid-Episode; a fork server the Host stopped
    waiting for while it started is stopped, and quiet if it meets its removed directory."""
    returncode, stderr = _interrupted_evaluate(tmp_path, jobs, when)
    assert (returncode, stderr.splitlines()) == (130, ["interrupted"]), stderr


def _loaded_numpy(pid: int) -> bool:
    """``pid`` has mapped NumPy's core extension: a command module is being imported, before
    any command's own stop is set up."""
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "baseline", "--benchmark", "cartpole", "--episodes", "100000"],
        ["run", "--benchmark", "cartpole", *SMALL, "--store", "store"],
    ],
)
def test_sigint_while_the_command_loads_is_the_same_one_line(
    tmp_path: Path, command: list[str]
) -> None:
    """Ctrl-C while a command is still being loaded (NumPy, the Benchmarks) is not click's
    "Aborted!" and status 1: the command line says "interrupted" (and, where a Run was
    recorded, how to resume it) and exits 130, with no traceback."""
    process = subprocess.Popen(
        [*CLI, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path
    )
    _sigint_once_ready(process, _loaded_numpy, "the command", pause=0.001)
    _, stderr = process.communicate()
    lines = stderr.splitlines()
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr and "Aborted" not in stderr, stderr
    assert lines and lines[-1].startswith("interrupted"), stderr


def _sigint_once_ready(
    process: subprocess.Popen[str],
    ready: Callable[[int], bool],
    what: str,
    output: Callable[[], str] | None = None,
    *,
    pause: float = 0.002,
) -> None:
    """SIGINT ``process`` as soon as ``ready(pid)``; fail the test, showing ``output`` (else
    all of its stderr), if it ends before."""
    while not ready(process.pid):
        if process.poll() is not None:
            pytest.fail(
                f"{what} ended before the SIGINT: "
                f"{output() if output else process.communicate()[1]}"
            )
        time.sleep(pause)
    process.send_signal(signal.SIGINT)


def _children(pid: int) -> list[int]:
    try:
        return [
            int(c)
            for t in os.listdir(f"/proc/{pid}/task")
            for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()
        ]
    except OSError:
        return []


def _has_grandchild(pid: int) -> bool:
    return any(_children(child) for child in _children(pid))


def _leads_a_session(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return int(stat[stat.rindex(")") + 2 :].split()[3]) == pid  # field 6, the session id


def _episodes_started(count: int) -> Callable[[int], bool]:
    """A check that ``pid``'s evaluation has started ``count`` policy processes so far: the
    session leaders below its children (the fork server, a child, leads one too)."""
    seen: set[int] = set()

    def check(pid: int) -> bool:
        below = [(child, 1) for child in _children(pid)]
        while below:
            process, depth = below.pop()
            below.extend((child, depth + 1) for child in _children(process))
            if depth >= 2 and _leads_a_session(process):
                seen.add(process)
        return len(seen) >= count

    return check


def _one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output
    ), result.output
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--benchmark", "cartpole", "--store", "{file}"],
        ["quickstart", "--store", "{file}"],
        ["record", "--store", "{file}", "list"],
        ["record", "--store", "{file}", "create"],
    ],
)
def test_a_store_that_is_a_file_is_one_line(tmp_path: Path, args: list[str]) -> None:
    file = tmp_path / "afile"
    file.write_text("mine")
    line = _one_line_error(CliRunner().invoke(main, [a.format(file=file) for a in args]))
    assert "not a directory" in line and "record create" not in line
    assert file.read_text() == "mine"


def test_a_workspace_that_is_a_file_is_refused_before_the_run_is_recorded(tmp_path: Path) -> None:
    file = tmp_path / "afile"
    file.write_text("mine")
    store = tmp_path / "s"
    line = _one_line_error(
        CliRunner().invoke(
            main,
            ["run", "--benchmark", "cartpole", "--workspace", str(file), "--store", str(store)],
        )
    )
    assert "--workspace" in line and "not a directory" in line
    assert not (store / "events.db").exists()  # no Run, interrupted or otherwise, was recorded


def test_a_workspace_holding_the_users_files_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "mine"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("keep")
    store = tmp_path / "s"
    line = _one_line_error(
        CliRunner().invoke(
            main,
            [
                "run",
                "--benchmark",
                "cartpole",
                "--workspace",
                str(workspace),
                "--store",
                str(store),
            ],
        )
    )
    assert "--workspace" in line and "notes.txt" in line
    assert sorted(p.name for p in workspace.iterdir()) == ["notes.txt"]
    assert not (store / "events.db").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "baseline", "--benchmark", "gymnasium:CartPole-v1", "--param", "foo=bar"],
        ["benchmarks", "show", "gymnasium:CartPole-v1", "--param", "foo=bar"],
        ["benchmarks", "check", "gymnasium:CartPole-v1", "--param", "foo=bar"],
    ],
)
def test_a_parameter_the_environment_does_not_take_is_one_line(args: list[str]) -> None:
    line = _one_line_error(CliRunner().invoke(main, args))
    assert "--param foo=bar" in line and "'foo'" in line


def test_run_refuses_a_parameter_the_environment_does_not_take_before_recording(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s"
    line = _one_line_error(
        CliRunner().invoke(
            main,
            [
                "run",
                "--benchmark",
                "gymnasium:CartPole-v1",
                "--param",
                "foo=bar",
                "--store",
                str(store),
            ],
        )
    )
    assert "--param foo=bar" in line
    assert not (store / "events.db").exists()


def test_a_budget_over_the_limit_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["run", "--benchmark", "cartpole", "--budget", "2000000", "--store", str(tmp_path / "s")],
    )
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'--budget'" in lines[0] and "1000000" in lines[0]
    assert "episode_budget" not in result.output
    assert "1<=x<=1000000" in " ".join(CliRunner().invoke(main, ["run", "--help"]).output.split())


@pytest.mark.parametrize(
    ("source", "needle"), [("def make_policy(:\n", "does not compile"), (None, "no policy.py")]
)
def test_an_initial_program_that_cannot_be_submitted_is_refused_before_the_run(
    tmp_path: Path, source: str | None, needle: str
) -> None:
    program = tmp_path / "program"
    program.mkdir()
    if source is None:
        (program / "other.py").write_text("x = 1\n")
    else:
        (program / "policy.py").write_text(source)
    store = tmp_path / "s"
    line = _one_line_error(
        CliRunner().invoke(
            main,
            ["run", "--benchmark", "cartpole", "--program", str(program), "--store", str(store)],
        )
    )
    assert "--program" in line and needle in line
    assert not (store / "events.db").exists()


def test_an_export_matching_no_run_fails_without_a_load_hint(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    assert CliRunner().invoke(main, ["record", "--store", store, "create"]).exit_code == 0
    result = CliRunner().invoke(
        main, ["export", "--format", "sft", "--store", store, "-o", str(tmp_path / "ds")]
    )
    line = _one_line_error(result)
    assert "no finished Run" in line and "load_dataset" not in result.output


def test_the_chat_agent_is_checked_before_the_run_is_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "s"
    monkeypatch.delenv("EVOPOLICY_TEST_NO_SUCH_KEY", raising=False)
    chat = [
        "run",
        "--benchmark",
        "cartpole",
        "--agent",
        "chat",
        "--model",
        "m",
        "--store",
        str(store),
    ]
    line = _one_line_error(
        CliRunner().invoke(
            main,
            [
                *chat,
                "--base-url",
                "http://127.0.0.1:9/v1",
                "--api-key-env",
                "EVOPOLICY_TEST_NO_SUCH_KEY",
            ],
        )
    )
    assert "--api-key-env EVOPOLICY_TEST_NO_SUCH_KEY" in line and "not set" in line
    line = _one_line_error(CliRunner().invoke(main, [*chat, "--base-url", "http://127.0.0.1:9/v1"]))
    assert "--base-url" in line and "does not answer" in line
    assert not (store / "events.db").exists()


def test_a_failed_agents_last_stderr_lines_are_printed_when_the_run_ends(tmp_path: Path) -> None:
    command = _agent(tmp_path, 'print("boom: no model configured", file=sys.stderr)\nsys.exit(3)\n')
    result = CliRunner().invoke(
        main,
        [
            *small_run(command, tmp_path / "s"),
            "--json",
        ],
    )
    assert result.exit_code == EXIT_AGENT, result.output
    assert json.loads(result.stdout)["status"] == "agent_failed"
    assert "the Agent's last stderr lines (attempt 1):" in result.stderr
    assert "  boom: no model configured" in result.stderr.splitlines()
