"""The released agent CLIs, end to end: each drives a whole Run against a loopback model.

The CLIs are installed at pinned versions by ``.ci/agent-clis`` (into a cache directory
outside the checkout) and each is pointed at ``modelserver`` speaking its API: codex the
Responses API, Claude Code the Messages API, Kimi Code and kimi-cli Chat Completions.
The scripted model reads the task, edits the program with the CLI's own edit tool,
submits through ``./evopolicy session``, finishes; the test then compares the recorded
transcript with what the server sent. Where the registry cannot be reached the tests skip
and say so (under ``EVOPOLICY_REQUIRE_EXTRAS=1``, as in CI, they fail instead).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from evopolicygym.records.events import (
    AgentExited,
    AgentMessages,
    AgentStarted,
    EvaluationStarted,
    Event,
    FinishAccepted,
    RunFinished,
)
from evopolicygym.records.location import open_store
from evopolicygym.run import load_run
from evopolicygym.transcript import Message
from tests.support.modelserver import Call, HttpError, ModelServer, Turn
from tests.support.requires import CLIS_ENV, missing

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-loopback-test-key-0123456789abcdef"


@pytest.fixture(scope="module")
def clis() -> Path:
    """The directory of the installed CLIs' launchers (``bin/``); they are installed by
    ``bash .ci/agent-clis`` (npm and PyPI, minutes), never by the tests."""
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "agent-clis"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        _unavailable(done.stderr.strip()[-400:] or "the agent CLIs are not installed")
    return Path(done.stdout.strip().splitlines()[-1]) / "bin"


def _unavailable(why: str) -> None:
    missing(why, "bash .ci/agent-clis", env=CLIS_ENV)


def _need(clis: Path, name: str) -> None:
    if not (clis / name).exists():
        absent = (
            (clis.parent / "missing").read_text().split()
            if (clis.parent / "missing").exists()
            else []
        )
        _unavailable(
            f"{name} is not installed ({'the registry did not give it' if absent else 'unknown'})"
        )


CLI = [sys.executable, "-m", "evopolicygym.cli"]


def run_command(
    tmp_path: Path,
    clis: Path,
    agent: str,
    env: dict[str, str],
    *,
    model: str = "test-model",
    attempts: int = 1,
) -> tuple[list[str], dict[str, str]]:
    """The ``evopolicy run`` command line of a small cartpole Run of ``agent`` (inheriting the
    variables of ``env``) and the environment to run it in, the CLIs first on PATH."""
    argv = [*CLI, "run", "--store", str(tmp_path / "store"), "--benchmark", "cartpole"]
    argv += ["--agent", agent, "--model", model, "--budget", "4", "--validation-episodes", "2"]
    argv += ["--max-candidates", "1", "--assessment-episodes", "2", "--agent-timeout", "240"]
    argv += ["--max-agent-attempts", str(attempts), "--jobs", "2"]
    for name in env:
        argv += ["--agent-env", name]
    (tmp_path / "home").mkdir(exist_ok=True)
    return argv, {
        **os.environ,
        **env,
        "PATH": f"{clis}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path / "home"),
    }


def run_agent(
    tmp_path: Path, clis: Path, agent: str, env: dict[str, str], *, model: str = "test-model"
) -> tuple[list[Event], subprocess.CompletedProcess[str]]:
    """``evopolicy run`` with ``agent``, its CLI first on PATH; the Run's events."""
    store = tmp_path / "store"
    argv, full = run_command(tmp_path, clis, agent, env, model=model)
    done = subprocess.run(argv, capture_output=True, text=True, env=full, timeout=500)
    with open_store(store) as opened:
        run_id = opened.events.streams("run-")[0].stream_id.removeprefix("run-")
        _, events = load_run(opened, run_id)
    return events, done


def messages_of(events: list[Event]) -> list[Message]:
    """The live stream's messages."""
    return [
        m for e in events if isinstance(e, AgentMessages) and e.source is None for m in e.messages
    ]


def session_transcript(events: list[Event], source: str) -> list[Message]:
    chunks = [e for e in events if isinstance(e, AgentMessages) and e.source is not None]
    assert [e.source for e in chunks] == [source]
    return chunks[0].messages


def assert_as_sent(
    messages: list[Message],
    server: ModelServer,
    *,
    model: str,
    anthropic: bool = False,
    reasoning_tokens: bool = True,
) -> None:
    """Each model response the server sent is one assistant message, exactly."""
    said = [m for m in messages if m.role == "assistant"]
    assert len(said) == len(server.sent), _dump(messages)
    for message, turn in zip(said, server.sent, strict=True):
        assert message.content == turn.text
        assert (message.reasoning or "") == turn.reasoning
        assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
            (c.id, c.name, c.arguments) for c in turn.calls
        ]
        assert message.model == model
        assert message.usage is not None
        usage = message.usage
        if anthropic:  # input_tokens there leaves out the cache; ours counts all the prompt
            expected = turn.input_tokens + turn.cached_tokens + turn.cache_write_tokens
            assert (
                usage.input_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens,
                usage.output_tokens,
            ) == (
                expected,
                turn.cached_tokens,
                turn.cache_write_tokens,
                turn.output_tokens,
            )
        else:
            assert (usage.input_tokens, usage.cached_tokens, usage.output_tokens) == (
                turn.input_tokens,
                turn.cached_tokens,
                turn.output_tokens,
            )
            if reasoning_tokens:  # Kimi Code keeps no reasoning count
                assert usage.reasoning_tokens == turn.reasoning_tokens
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert set(results) == {c.id for t in server.sent for c in t.calls}
    # each tool result is what the model was sent back, word for word; Kimi Code's record
    # lacks the "Wall time: …" line it puts before a command's output when it sends it
    received = received_results(server)
    if server.dialect == "chat":
        assert all(
            received[k].endswith(v) and received[k][: -len(v) or None].count("\n") <= 1
            for k, v in results.items()
        )
    else:
        assert {k: received.get(k) for k in results} == results


def _blocks_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        b.get("text", "")
        for b in content or ()
        if isinstance(b, dict) and b.get("type") in ("text", "input_text", "output_text")
    )


def received_results(server: ModelServer) -> dict[str, str]:
    """The tool results the CLI sent the model, by call id, as the server received them."""
    out: dict[str, str] = {}
    for body in server.requests:
        if server.dialect == "responses":
            for item in body.get("input") or ():
                if item.get("type") == "function_call_output":
                    out[item["call_id"]] = _blocks_text(item.get("output"))
        elif server.dialect == "messages":
            for message in body.get("messages") or ():
                for block in (
                    message.get("content") if isinstance(message.get("content"), list) else ()
                ):
                    if block.get("type") == "tool_result":
                        out[block["tool_use_id"]] = _blocks_text(block.get("content"))
        else:
            for message in body.get("messages") or ():
                if message.get("role") == "tool":
                    out[message["tool_call_id"]] = _blocks_text(message.get("content"))
    return out


def sft_rows(tmp_path: Path, events: list[Event]) -> list[dict[str, Any]]:
    """The Run's sft rows, written by the exporter and loaded back with ``datasets``."""
    from datasets import load_dataset

    out = tmp_path / "export"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evopolicygym.cli",
            "export",
            "--store",
            str(tmp_path / "store"),
            "--format",
            "sft",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode == 1 and "is empty" in done.stderr:
        return []  # a Run with no sft turn at all: export says so and writes nothing
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = []
    for split in ("train", "test"):
        files = sorted((out / "sft").glob(f"{split}*")) or sorted((out / "sft").glob(f"*/{split}*"))
        if files:
            rows += list(load_dataset(str(out / "sft"), split=split))
    return rows


def assert_calls_precede(events: list[Event], tool: str) -> None:
    """In the log, the live chunk holding the call that submitted (and the one that
    finished) comes before the Submission's (the finish's) first event."""

    def first_call(words: str) -> int:
        for i, event in enumerate(events):
            if isinstance(event, AgentMessages) and event.source is None:
                for message in event.messages:
                    if any(
                        c.name == tool and words in json.dumps(c.arguments)
                        for c in message.tool_calls
                    ):
                        return i
        raise AssertionError(f"no {tool} call with {words!r} in the live stream")

    started = next(i for i, e in enumerate(events) if isinstance(e, EvaluationStarted))
    accepted = next(i for i, e in enumerate(events) if isinstance(e, FinishAccepted))
    assert first_call("session submit") < started
    assert first_call("session finish") < accepted


def assert_finished(events: list[Event], done: subprocess.CompletedProcess[str]) -> None:
    finished = [e for e in events if isinstance(e, RunFinished)]
    exits = [e for e in events if isinstance(e, AgentExited)]
    assert finished and finished[0].reason == "finished", (
        done.stdout[-2000:],
        done.stderr[-2000:],
        exits,
    )
    assert finished[0].final_submission_id == 1


POLICY_PATCH = """*** Begin Patch
*** Add File: program/notes.py
+# Edited by the model: a gain it may tune.
+GAIN = 1.0
*** End Patch
"""


def codex_config(home: Path, server: ModelServer) -> None:
    (home / "config.toml").write_text(
        f"""model = "test-model"
model_provider = "loopback"

[model_providers.loopback]
name = "loopback"
base_url = "{server.url}"
wire_api = "responses"
env_key = "LOOPBACK_KEY"
request_max_retries = 0
stream_max_retries = 0
"""
    )


class Cli:
    """How the tier drives one CLI: its launcher's name, agent, API and shell tool."""

    def __init__(
        self,
        name: str,
        agent: str,
        dialect: str,
        shell: str,
        key: str,
        source: str | None,
        model: str,
    ) -> None:
        self.name, self.agent, self.dialect, self.shell, self.key = name, agent, dialect, shell, key
        self.source, self.model = source, model

    def call(self, command: str) -> Call:
        return Call(self.shell, {self.key: command})

    def env(self, server: ModelServer, tmp_path: Path) -> dict[str, str]:
        if self.agent == "codex":
            home = tmp_path / "codex-home"
            home.mkdir(exist_ok=True)
            codex_config(home, server)
            return {"CODEX_HOME": str(home), "LOOPBACK_KEY": KEY}
        if self.agent == "claude-code":
            return {
                "ANTHROPIC_BASE_URL": server.origin,
                "ANTHROPIC_API_KEY": KEY,
                "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
                "CLAUDE_CODE_MAX_RETRIES": "0",
            }
        return {
            "KIMI_MODEL_NAME": self.model,
            "KIMI_MODEL_API_KEY": KEY,
            "KIMI_MODEL_BASE_URL": server.url,
            "KIMI_MODEL_PROVIDER_TYPE": "kimi",
            "KIMI_CODE_HOME": str(tmp_path / "kimi-home"),
        }


CODEX = Cli("codex", "codex", "responses", "exec_command", "cmd", "codex-rollout", "test-model")
CLAUDE = Cli(
    "claude", "claude-code", "messages", "Bash", "command", "claude-session", "claude-sonnet-4-5"
)
KIMI = Cli("kimi", "kimi", "chat", "Bash", "command", "kimi-wire", "test-model")
SCENARIO_CLIS = [CODEX, CLAUDE, KIMI]


def test_codex_runs_a_whole_run(tmp_path: Path, clis: Path) -> None:
    _need(clis, "codex")
    script: list[Turn | HttpError] = [
        Turn(
            reasoning="Read the task first.", calls=(Call("exec_command", {"cmd": "cat TASK.md"}),)
        ),
        Turn(
            text="Adding a tunable gain.",
            calls=(Call("exec_command", {"cmd": f"apply_patch <<'EOF'\n{POLICY_PATCH}EOF"}),),
        ),
        Turn(
            calls=(
                Call(
                    "exec_command", {"cmd": "./evopolicy session submit --episodes 0:2 --parent 0"}
                ),
            )
        ),
        Turn(calls=(Call("exec_command", {"cmd": "./evopolicy session finish 1"}),)),
        Turn(text="Finished with submission 1."),
    ]
    with ModelServer("responses", script) as server:
        events, done = run_agent(tmp_path, clis, "codex", CODEX.env(server, tmp_path))
    assert_finished(events, done)
    assert server.remaining == 0
    started = next(e for e in events if isinstance(e, AgentStarted))
    assert started.command[0] == "codex"
    # The rollout is the transcript: one assistant message per model response, the model's
    # own tool names and arguments (the patch body too), its usage and model.
    recorded = session_transcript(events, "codex-rollout")
    assert_as_sent(recorded, server, model="test-model")
    assert not any(
        "evopolicy-" in json.dumps(msgspec.to_builtins(m)) for m in recorded
    )  # no workspace path
    rows = sft_rows(tmp_path, events)
    assert len(rows) == 1
    exported = [c["function"] for m in rows[0]["messages"] for c in m["tool_calls"] or ()]
    assert {
        "name": "exec_command",
        "arguments": {"cmd": f"apply_patch <<'EOF'\n{POLICY_PATCH}EOF"},
    } in exported
    assert [r["input_tokens"] for r in rows[0]["responses"]] == [
        t.input_tokens for t in server.sent
    ]
    assert {r["model"] for r in rows[0]["responses"]} == {"test-model"}
    # the Submission joins the turn that asked for it (the third response), though codex
    # printed that call only after its result
    assert [(o["submission_id"], o["turn"]) for o in rows[0]["submissions"]] == [(1, 2)]
    messages = messages_of(events)
    # codex warns that it has no metadata for the model: an error record, not a turn
    faults = [m for m in messages if m.role == "error"]
    assert faults and faults[0].error is not None and faults[0].error.kind == "cli_error"
    assert all("Model metadata" not in m.content for m in messages if m.role == "assistant")


def _dump(messages: list[Message]) -> str:
    return json.dumps(
        [
            {
                "role": m.role,
                "content": m.content[:80],
                "calls": [(c.name, c.arguments) for c in m.tool_calls],
            }
            for m in messages
        ],
        indent=1,
    )[:6000]


def test_claude_code_runs_a_whole_run(tmp_path: Path, clis: Path) -> None:
    _need(clis, "claude")
    script: list[Turn | HttpError] = [
        Turn(
            reasoning="Read the task first.",
            calls=(Call("Bash", {"command": "cat TASK.md", "description": "Read the task"}),),
        ),
        Turn(
            text="Adding a tunable gain.",
            calls=(Call("Write", {"file_path": "program/notes.py", "content": "GAIN = 1.0\n"}),),
        ),
        Turn(
            calls=(
                Call(
                    "Bash",
                    {
                        "command": "./evopolicy session submit --episodes 0:2 --parent 0",
                        "description": "Submit",
                    },
                ),
            )
        ),
        Turn(
            calls=(
                Call("Bash", {"command": "./evopolicy session finish 1", "description": "Finish"}),
            )
        ),
        Turn(text="Finished with submission 1."),
    ]
    with ModelServer("messages", script, model="claude-sonnet-4-5") as server:
        events, done = run_agent(
            tmp_path, clis, "claude-code", CLAUDE.env(server, tmp_path), model=CLAUDE.model
        )
    assert_finished(events, done)
    messages = messages_of(events)
    calls = [(c.name, c.arguments.get("command")) for m in messages for c in m.tool_calls]
    assert ("Bash", "./evopolicy session finish 1") in calls, _dump(messages)
    # The live stream records the call before the events it caused
    assert_calls_precede(events, "Bash")
    # The session file is the transcript: per-message usage (not the stream's placeholder 1)
    recorded = session_transcript(events, "claude-session")
    assert_as_sent(recorded, server, model="claude-sonnet-4-5", anthropic=True)
    rows = sft_rows(tmp_path, events)
    assert [r["output_tokens"] for r in rows[0]["responses"]] == [
        t.output_tokens for t in server.sent
    ]
    assert [(o["submission_id"], o["turn"]) for o in rows[0]["submissions"]] == [(1, 2)]
    # Claude Code's record lists no tools: they are told from its calls, and said to be
    assert rows[0]["tools_inferred"] and {t["function"]["name"] for t in rows[0]["tools"]} == {
        "Bash",
        "Write",
    }


def test_kimi_code_runs_a_whole_run(tmp_path: Path, clis: Path) -> None:
    _need(clis, "kimi")
    script: list[Turn | HttpError] = [
        Turn(reasoning="Read the task first.", calls=(Call("Bash", {"command": "cat TASK.md"}),)),
        Turn(
            text="Adding a tunable gain.",
            calls=(Call("Write", {"path": "program/notes.py", "content": "GAIN = 1.0\n"}),),
        ),
        Turn(
            calls=(
                Call("Bash", {"command": "./evopolicy session submit --episodes 0:2 --parent 0"}),
            )
        ),
        Turn(calls=(Call("Bash", {"command": "./evopolicy session finish 1"}),)),
        Turn(text="Finished with submission 1."),
    ]
    with ModelServer("chat", script) as server:
        events, done = run_agent(tmp_path, clis, "kimi", KIMI.env(server, tmp_path))
    assert_finished(events, done)
    messages = messages_of(events)
    calls = [(c.name, c.arguments.get("command")) for m in messages for c in m.tool_calls]
    assert ("Bash", "./evopolicy session finish 1") in calls, _dump(messages)
    # Kimi Code prints a call only with its result (as codex does): the live stream cannot
    # put it first; its wire file is the transcript, with reasoning and usage the stream lacks

    recorded = session_transcript(events, "kimi-wire")
    assert_as_sent(recorded, server, model="test-model", reasoning_tokens=False)
    # the tools Kimi Code offered, schemas and all, as the model was sent them
    chunk = next(e for e in events if isinstance(e, AgentMessages) and e.source == "kimi-wire")
    sent = {t["function"]["name"]: t["function"]["parameters"] for t in server.requests[0]["tools"]}
    assert chunk.tools is not None
    assert {t["function"]["name"]: t["function"].get("parameters") for t in chunk.tools} == sent


def test_kimi_cli_1_51_runs_a_whole_run(tmp_path: Path, clis: Path) -> None:
    """The PyPI kimi-cli (1.x, the same command name, other flags) keeps working."""
    _need(clis, "kimi-cli")
    only = tmp_path / "kimi-cli-bin"
    only.mkdir()
    (only / "kimi").symlink_to(clis / "kimi-cli")
    script: list[Turn | HttpError] = [
        Turn(
            reasoning="Read the task and the program at once.",
            calls=(
                Call("Shell", {"command": "cat TASK.md"}),
                Call("ReadFile", {"path": "program/policy.py"}),
            ),
        ),
        Turn(
            text="Adding a tunable gain.",
            calls=(Call("WriteFile", {"path": "program/notes.py", "content": "GAIN = 1.0\n"}),),
        ),
        Turn(
            calls=(
                Call("Shell", {"command": "./evopolicy session submit --episodes 0:2 --parent 0"}),
            )
        ),
        Turn(calls=(Call("Shell", {"command": "./evopolicy session finish 1"}),)),
        Turn(text="Finished with submission 1."),
    ]
    with ModelServer("chat", script) as server:
        env = {
            "KIMI_MODEL_NAME": "test-model",
            "KIMI_API_KEY": KEY,
            "KIMI_BASE_URL": server.url,
            "KIMI_SHARE_DIR": str(tmp_path / "kimi-share"),
        }
        events, done = run_agent(tmp_path, only, "kimi", env)
    assert_finished(events, done)
    started = next(e for e in events if isinstance(e, AgentStarted))
    assert started.command[:2] == ["kimi", "--print"]
    # its context file holds both parallel calls whole (its printed stream may cut the second)
    recorded = session_transcript(events, "kimi-cli-context")
    said = [m for m in recorded if m.role == "assistant"]
    assert [[(c.id, c.name, c.arguments) for c in m.tool_calls] for m in said] == [
        [(c.id, c.name, c.arguments) for c in t.calls] for t in server.sent
    ]
    assert said[0].reasoning == "Read the task and the program at once."
    messages = messages_of(events)
    calls = [(c.name, c.arguments.get("command")) for m in messages for c in m.tool_calls]
    assert ("Shell", "./evopolicy session finish 1") in calls, _dump(messages)


def test_qoder_not_logged_in_is_one_clear_line(tmp_path: Path, clis: Path) -> None:
    """qodercli cannot be pointed at a local endpoint; without a login it says so, and the
    Run says so in one line, with no assistant turn recorded for it."""
    _need(clis, "qodercli")
    events, done = run_agent(tmp_path, clis, "qoder", {"QODER_CONFIG_PROBE": "1"})
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.reason == "agent_failed" and finished.final_submission_id is None
    assert "Not logged in" in done.stdout + done.stderr
    messages = messages_of(events)
    assert not [m for m in messages if m.role == "assistant"], _dump(messages)
    (fault,) = [m for m in messages if m.role == "error"]
    assert fault.error is not None and fault.error.kind == "authentication_failed"
    run_id = _run_id(tmp_path)
    for command in (["record", "show", run_id], ["record", "replay", run_id]):
        shown = subprocess.run(
            [
                sys.executable,
                "-m",
                "evopolicygym.cli",
                command[0],
                "--store",
                str(tmp_path / "store"),
                *command[1:],
            ],
            capture_output=True,
            text=True,
        )
        assert shown.returncode == 0 and "Not logged in" in shown.stdout, (
            command,
            shown.stdout,
            shown.stderr,
        )


def _run_id(tmp_path: Path) -> str:
    with open_store(tmp_path / "store") as opened:
        return opened.events.streams("run-")[0].stream_id.removeprefix("run-")


# --------------------------------------------------------------------------- scenarios per CLI


def transcript_of(events: list[Event], cli: Cli) -> list[Message]:
    """What the exports take: the session record's transcript where the CLI keeps one."""
    return session_transcript(events, cli.source) if cli.source else messages_of(events)


@pytest.mark.parametrize("cli", SCENARIO_CLIS, ids=lambda c: c.name)
def test_two_parallel_calls_are_one_response(tmp_path: Path, clis: Path, cli: Cli) -> None:
    _need(clis, cli.name)
    script: list[Turn | HttpError] = [
        Turn(text="Reading both at once.", calls=(cli.call("cat TASK.md"), cli.call("ls program"))),
        Turn(calls=(cli.call("./evopolicy session submit --episodes 0:2"),)),
        Turn(calls=(cli.call("./evopolicy session finish 1"),)),
        Turn(text="Done."),
    ]
    with ModelServer(cli.dialect, script, model=cli.model) as server:  # type: ignore[arg-type]
        events, done = run_agent(
            tmp_path, clis, cli.agent, cli.env(server, tmp_path), model=cli.model
        )
    assert_finished(events, done)
    transcript = transcript_of(events, cli)
    said = [m for m in transcript if m.role == "assistant" and m.tool_calls]
    assert [len(m.tool_calls) for m in said][:1] == [2], _dump(transcript)
    assert [c.arguments[cli.key] for c in said[0].tool_calls] == ["cat TASK.md", "ls program"]
    answered = [m.tool_call_id for m in transcript if m.role == "tool"]
    assert set(answered[:2]) == {c.id for c in server.sent[0].calls}
    assert_as_sent(
        transcript,
        server,
        model=cli.model,
        anthropic=cli.dialect == "messages",
        reasoning_tokens=cli.agent != "kimi",
    )


@pytest.mark.parametrize("status", [400, 401])
@pytest.mark.parametrize("cli", SCENARIO_CLIS, ids=lambda c: c.name)
def test_an_api_error_is_an_error_record_never_a_turn(
    tmp_path: Path, clis: Path, cli: Cli, status: int
) -> None:
    """A refused request mid-Run (400) or a refused key (401): the CLI stops, the Run ends
    without a final program, and the error is recorded as an error record with its status
    where the CLI tells it, never as an assistant turn in the record or the exports."""
    _need(clis, cli.name)
    words = "scripted refusal 7f3a"
    script: list[Turn | HttpError] = (
        [Turn(text="Reading.", calls=(cli.call("cat TASK.md"),))] if status == 400 else []
    )
    script.append(HttpError(status, words))
    refusal = HttpError(status, words)  # for a CLI that retries it
    with ModelServer(cli.dialect, script, model=cli.model, exhausted=refusal) as server:  # type: ignore[arg-type]
        events, done = run_agent(
            tmp_path, clis, cli.agent, cli.env(server, tmp_path), model=cli.model
        )
        assert server.remaining == 0
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.final_submission_id is None
    everything = [m for e in events if isinstance(e, AgentMessages) for m in e.messages]
    assert not [m for m in everything if m.role == "assistant" and words in m.content], _dump(
        everything
    )
    faults = [m for m in everything if m.role == "error"]
    exited = next(e for e in events if isinstance(e, AgentExited))
    assert any(words in m.content for m in faults), _dump(everything)
    assert exited.errors >= 1 and exited.last_error is not None and words in exited.last_error
    assert "agent error: " in done.stdout + done.stderr  # run says so as it happens
    statuses = {m.error.status for m in faults if m.error is not None}
    # codex tells the status of a refused key, not of a refused request; the others both
    assert status in statuses or (cli.agent == "codex" and status == 400)
    for row in sft_rows(tmp_path, events):
        assert words not in json.dumps(row["messages"])


def test_the_record_of_an_attempt_the_host_died_under_is_read_on_resume(
    tmp_path: Path, clis: Path
) -> None:
    """SIGKILL the Host while codex runs a command: codex dies with it, and ``resume``
    records that attempt's rollout (found by the stream recorded of it) before it starts
    the next attempt, which then finishes the Run."""
    _need(clis, "codex")
    script: list[Turn | HttpError] = [
        Turn(reasoning="Look first.", calls=(Call("exec_command", {"cmd": "cat TASK.md"}),)),
        Turn(calls=(Call("exec_command", {"cmd": "sleep 120"}),)),
        # the second attempt, after resume
        Turn(calls=(Call("exec_command", {"cmd": "./evopolicy session submit --episodes 0:2"}),)),
        Turn(calls=(Call("exec_command", {"cmd": "./evopolicy session finish 1"}),)),
        Turn(text="Done."),
    ]
    store = tmp_path / "store"
    with ModelServer("responses", script) as server:
        argv, env = run_command(tmp_path, clis, "codex", CODEX.env(server, tmp_path), attempts=3)
        host = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while len(server.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(server.requests) >= 2, "codex never reached its second response"
            time.sleep(3.0)  # the chunk with thread.started is flushed at least every 2 s
            host.send_signal(signal.SIGKILL)
            host.wait(timeout=30)
        finally:
            if host.poll() is None:
                host.kill()
        run_id = _run_id(tmp_path)
        done = subprocess.run(
            [*CLI, "resume", "--store", str(store), run_id],
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert done.returncode == 0, done.stderr[-2000:]
    with open_store(store) as opened:
        _, events = load_run(opened, run_id)
    assert_finished(events, done)
    exits = [e for e in events if isinstance(e, AgentExited)]
    assert [e.reason for e in exits][:1] == ["host_interrupted"]
    recorded = [e for e in events if isinstance(e, AgentMessages) and e.source == "codex-rollout"]
    assert [e.attempt for e in recorded] == [1, 2]
    first = [c.arguments for m in recorded[0].messages for c in m.tool_calls]
    assert first == [{"cmd": "cat TASK.md"}, {"cmd": "sleep 120"}]
