"""The chat agent as a real process against a scripted OpenAI-compatible server on loopback.

The session is a fake ``evopolicy`` CLI (a script written here) that answers ``session
submit`` and ``session finish`` with the real command's output shapes and writes feedback
files as the Host would; the end-to-end Run with a Host is tested elsewhere.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest

from evopolicygym.transcript import CHAT_TOOLS as TOOLS
from evopolicygym.transcript import KICKOFF, Message
from tests.support.chatserver import ChatServer, Reply

KEY_ENV = "CHAT_TEST_KEY"
MODEL = "test-model"

TASK_MD = """# Task: evolve a policy for `toy`

Keep the pole up. Submit with `evopolicy session submit`.
"""

POLICY = """GAIN = 0.5


class Policy:
    def act(self, observation):
        return 1 if GAIN * observation[0] > 0 else 0


def make_policy(context):
    return Policy()
"""

# A stand-in for `evopolicy`: records its argv, answers like `evopolicy session submit/finish`
# (JSON on stdout and exit 0; {"error": ...} on stderr and exit 1; one line and exit 2) and
# writes feedback/ as the Host does before it replies.
FAKE_CLI = r"""
import hashlib, json, os, sys
from pathlib import Path

log = Path(os.environ["FAKE_SESSION_LOG"])
state_path = log.with_name("state.json")
argv = sys.argv[1:]
with log.open("a") as f:
    f.write(json.dumps(argv) + "\n")


def out(value, stream=sys.stdout):
    print(json.dumps(value, sort_keys=True, indent=2), file=stream)


def reject(code, message):
    out({"error": {"code": code, "message": message}}, sys.stderr)
    sys.exit(1)


if not os.environ.get("EVOPOLICY_SESSION"):
    print("error: no session: $EVOPOLICY_SESSION is not set (or pass --socket)", file=sys.stderr)
    sys.exit(2)
workspace = Path(os.environ["EVOPOLICY_WORKSPACE"])
state = json.loads(state_path.read_text()) if state_path.exists() else {"subs": [], "done": None}
scores = json.loads(os.environ.get("FAKE_SCORES", "[12.5]"))
budget = int(os.environ.get("FAKE_BUDGET", "64"))


def save():
    state_path.write_text(json.dumps(state))


if argv[:2] == ["session", "submit"]:
    rest = argv[2:]
    if "--episodes" not in rest or rest.index("--episodes") + 1 >= len(rest):
        print("error: Missing option '--episodes'.", file=sys.stderr)
        sys.exit(2)
    at = rest.index("--episodes")
    selector, others = rest[at + 1], rest[:at] + rest[at + 2:]
    directory = Path(others[0]) if others else workspace / "program"
    if state["done"] is not None:
        reject("session_closed", "the session is closed")
    indices = []
    try:
        for part in selector.split(","):
            a, _, b = part.partition(":")
            indices += list(range(int(a), int(b))) if b else [int(a)]
    except ValueError:
        reject("invalid_selector", f"{selector!r} is not a selector")
    used = sum(len(s["indices"]) for s in state["subs"])
    if used + len(indices) > budget:
        reject("budget_exhausted", "not enough budget left")
    policy = directory / "policy.py"
    if not policy.is_file():
        reject("program_invalid", "the program has no policy.py at its top level")
    source = policy.read_bytes()
    sid = len(state["subs"]) + 1
    score = scores[min(sid, len(scores)) - 1]
    name = f"submission-{sid:04d}"
    document = {
        "submission_id": sid,
        "program_digest": hashlib.sha256(source).hexdigest(),
        "parent_program_digest": None,
        "indices": indices,
        "budget_reserved": len(indices),
        "episodes": [
            {"index": i, "status": "completed", "total_reward": score, "steps": 10,
             "failure": None, "output_tail": ""}
            for i in indices
        ],
        "artifacts": [],
        "status": "published",
        "budget_used": used + len(indices),
        "budget_left": budget - used - len(indices),
        "score": score,
        "failures": 0,
        "content": {},
        "error": None,
    }
    text = json.dumps(document, sort_keys=True, indent=2)
    (workspace / "feedback" / name).mkdir(parents=True)
    (workspace / "feedback" / name / "feedback.json").write_text(text)
    (workspace / "feedback" / "latest.json").write_text(text)
    state["subs"].append({"id": sid, "indices": indices})
    save()
    out({**document, "feedback_path": f"feedback/{name}/feedback.json"})
elif argv[:2] == ["session", "finish"] and argv[2:]:
    try:
        ids = [int(a) for a in argv[2:]]
    except ValueError:
        print("error: Invalid value for 'ID...'", file=sys.stderr)
        sys.exit(2)
    if state["done"] is not None:
        reject("session_closed", "the session is closed")
    known = {s["id"] for s in state["subs"]}
    for i in ids:
        if i not in known:
            reject("unknown_submission", f"there is no Submission {i}")
    state["done"] = ids
    save()
    out({"accepted": True, "candidates": ids})
else:
    print("error: usage: evopolicy session submit|finish", file=sys.stderr)
    sys.exit(2)
"""


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str
    messages: list[Message]
    session: list[list[str]]  # the argv of every session command, in order


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def tools(*calls: dict[str, Any], content: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"content": content, "tool_calls": list(calls), **extra}


def make_workspace(root: Path, *, max_candidates: int = 1) -> Path:
    ws = root / "ws"
    for part in ("program", "feedback", "analysis"):
        (ws / part).mkdir(parents=True)
    (ws / "TASK.md").write_text(TASK_MD)
    task = {
        "benchmark": {"id": "toy", "score_direction": "maximize"},
        "episode_budget": 64,
        "episode_pool_size": 64,
        "max_submissions": 16,
        "max_episodes_per_submission": 8,
        "finish_budget_policy": "allow_early",
        "max_candidates": max_candidates,
    }
    (ws / "task.json").write_text(json.dumps(task, indent=2))
    (ws / "program" / "policy.py").write_text(POLICY)
    return ws


def run_chat(
    root: Path,
    ws: Path,
    server: ChatServer,
    *options: str,
    key: str | None = None,
    scores: tuple[float, ...] = (12.5,),
) -> Result:
    cli = root / "fake_evopolicy.py"
    cli.write_text(FAKE_CLI)
    log = root / "session.log"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_API_KEY", KEY_ENV) and "proxy" not in k.lower()
    }
    env.update(
        EVOPOLICY_SESSION=str(root / "session.sock"),  # only checked for presence by the fake
        EVOPOLICY_WORKSPACE=str(ws),
        EVOPOLICY_CLI=json.dumps([sys.executable, str(cli)]),
        FAKE_SESSION_LOG=str(log),
        FAKE_SCORES=json.dumps(list(scores)),
        PYTHONUNBUFFERED="1",
    )
    if key is not None:
        env[KEY_ENV] = key
    argv = [sys.executable, "-m", "evopolicygym.agents.chat", "--base-url", server.url]
    argv += ["--model", MODEL, "--api-key-env", KEY_ENV, "--timeout", "10", *options]
    done = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=60)
    decode = msgspec.json.Decoder(Message)
    # Nothing but transcript lines on stdout: every line decodes as a Message.
    messages = [decode.decode(line) for line in done.stdout.splitlines()]
    session = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return Result(done.returncode, done.stdout, done.stderr, messages, session)


def check_pairs(messages: list[Message]) -> None:
    """Every tool call is answered by exactly one tool message, right after its call."""
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message.role == "tool":
            raise AssertionError(f"a tool result without a call: {message}")
        for tc in message.tool_calls:
            assert message.role == "assistant"
            result = messages[i]
            assert result.role == "tool", result
            assert (result.tool_call_id, result.name) == (tc.id, tc.name)
            i += 1


def tool_results(messages: list[Message]) -> dict[str, str]:
    return {m.tool_call_id or "": m.content for m in messages if m.role == "tool"}


def last_tool_contents(request: dict[str, Any]) -> list[str]:
    """The tool results at the end of a request's messages (those of the previous turn)."""
    contents: list[str] = []
    for message in reversed(request["messages"]):
        if message["role"] != "tool":
            break
        contents.insert(0, message["content"])
    return contents


# --------------------------------------------------------------------------- scenarios


def test_scripted_session_edits_submits_and_finishes(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    notes = "# Notes\n\nGAIN 0.5 -> 0.8: act earlier.\n"
    probe = (
        "import os\n"
        "print('cwd', os.path.basename(os.getcwd()))\n"
        "print('session', os.environ.get('EVOPOLICY_SESSION'))\n"
        f"print('key', os.environ.get({KEY_ENV!r}))\n"
        "print(open('notes.md').read().splitlines()[0])\n"
    )
    replies: list[Reply] = [
        tools(call("list_files", path="."), content="Let me look around."),
        tools(call("read_file", path="TASK.md"), reasoning_content="The task comes first."),
        tools(
            call("edit_file", path="program/policy.py", old="GAIN = 0.5", new="GAIN = 0.8"),
            call("write_file", path="analysis/notes.md", content=notes),
            usage={
                "prompt_tokens": 1000,
                "completion_tokens": 50,
                "total_tokens": 1050,
                "prompt_tokens_details": {"cached_tokens": 600},
            },
        ),
        tools(call("run_analysis", code=probe)),
        tools(call("submit", episodes="0:4")),
        tools(call("read_file", path="feedback/latest.json")),
        tools(call("finish", candidates=[1]), content="Finishing with Submission 1."),
    ]
    with ChatServer(replies, api_key="sk-test-secret", model=MODEL) as server:
        result = run_chat(tmp_path, ws, server, key="sk-test-secret")
    assert result.code == 0, result.stderr
    assert server.remaining == 0 and server.statuses == [200] * 7

    # The files changed as scripted, and the session saw one submit and one finish.
    assert (ws / "program" / "policy.py").read_text() == POLICY.replace("GAIN = 0.5", "GAIN = 0.8")
    assert (ws / "analysis" / "notes.md").read_text() == notes
    program = os.path.realpath(ws / "program")
    assert result.session == [
        ["session", "submit", program, "--episodes", "0:4"],
        ["session", "finish", "1"],
    ]

    # What the model was shown: the task, the kickoff, the tools and every tool result.
    assert all(h.get("Authorization") == "Bearer sk-test-secret" for h in server.headers)
    first = server.requests[0]
    assert first["model"] == MODEL
    assert first["messages"][0] == {"role": "system", "content": TASK_MD}
    assert first["messages"][1]["role"] == "user"
    assert first["messages"][1]["content"].startswith(KICKOFF)
    names = {t["function"]["name"] for t in first["tools"]}
    assert names == {
        "list_files",
        "read_file",
        "write_file",
        "edit_file",
        "run_analysis",
        "submit",
        "finish",
    }
    assert first["tools"] == TOOLS
    listing = last_tool_contents(server.requests[1])[0]
    assert "program/policy.py" in listing and "TASK.md" in listing
    assert last_tool_contents(server.requests[2]) == [TASK_MD]
    edited, wrote = last_tool_contents(server.requests[3])
    assert edited.startswith("edited program/policy.py") and wrote.startswith(
        "wrote analysis/notes.md"
    )
    analysis = last_tool_contents(server.requests[4])[0]
    assert analysis.startswith("exit status 0")
    # In analysis/, without the session and without the API key.
    assert "cwd analysis" in analysis and "session None" in analysis and "key None" in analysis
    assert "# Notes" in analysis
    submitted = json.loads(last_tool_contents(server.requests[5])[0])
    assert submitted["submission_id"] == 1 and submitted["score"] == 12.5
    latest = json.loads(last_tool_contents(server.requests[6])[0])
    assert latest["submission_id"] == 1 and latest["budget_left"] == 60
    # Assistant turns go back with their tool calls, arguments as JSON strings.
    assistant = server.requests[1]["messages"][2]
    assert assistant["role"] == "assistant"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"path": "."}
    assert "reasoning_content" not in server.requests[2]["messages"][3]

    # The transcript: opening messages, then each model turn and its results, as they happened.
    messages = result.messages
    assert [m.role for m in messages[:2]] == ["system", "user"]
    assert messages[0].content == TASK_MD
    check_pairs(messages)
    turns = [m for m in messages if m.role == "assistant"]
    assert len(turns) == 7
    assert turns[0].content == "Let me look around."
    assert turns[1].reasoning == "The task comes first."
    assert [tc.name for tc in turns[2].tool_calls] == ["edit_file", "write_file"]
    assert turns[2].tool_calls[0].arguments == {
        "path": "program/policy.py",
        "old": "GAIN = 0.5",
        "new": "GAIN = 0.8",
    }
    assert all(t.usage is not None and t.usage.input_tokens > 0 for t in turns)
    assert all(t.usage is not None and t.usage.output_tokens > 0 for t in turns)
    assert turns[2].usage is not None
    assert (turns[2].usage.input_tokens, turns[2].usage.output_tokens) == (1000, 50)
    assert turns[2].usage.cached_tokens == 600
    assert turns[-1].tool_calls[0].arguments == {"candidates": [1]}
    finish = messages[-1]
    assert finish.role == "tool" and finish.name == "finish"
    assert json.loads(finish.content) == {"accepted": True, "candidates": [1]}
    assert "sk-test-secret" not in result.stdout + result.stderr


def test_retries_server_errors_and_rate_limits(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    replies: list[Reply] = [
        (500, "The server had an error while processing your request."),
        (429, 0),
        tools(call("submit", episodes="0:2")),
        tools(call("finish", candidates=[1])),
    ]
    with ChatServer(replies) as server:
        result = run_chat(tmp_path, ws, server)
    assert result.code == 0, result.stderr
    assert server.statuses == [500, 429, 200, 200]
    # The same request, sent again.
    assert server.requests[0] == server.requests[1] == server.requests[2]
    assert "Authorization" not in server.headers[0]  # no key configured: none sent
    retries = [line for line in result.stderr.splitlines() if "retrying" in line]
    assert len(retries) == 2 and "HTTP 500" in retries[0] and "HTTP 429" in retries[1]
    assert "retrying in 0 s" in retries[1]  # Retry-After: 0 honoured
    assert result.session[-1] == ["session", "finish", "1"]
    check_pairs(result.messages)
    assert sum(m.role == "assistant" for m in result.messages) == 2


def test_client_error_is_fatal_and_the_key_stays_secret(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    secret = "sk-wrong-secret-0123456789"
    with ChatServer([tools(call("list_files"))], api_key="sk-right", model=MODEL) as server:
        result = run_chat(tmp_path, ws, server, key=secret)
    assert result.code == 3
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "401" in lines[0], result.stderr
    assert server.statuses == [401]  # no retry
    assert server.headers[0]["Authorization"] == f"Bearer {secret}"  # it was sent ...
    assert secret not in result.stdout and secret not in result.stderr  # ... never printed
    assert result.session == []  # nothing published, so nothing to finish with
    assert [m.role for m in result.messages[:2]] == ["system", "user"]


def test_paths_outside_the_workspace_are_refused(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET")
    (outside / "victim.py").write_text("original")
    (ws / "analysis" / "link").symlink_to(outside, target_is_directory=True)
    (ws / "program" / "escape.py").symlink_to(outside / "victim.py")
    (ws / "program" / "dangling.py").symlink_to(outside / "new.py")
    attempts = [
        call("read_file", path="../outside/secret.txt"),
        call("read_file", path=str(outside / "secret.txt")),
        call("read_file", path="analysis/link/secret.txt"),
        call("list_files", path="analysis/link"),
        call("list_files", path=".."),
        call("write_file", path="analysis/link/new.txt", content="x"),
        call("write_file", path="program/escape.py", content="pwned"),
        call("write_file", path="program/dangling.py", content="pwned"),
        call("edit_file", path="program/escape.py", old="original", new="pwned"),
        call("write_file", path="program/../../outside/new.txt", content="x"),
        call("write_file", path="task.json", content="{}"),
        call("write_file", path="feedback/latest.json", content="{}"),
        call("submit", episodes="0:1", directory="analysis/link"),
        call("run_analysis", code="print(1)") | {"arguments": {}},  # missing code
    ]
    before = sorted(p.name for p in outside.iterdir())
    with ChatServer([tools(*attempts)]) as server:
        result = run_chat(tmp_path, ws, server, "--max-turns", "1")
    assert result.code == 0, result.stderr
    results = [m for m in result.messages if m.role == "tool"]
    assert len(results) == len(attempts)
    for attempt, message in zip(attempts, results, strict=True):
        assert message.content.startswith("error:"), (attempt, message.content)
    assert "outside the workspace" in results[2].content
    assert "read-only" in results[10].content
    assert sorted(p.name for p in outside.iterdir()) == before
    assert (outside / "victim.py").read_text() == "original"
    assert not (ws / "feedback" / "latest.json").exists()
    assert json.loads((ws / "task.json").read_text())["episode_budget"] == 64
    assert "TOP SECRET" not in result.stdout
    assert result.session == []  # no submit ran; nothing published, so no finish either
    check_pairs(result.messages)


def test_turn_limit_finishes_with_the_best_published_submissions(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path, max_candidates=2)
    replies: list[Reply] = [
        tools(call("submit", episodes="0:4")),
        tools(call("edit_file", path="program/policy.py", old="GAIN = 0.5", new="GAIN = 2.0")),
        tools(call("submit", episodes="0:4")),
        tools(call("finish", candidates=[2])),  # never asked for
    ]
    with ChatServer(replies) as server:
        result = run_chat(tmp_path, ws, server, "--max-turns", "3", scores=(12.5, 20.0))
    assert result.code == 0, result.stderr
    assert len(server.requests) == 3 and server.remaining == 1
    # The model was told its turns were running out.
    reminders = [m for m in server.requests[2]["messages"] if m["role"] == "user"]
    assert "turn(s) left" in reminders[-1]["content"]
    assert result.session[-1] == ["session", "finish", "2", "1"]  # best first
    check_pairs(result.messages)
    fallback = result.messages[-2]
    assert fallback.role == "assistant" and fallback.usage is None
    assert fallback.tool_calls[0].name == "finish"
    assert fallback.tool_calls[0].arguments == {"candidates": [2, 1]}
    assert json.loads(result.messages[-1].content)["accepted"] is True


def test_token_budget_stops_the_loop(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    replies: list[Reply] = [
        tools(
            call("submit", episodes="0:4"), usage={"prompt_tokens": 900, "completion_tokens": 200}
        ),
        tools(call("list_files")),
    ]
    with ChatServer(replies) as server:
        result = run_chat(tmp_path, ws, server, "--max-tokens", "1000")
    assert result.code == 0, result.stderr
    assert len(server.requests) == 1
    assert result.session[-1] == ["session", "finish", "1"]
    assert "token budget" in result.messages[-2].content


def test_invalid_arguments_are_a_tool_error_and_the_loop_goes_on(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    broken = '{"path": "program/x.py", "content": "print(1'
    replies: list[Reply] = [
        tools({"name": "write_file", "arguments": broken}, call("rm_rf", path=".")),
        {"content": "Let me think about it."},
        tools(
            call("list_files", path="program"),
            call("submit", episodes="a:b"),
            call("finish", candidates=[7]),
            call("run_analysis", code="print('x' * 50000)\nraise SystemExit(3)"),
        ),
    ]
    with ChatServer(replies) as server:
        result = run_chat(tmp_path, ws, server, "--max-turns", "3")
    assert result.code == 0, result.stderr
    assert server.statuses == [200, 200, 200]
    assert not (ws / "program" / "x.py").exists()
    turn = next(m for m in result.messages if m.role == "assistant")
    assert turn.tool_calls[0].arguments == {"_raw": broken}
    results = tool_results(result.messages)
    invalid = results[turn.tool_calls[0].id]
    assert invalid.startswith("error:") and "not valid JSON" in invalid
    assert results[turn.tool_calls[1].id].startswith("error: there is no tool 'rm_rf'")
    # The model saw the error; what went back as arguments is valid JSON.
    second = server.requests[1]["messages"]
    sent = next(m for m in second if m["role"] == "assistant")
    assert json.loads(sent["tool_calls"][0]["function"]["arguments"]) == {"_raw": broken}
    assert any(m["role"] == "tool" and "not valid JSON" in m["content"] for m in second)
    # A reply without a tool call is answered with a nudge, and the loop goes on.
    nudge = server.requests[2]["messages"][-1]
    assert nudge["role"] == "user" and "No tool was called" in nudge["content"]
    last = [m for m in result.messages if m.role == "assistant" and m.tool_calls][-1]
    listing, submit, finish, analysis = (results[tc.id] for tc in last.tool_calls)
    assert "program/policy.py" in listing
    # Rejections reach the model as such, and the loop goes on.
    assert json.loads(submit.removeprefix("rejected: "))["error"]["code"] == "invalid_selector"
    assert json.loads(finish.removeprefix("rejected: "))["error"]["code"] == "unknown_submission"
    # run_analysis output is bounded.
    assert analysis.startswith("exit status 3") and "left out" in analysis
    assert len(analysis) < 10_000
    check_pairs(result.messages)


@pytest.mark.parametrize("extra", [["--max-turns", "0"], ["--base-url", "ftp://x"]])
def test_bad_arguments_exit_2(tmp_path: Path, extra: list[str]) -> None:
    ws = make_workspace(tmp_path)
    with ChatServer([]) as server:
        result = run_chat(tmp_path, ws, server, *extra)
    assert result.code == 2 and result.messages == [] and server.requests == []


def test_spent_retries_and_an_unreachable_server_are_fatal(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path)
    with ChatServer([(503, "overloaded"), (502, "bad gateway")]) as server:
        result = run_chat(tmp_path, ws, server, "--max-retries", "1")
    assert result.code == 3 and server.statuses == [503, 502]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and "retrying in 0.5 s" in lines[0]
    assert "after 2 attempt(s)" in lines[1] and "HTTP 502" in lines[1]
    server = ChatServer([])  # never started: its port refuses connections once closed
    server.httpd.server_close()
    result = run_chat(tmp_path, make_workspace(tmp_path / "again"), server, "--max-retries", "0")
    assert result.code == 3 and len(result.stderr.strip().splitlines()) == 1, result.stderr
