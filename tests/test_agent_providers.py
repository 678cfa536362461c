"""Agent providers: identities, command lines and environments, `agents list`, skills."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import stat
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import PROVIDERS, AgentError, agent_identity, launch_for
from evopolicygym.cli.group import main
from evopolicygym.records.events import Event, RunCreated
from evopolicygym.records.location import open_store
from evopolicygym.run import RunHost, create_run, load_run
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.skills import SkillError, load_skill
from evopolicygym.transcript import AgentIdentity

pytestmark = pytest.mark.timeout(240)

CLIS = {"codex": "codex", "claude-code": "claude", "kimi": "kimi", "qoder": "qodercli"}


@pytest.fixture
def fake_clis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Executables named like the real CLIs, first on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for executable in CLIS.values():
        path = bin_dir / executable
        path.write_text("#!/bin/sh\nexit 0\n")
        path.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return bin_dir


def test_every_cli_provider_gets_its_command_line_and_only_its_credentials(
    fake_clis: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-test-0000000000000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000000000000000")
    monkeypatch.setenv("MOONSHOT_API_KEY", "moonshot-test-000000000")
    monkeypatch.setenv("UNRELATED_SECRET", "never-inherited")
    task = "# Task: evolve a policy\n"
    codex = launch_for(agent_identity("codex", model="gpt-5-codex", effort="high"), task)
    assert codex.argv[:3] == ["codex", "exec", "--json"]
    assert codex.argv[codex.argv.index("--model") : codex.argv.index("--model") + 2] == [
        "--model",
        "gpt-5-codex",
    ]
    assert 'model_reasoning_effort="high"' in codex.argv and codex.argv[-1] == task
    assert (
        codex.env["OPENAI_API_KEY"].startswith("sk-openai") and "ANTHROPIC_API_KEY" not in codex.env
    )
    assert codex.stream == "codex"
    claude = launch_for(agent_identity("claude-code", model="sonnet"), task)
    assert claude.argv[:3] == ["claude", "-p", task] and "stream-json" in claude.argv
    assert "ANTHROPIC_API_KEY" in claude.env and "OPENAI_API_KEY" not in claude.env
    kimi = launch_for(agent_identity("kimi", model="k2"), task)
    # Kimi Code (its --version prints a bare version): prompt mode, no --print
    assert kimi.argv[:3] == ["kimi", "-p", task] and "MOONSHOT_API_KEY" in kimi.env
    assert kimi.argv[-2:] == ["--model", "k2"]
    monkeypatch.setenv("KIMI_MODEL_NAME", "k2")
    monkeypatch.setenv("KIMI_MODEL_BASE_URL", "http://127.0.0.1:1/v1")
    kimi = launch_for(agent_identity("kimi", model="k2"), task)
    assert "--model" not in kimi.argv  # the model comes from KIMI_MODEL_NAME, not an alias
    assert kimi.env["KIMI_MODEL_NAME"] == "k2" and kimi.env["KIMI_MODEL_BASE_URL"].endswith("/v1")
    # kimi-cli 1.x says "kimi, version ..." and takes --print
    (fake_clis / "kimi").write_text("#!/bin/sh\necho 'kimi, version 1.51.0'\n")
    old_cli = launch_for(agent_identity("kimi", model="k2"), task)
    assert old_cli.argv[:4] == ["kimi", "--print", "-p", task]
    qoder = launch_for(agent_identity("qoder"), task)
    assert qoder.argv[:3] == ["qodercli", "-p", task]
    for launch in (codex, claude, kimi, qoder):
        assert "UNRELATED_SECRET" not in launch.env
        assert launch.env["PATH"].split(os.pathsep)[0] == os.path.dirname(sys.executable)
    # --agent-env passes on a variable the user names.
    passed = launch_for(agent_identity("codex", env=("UNRELATED_SECRET",)), task)
    assert passed.env["UNRELATED_SECRET"] == "never-inherited"


def test_the_chat_provider_runs_the_built_in_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "secret-value-0000")
    identity = agent_identity(
        "chat",
        base_url="http://127.0.0.1:8000/v1/",
        model="tiny",
        api_key_env="MY_KEY",
        max_turns=7,
    )
    assert identity.model == "tiny" and identity.options["base_url"] == "http://127.0.0.1:8000/v1"
    launch = launch_for(identity)
    assert launch.argv[1:3] == ["-m", "evopolicygym.agents.chat"]
    assert launch.argv[launch.argv.index("--base-url") + 1] == "http://127.0.0.1:8000/v1"
    assert launch.argv[launch.argv.index("--api-key-env") + 1] == "MY_KEY"
    assert launch.env["MY_KEY"] == "secret-value-0000" and "secret-value-0000" not in launch.argv
    assert (
        launch.argv[launch.argv.index("--max-turns") + 1] == "7"
        and "--max-tokens" not in launch.argv
    )


@pytest.mark.parametrize(
    ("provider", "kw", "needle"),
    [
        ("nope", {}, "unknown agent 'nope'"),
        ("reference", {"model": "x"}, "--model is not an option of the reference agent"),
        ("claude-code", {"effort": "high"}, "--effort is not an option of the claude-code agent"),
        ("codex", {"effort": "extreme"}, "--effort must be one of"),
        ("chat", {"model": "m"}, "needs --base-url URL and --model NAME"),
        ("chat", {"model": "m", "base_url": "ftp://x"}, "must be an http(s) URL"),
        ("codex", {"base_url": "http://x"}, "are for --agent chat"),
        ("codex", {"max_turns": 3}, "are for --agent chat"),
        (
            "chat",
            {"model": "m", "base_url": "http://x", "max_tokens": 0},
            "--max-tokens must be at least 1",
        ),
        ("codex", {"command": "x"}, "--agent-command is for --agent command"),
    ],
)
def test_bad_identities_are_refused_before_a_run(
    fake_clis: Path, provider: str, kw: dict[str, Any], needle: str
) -> None:
    with pytest.raises(AgentError, match=re.escape(needle)):
        agent_identity(provider, **kw)


def test_a_missing_cli_is_an_error_before_the_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    for provider, executable in CLIS.items():
        with pytest.raises(AgentError, match=f"agent command not found: {executable}"):
            agent_identity(provider)
    result = CliRunner().invoke(
        main, ["run", "--benchmark", "cartpole", "--agent", "codex", "--store", str(tmp_path / "s")]
    )
    assert result.exit_code == 1 and result.output.startswith(
        "error: agent command not found: codex"
    )
    assert not (tmp_path / "s" / "events.db").exists() or "run-" not in result.output


def test_agents_list_names_every_provider(fake_clis: Path) -> None:
    result = CliRunner().invoke(main, ["agents", "list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)}
    assert (
        set(rows)
        == set(PROVIDERS)
        == {"reference", "chat", "codex", "claude-code", "kimi", "qoder", "command"}
    )
    assert rows["codex"]["installed"] is True and "--effort" in rows["codex"]["options"]
    assert rows["chat"]["options"] == ["--model", "--base-url", "--api-key-env"]
    assert rows["kimi"]["flavour"] == "kimi-code" and rows["codex"]["flavour"] is None
    table = CliRunner().invoke(main, ["agents", "list"])
    assert table.exit_code == 0 and "claude-code" in table.output
    (fake_clis / "kimi").write_text("#!/bin/sh\necho 'kimi, version 1.51.0'\n")
    rows = {
        row["name"]: row
        for row in json.loads(CliRunner().invoke(main, ["agents", "list", "--json"]).output)
    }
    assert rows["kimi"]["flavour"] == "kimi-cli"


# --------------------------------------------------------------------------- skills


def make_skill(root: Path, name: str, body: str = "Balance early; damp oscillation.\n") -> Path:
    root.mkdir(parents=True)
    (root / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: How to tune a controller\n---\n\n{body}"
    )
    (root / "notes.txt").write_text("gains: 0.5\n")
    return root


def test_skills_must_name_themselves(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path / "a", "control-tuning"))
    assert skill.name == "control-tuning" and skill.description == "How to tune a controller"
    (tmp_path / "b").mkdir()
    with pytest.raises(SkillError, match=r"no SKILL\.md"):
        load_skill(tmp_path / "b")
    bad = tmp_path / "c"
    bad.mkdir()
    (bad / "SKILL.md").write_text("---\nname: ../escape\n---\n")
    with pytest.raises(SkillError, match="must name the skill"):
        load_skill(bad)
    heading = tmp_path / "d"
    heading.mkdir()
    (heading / "SKILL.md").write_text("# Swing Up\n\ntext\n")
    assert load_skill(heading).name == "swing-up"


AGENT = """
import json, os, stat, sys
ws = os.environ["EVOPOLICY_WORKSPACE"]
seen = {}
for root, dirs, files in os.walk(os.path.join(ws, "skills")):
    for f in files:
        p = os.path.join(root, f)
        seen[os.path.relpath(p, ws)] = [open(p).read(), stat.S_IMODE(os.stat(p).st_mode)]
task = open(os.path.join(ws, "TASK.md")).read()
reply = json.dumps({"skills": seen, "task": task})
print(json.dumps({"role": "assistant", "content": reply}), flush=True)
"""


def test_a_run_gives_its_skills_read_only_and_records_them(tmp_path: Path) -> None:
    skill = load_skill(make_skill(tmp_path / "skill", "control-tuning"))
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    config = RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
        assessment=AssessmentConfig(episodes=2),
        agent_timeout=60.0,
    )
    with open_store(tmp_path / "store", create=True) as store:
        identity = agent_identity("command", command=f"{sys.executable} {script}")
        run_id = create_run(store, "cartpole", config, identity, skills=[skill])
        RunHost(store, run_id, launcher=ProviderLauncher()).drive()
        _, events = load_run(store, run_id)
        created = events[0]
        assert isinstance(created, RunCreated)
        assert created.skill_program_digests == [skill.program.digest]
        assert store.blobs.get_program(skill.program.digest).digest == skill.program.digest
        said = [m for e in events for m in getattr(e, "messages", []) if m.role == "assistant"]
        report = json.loads(said[0].content)
    skill_md = report["skills"]["skills/control-tuning/SKILL.md"]
    assert skill_md[0].startswith("---\nname: control-tuning") and not skill_md[1] & stat.S_IWUSR
    assert report["skills"]["skills/control-tuning/notes.txt"][0] == "gains: 0.5\n"
    assert "`skills/control-tuning/SKILL.md` — How to tune a controller" in report["task"]
    assert "Skills (read these first)" in report["task"]


def test_two_skills_with_one_name_are_refused(tmp_path: Path) -> None:
    a = load_skill(make_skill(tmp_path / "a", "same"))
    b = load_skill(make_skill(tmp_path / "b", "same", body="other\n"))
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--benchmark",
            "cartpole",
            "--store",
            str(tmp_path / "s"),
            "--skill",
            str(tmp_path / "a"),
            "--skill",
            str(tmp_path / "b"),
        ],
    )
    assert result.exit_code == 1 and "two skills share a name: same" in result.output
    assert a.program.digest != b.program.digest


# ----------------------------------------------------------------------- the chat agent in a Run

POLICY = """class Policy:
    def act(self, observation):
        return 1 if observation[2] + 0.5 * observation[3] > 0 else 0


def make_policy(context):
    return Policy()
"""


def test_a_run_with_the_chat_agent_against_a_local_endpoint(tmp_path: Path) -> None:
    """The whole loop over the real protocol: the Host starts the harness in its jail, the
    scripted model edits, submits and finishes through the session, and the transcript is
    recorded natively, once, with token usage."""
    from evopolicygym.records.events import AgentMessages, RunFinished
    from evopolicygym_exporters import export
    from tests.support.chatserver import ChatServer

    def tools(*calls: dict[str, Any]) -> dict[str, Any]:
        return {
            "content": None,
            "tool_calls": list(calls),
            "usage": {"prompt_tokens": 50, "completion_tokens": 7},
        }

    replies = [
        tools({"name": "read_file", "arguments": {"path": "TASK.md"}}),
        tools(
            {"name": "write_file", "arguments": {"path": "program/policy.py", "content": POLICY}}
        ),
        tools({"name": "submit", "arguments": {"episodes": "0:2"}}),
        tools({"name": "finish", "arguments": {"candidates": [1]}}),
    ]
    config = RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
        assessment=AssessmentConfig(episodes=2),
        agent_timeout=120.0,
    )
    with ChatServer(replies, api_key="sk-local-test-key-000000", model="tiny") as server:
        os.environ["LOCAL_KEY"] = "sk-local-test-key-000000"
        try:
            identity = agent_identity(
                "chat", base_url=server.url, model="tiny", api_key_env="LOCAL_KEY"
            )
            with open_store(tmp_path / "store", create=True) as store:
                run_id = create_run(store, "cartpole", config, identity)
                RunHost(store, run_id, launcher=ProviderLauncher()).drive()
                _, events = load_run(store, run_id)
                report = export(store, ["sft"], tmp_path / "out")
        finally:
            del os.environ["LOCAL_KEY"]
        assert server.remaining == 0
    finished = [e for e in events if isinstance(e, RunFinished)]
    assert finished and finished[0].reason == "finished" and finished[0].final_submission_id == 1
    messages = [m for e in events if isinstance(e, AgentMessages) for m in e.messages]
    assert [m.role for m in messages[:2]] == ["system", "user"]  # the task once, then the kickoff
    assert sum(m.role == "system" for m in messages) == 1
    calls = [c.name for m in messages for c in m.tool_calls]
    assert calls == ["read_file", "write_file", "submit", "finish"]
    assert all(m.usage is not None and m.usage.input_tokens == 50 for m in messages if m.tool_calls)
    assert (
        report.configs["sft"]["splits"]["train"]["rows"]
        + report.configs["sft"]["splits"]["test"]["rows"]
        == 1
    )


def small_run(
    tmp_path: Path, identity: AgentIdentity, *, workspace: Path | None = None
) -> list[Event]:
    """A Run of ``identity`` on cartpole with a budget of 4 (Validation and Assessment on 2
    Episodes), driven to its end; its events."""
    config = RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
        assessment=AssessmentConfig(episodes=2),
        agent_timeout=120.0,
    )
    with open_store(tmp_path / "store", create=True) as store:
        run_id = create_run(store, "cartpole", config, identity)
        RunHost(store, run_id, launcher=ProviderLauncher(), workspace=workspace).drive()
        _, events = load_run(store, run_id)
    return events


FAKE_CODEX = r'''#!{python}
"""Stands in for `codex exec --json`: the real CLI needs its service, so this one speaks
its documented event stream while driving the real session."""
import json, os, subprocess, sys
cli = json.loads(os.environ["EVOPOLICY_CLI"])
assert sys.argv[1:4] == ["exec", "--json", "--skip-git-repo-check"], sys.argv
def say(event):
    print(json.dumps(event), flush=True)
say({{"type": "thread.started", "thread_id": "t-1"}})
say({{"type": "turn.started"}})
say({{"type": "item.completed",
     "item": {{"id": "item_0", "type": "reasoning", "text": "Submit as is first."}}}})
command = [*cli, "session", "submit", "program", "--episodes", "0:2"]
done = subprocess.run(command, capture_output=True, text=True)
say({{"type": "item.completed", "item": {{"id": "item_1", "type": "command_execution",
     "command": "evopolicy session submit program --episodes 0:2",
     "aggregated_output": done.stdout + done.stderr, "exit_code": done.returncode,
     "status": "completed"}}}})
done = subprocess.run([*cli, "session", "finish", "1"], capture_output=True, text=True)
say({{"type": "item.completed", "item": {{"id": "item_2", "type": "command_execution",
     "command": "evopolicy session finish 1", "aggregated_output": done.stdout,
     "exit_code": done.returncode, "status": "completed"}}}})
say({{"type": "item.completed",
     "item": {{"id": "item_3", "type": "agent_message", "text": "Finished with 1."}}}})
say({{"type": "turn.completed",
     "usage": {{"input_tokens": 1200, "cached_input_tokens": 200, "output_tokens": 80}}}})
'''


def test_a_run_with_a_cli_provider_records_its_event_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evopolicygym.records.events import AgentMessages, AgentStarted, RunFinished

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    codex = bin_dir / "codex"
    codex.write_text(FAKE_CODEX.format(python=sys.executable))
    codex.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    events = small_run(tmp_path, agent_identity("codex", model="gpt-test"))
    started = next(e for e in events if isinstance(e, AgentStarted))
    assert (
        started.command[0] == "codex"
        and started.command[started.command.index("--model") + 1] == "gpt-test"
    )
    assert started.command[-1].startswith(
        "# Task: evolve a policy for `cartpole`"
    )  # the task is the prompt
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.reason == "finished" and finished.final_submission_id == 1
    messages = [m for e in events if isinstance(e, AgentMessages) for m in e.messages]
    assert messages[0].role == "system"
    shell = [c for m in messages for c in m.tool_calls]
    assert [c.arguments["command"] for c in shell] == [
        "evopolicy session submit program --episodes 0:2",
        "evopolicy session finish 1",
    ]
    results = {m.tool_call_id: m.content for m in messages if m.role == "tool"}
    assert '"submission_id":1' in results[shell[0].id].replace(" ", "")
    assert any(m.reasoning == "Submit as is first." for m in messages)
    last = [m for m in messages if m.role == "assistant"][-1]
    assert last.content == "Finished with 1." and last.usage is not None
    assert (last.usage.input_tokens, last.usage.cached_tokens, last.usage.output_tokens) == (
        1200,
        200,
        80,
    )


# --------------------------------------------------------------------------- redaction

LEAKY_AGENT = r"""
import json, os, sys
secret = os.environ["MY_SERVICE_API_KEY"]
pattern = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
curl = f"curl -H 'Authorization: Bearer {secret}' x"
print(json.dumps({"role": "assistant", "content": f"my key is {secret} and {pattern}",
                  "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": curl}}]}),
      flush=True)
print(json.dumps({"role": "tool", "tool_call_id": "c1", "content": f"echoed {secret}"}), flush=True)
print(f"plain stdout line with {secret}", flush=True)
print(f"stderr line with {secret} and {pattern}", file=sys.stderr, flush=True)
import subprocess
cli = json.loads(os.environ["EVOPOLICY_CLI"])
subprocess.run([*cli, "session", "submit", "program", "--episodes", secret], capture_output=True)
"""


def test_a_planted_secret_is_nowhere_in_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import zlib

    from evopolicygym.records.events import AgentMessages

    secret = "planted-Secret-9f8e7d6c5b4a"
    pattern = "sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    monkeypatch.setenv("MY_SERVICE_API_KEY", secret)
    script = tmp_path / "agent.py"
    script.write_text(LEAKY_AGENT)
    config = RunConfig(
        episode_budget=4,
        validation=ValidationConfig(episodes_per_candidate=2, max_candidates=1),
        assessment=AssessmentConfig(episodes=2),
        agent_timeout=60.0,
    )
    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        identity = agent_identity(
            "command", command=f"{sys.executable} {script}", env=("MY_SERVICE_API_KEY",)
        )
        run_id = create_run(store, "cartpole", config, identity)
        RunHost(store, run_id, launcher=ProviderLauncher()).drive()
        _, events = load_run(store, run_id)
        messages = [m for e in events if isinstance(e, AgentMessages) for m in e.messages]
        assert any("my key is [REDACTED]" in m.content for m in messages)  # the message was kept
        chunks = [e.raw_blob for e in events if isinstance(e, AgentMessages) and e.raw_blob]
        assert chunks and b"plain stdout line with [REDACTED]" in b"".join(
            store.blobs.get(c) for c in chunks
        )
        texts = [store.blobs.get(digest) for digest in store.blobs.digests()]
        from evopolicygym.records.events import SubmissionRejected

        (rejected,) = [e for e in events if isinstance(e, SubmissionRejected)]
        assert rejected.selector == "[REDACTED]"  # what it sent the session is recorded, redacted
    files = [p.read_bytes() for p in root.rglob("*") if p.is_file()]
    for planted in (secret.encode(), pattern.encode()):
        assert not any(planted in data for data in texts), planted
        assert not any(planted in data for data in files), planted
        assert not any(planted in zlib.decompress(d) for d in files if d[:2] == b"\x78\x9c"), (
            planted
        )


def test_raw_chunks_never_cut_a_line_or_a_key_block() -> None:
    from evopolicygym.run.supervisor import _whole_lines

    assert _whole_lines(b"one\ntwo\nthr", final=False) == (b"one\ntwo\n", b"thr")
    block = b"a\n-----BEGIN RSA PRIVATE KEY-----\nAAAA\n"
    assert _whole_lines(block, final=False) == (b"a\n", block[2:])
    closed = block + b"BBBB\n-----END RSA PRIVATE KEY-----\nz\n"
    assert _whole_lines(closed, final=False) == (closed, b"")
    assert _whole_lines(b"tail", final=True) == (b"tail", b"")


def test_a_secret_on_the_command_line_is_refused() -> None:
    with pytest.raises(AgentError, match="looks like a secret"):
        agent_identity(
            "command",
            command=f"{sys.executable} -c pass --key sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4",
        )
    with pytest.raises(AgentError, match="looks like a secret"):
        agent_identity("chat", base_url="https://user:hunter2hunter2@example.invalid/v1", model="m")


def test_a_run_without_skills_leaves_a_users_skills_folder(tmp_path: Path) -> None:
    from evopolicygym.run.skills import write_skills

    (tmp_path / "skills").mkdir()
    (tmp_path / "skills" / "mine.md").write_text("mine\n")
    write_skills(tmp_path, [])
    assert (tmp_path / "skills" / "mine.md").read_text() == "mine\n"


def test_a_message_too_deep_to_record_does_not_stop_the_reader(tmp_path: Path) -> None:
    from evopolicygym.agents.process import AgentProcess

    deep: Any = "x"
    for _ in range(600):
        deep = {"a": deep}
    lines = [
        json.dumps(
            {
                "role": "assistant",
                "content": "deep",
                "tool_calls": [{"id": "1", "name": "t", "arguments": deep}],
            }
        )
    ]
    lines += [json.dumps({"role": "assistant", "content": f"m{i}"}) for i in range(300)]
    script = tmp_path / "talk.py"
    (tmp_path / "lines.jsonl").write_text("\n".join(lines) + "\n")
    script.write_text(
        f"import sys\nsys.stdout.write(open({str(tmp_path / 'lines.jsonl')!r}).read())\n"
    )
    got: list[Any] = []

    def record(message: Any) -> None:
        from evopolicygym.agents.message_redaction import Redactor

        got.append(Redactor().message(message))

    agent = AgentProcess(
        [sys.executable, str(script)], cwd=str(tmp_path), env=dict(os.environ), on_message=record
    )
    assert agent.wait(60) == 0
    agent.reap()
    agent.outputs()
    assert [m.content for m in got][-300:] == [f"m{i}" for i in range(300)]


def test_waiting_for_an_agent_reports_its_exit_and_keeps_no_descriptor(tmp_path: Path) -> None:
    """``wait`` says None while the Agent runs and its status once it has exited (a code, or
    a signal as a negative code), however the exit comes; nothing it opened to learn of the
    exit outlives the Agent."""
    from evopolicygym.agents.process import AgentProcess

    def start(code: str) -> AgentProcess:
        return AgentProcess(
            [sys.executable, "-c", code],
            cwd=str(tmp_path),
            env=dict(os.environ),
            on_message=lambda m: None,
        )

    def pidfds() -> int:
        count = 0
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                count += "pidfd" in os.readlink(f"/proc/self/fd/{fd}")
        return count

    before = pidfds()
    for _ in range(20):
        quick = start("import sys; sys.exit(7)")
        assert quick.wait(60) == 7
        assert quick.wait(0) == 7  # asked again: the same answer at once
        quick.reap()
        quick.outputs()
    slow = start("import time; time.sleep(60)")
    assert slow.wait(0) is None
    assert slow.wait(0.2) is None
    slow.stop(grace=5.0)
    assert slow.wait(0) == -signal.SIGTERM
    assert slow.status("stopped").signal == signal.SIGTERM
    slow.reap()
    slow.outputs()
    stubborn = start(
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    while not stubborn._stdout:  # its handler is set
        time.sleep(0.01)
    stubborn.stop(grace=0.2)
    assert stubborn.wait(0) == -signal.SIGKILL
    stubborn.reap()
    stubborn.outputs()
    assert pidfds() == before


def test_the_workspace_shim_reaches_the_session_when_path_is_reset(tmp_path: Path) -> None:
    """An Agent whose shell resets PATH (codex runs commands in a login shell) still finds
    the session: ``./evopolicy`` in the workspace runs the Host's command line, and it is
    the Host's even where the Agent left something else by that name."""
    from evopolicygym.records.events import RunFinished

    workspace = tmp_path / "ws"
    (workspace / "evopolicy").mkdir(parents=True)  # in the way: replaced
    (workspace / ".evopolicy.new").mkdir()
    script = (
        "PATH=/usr/bin:/bin; command -v evopolicy && exit 3; "
        "./evopolicy session submit --episodes 0:2 >/dev/null && ./evopolicy session finish 1"
    )
    events = small_run(
        tmp_path,
        agent_identity("command", command=f"sh -c {json.dumps(script)}"),
        workspace=workspace,
    )
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.reason == "finished" and finished.final_submission_id == 1
    shim = (workspace / "evopolicy").read_text()
    assert shim.startswith("#!/bin/sh") and "evopolicygym.cli" in shim
    assert os.access(workspace / "evopolicy", os.X_OK)


HOSTILE_NAMES = r"""
import json, os, subprocess, sys
from pathlib import Path
from evopolicygym.protocol import request
policy = Path("program/policy.py").read_bytes()
reply = request(os.environ["EVOPOLICY_SESSION"], {
    "op": "submit", "request_id": "long-name", "episodes": "0:2", "problem": None, "parent": None,
    "files": {"policy.py": policy, "x" * 300 + ".py": b""},
})
print(json.dumps({"role": "assistant", "content": json.dumps(reply)}), flush=True)
subprocess.run(
    ["./evopolicy", "session", "submit", "--episodes", "0:2"], check=True, capture_output=True
)
subprocess.run(["./evopolicy", "session", "finish", "1"], check=True, capture_output=True)
"""


def test_a_file_name_too_long_for_any_filesystem_is_a_rejection(tmp_path: Path) -> None:
    """Sent straight over the session protocol (no directory can hold it), a 300-byte file
    name is ``program_invalid``, charges nothing, and the Run goes on to finish."""
    from evopolicygym.records.events import RunFinished, SubmissionRejected

    agent = tmp_path / "agent.py"
    agent.write_text(HOSTILE_NAMES)
    events = small_run(tmp_path, agent_identity("command", command=f"{sys.executable} {agent}"))
    (rejected,) = [e for e in events if isinstance(e, SubmissionRejected)]
    assert rejected.code == "program_invalid" and "at most 255 bytes" in rejected.message
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.reason == "finished" and finished.final_submission_id == 1


HOSTILE_SIZES = r"""
import json, os, subprocess
from pathlib import Path
from evopolicygym.protocol import request
session = os.environ["EVOPOLICY_SESSION"]
policy = Path("program/policy.py").read_bytes()
def submit(request_id, **fields):
    body = {"op": "submit", "request_id": request_id, "episodes": "0:2", "problem": None,
            "parent": None, "files": {"policy.py": policy}}
    body.update(fields)
    return request(session, body)
replies = [
    submit("a" * 32, files=None, problem="p" * (8 * 1024 * 1024)),  # an 8 MiB problem text
    submit("b" * 32, files={"policy.py": policy + b"\n" + b"x = 1\n" * 60000 + b"def broken(:\n"}),
    submit("c" * 32, episodes="0," * 3000 + "1"),                             # a 6 KB selector
]
codes = json.dumps([r["error"]["code"] for r in replies])
print(json.dumps({"role": "assistant", "content": codes}), flush=True)
subprocess.run(
    ["./evopolicy", "session", "submit", "--episodes", "0:2"], check=True, capture_output=True
)
subprocess.run(["./evopolicy", "session", "finish", "1"], check=True, capture_output=True)
"""


def test_what_an_agent_sends_is_bounded_before_the_host_records_it(tmp_path: Path) -> None:
    """An 8 MiB problem text is recorded cut with a marker; a large policy.py that does not
    compile is refused by a compile outside the Host process; an overlong selector is
    refused as too long, never read as a shorter one; each is a free rejection."""
    from evopolicygym.records.events import RunFinished, SubmissionRejected

    agent = tmp_path / "agent.py"
    agent.write_text(HOSTILE_SIZES)
    events = small_run(tmp_path, agent_identity("command", command=f"{sys.executable} {agent}"))
    problem, syntax, selector = [e for e in events if isinstance(e, SubmissionRejected)]
    assert problem.code == "program_invalid" and len(problem.message) < 4300
    assert problem.message.endswith(f"[{8 * 1024 * 1024 - 4096} more characters cut]")
    assert syntax.code == "program_invalid" and "does not compile" in syntax.message
    assert "line 60018" in syntax.message  # the child's SyntaxError, with where it is
    assert (
        selector.code == "invalid_request" and "length <= 1000" in selector.message
    )  # as malformed
    assert selector.selector is None
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.reason == "finished" and finished.final_submission_id == 1


FORK_SERVER_ATTACK = r"""
import glob, json, os, socket, stat, subprocess, sys
import msgspec
subprocess.run(
    ["./evopolicy", "session", "submit", "--episodes", "0:2"], check=True, capture_output=True
)
hit = []
for path in glob.glob(os.path.join(sys.argv[1], "**", "*"), recursive=True):
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode) or "evopolicy-session" in path:
            continue
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as sock:
            sock.connect(path)
            sock.send(msgspec.msgpack.encode({"op": "shutdown"}))
            hit.append(path)
    except OSError:
        pass
print(json.dumps({"role": "assistant", "content": json.dumps({"reached": len(hit)})}), flush=True)
subprocess.run(
    ["./evopolicy", "session", "submit", "--episodes", "2:4"], check=True, capture_output=True
)
subprocess.run(["./evopolicy", "session", "finish", "2"], check=True, capture_output=True)
"""


def test_an_agent_cannot_reach_the_fork_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fork server's socket lives in the Host's private directory, which the Agent's
    jail hides: an Agent that hunts for it and sends it ``shutdown`` reaches nothing, and the
    next Submission is evaluated as usual."""
    from evopolicygym.namespaces import containment_disabled
    from evopolicygym.records.events import AgentMessages, RunFinished, SubmissionPublished

    if containment_disabled():
        pytest.skip("the Agent runs uncontained here (EVOPOLICY_CONTAINMENT=process-group)")
    import tempfile

    from evopolicygym import hostdirs

    agent = tmp_path / "agent.py"
    agent.write_text(FORK_SERVER_ATTACK)
    # This Host's temporary directory of its own, for the Agent to search (and nobody
    # else's fork server in it to hit): short, for the socket paths.
    temp = tempfile.mkdtemp(prefix="t")
    try:
        monkeypatch.setattr(tempfile, "tempdir", temp)
        monkeypatch.setattr(hostdirs, "_bases", {})
        events = small_run(
            tmp_path, agent_identity("command", command=f"{sys.executable} {agent} {temp}")
        )
    finally:
        hostdirs.remove_tree(temp)
    said = [
        m.content
        for e in events
        if isinstance(e, AgentMessages)
        for m in e.messages
        if m.role == "assistant"
    ]
    assert said == ['{"reached": 0}']
    assert [e.submission_id for e in events if isinstance(e, SubmissionPublished)] == [1, 2]
    finished = next(e for e in events if isinstance(e, RunFinished))
    assert finished.reason == "finished" and finished.final_submission_id == 2
