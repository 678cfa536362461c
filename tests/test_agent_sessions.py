"""The CLIs' own session records read back as transcripts (``agents.cli_records``).

The released CLIs' records are read end to end in ``test_agent_clis``; these pin the
shapes they have and what a malformed or hostile record does: lines that are not
records are skipped, side chains and the CLI's own context are left out, a record
too large or named oddly is not read.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from evopolicygym.agents.cli_records import (
    MAX_RECORD_BYTES,
    claude_session,
    codex_rollout,
    read_session,
    relative_to_workspace,
)
from evopolicygym.transcript import AgentFault, Message, ToolCall, Usage


def lines(*entries: Any) -> list[bytes]:
    return [e if isinstance(e, bytes) else json.dumps(e).encode() for e in entries]


def item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"type": "response_item", "payload": payload}


USAGE = {
    "input_tokens": 100,
    "cached_input_tokens": 40,
    "cache_write_input_tokens": 5,
    "output_tokens": 9,
    "reasoning_output_tokens": 3,
}

ROLLOUT = lines(
    {"type": "session_meta", "payload": {"id": "t-1", "cwd": "/w"}},
    {"type": "turn_context", "payload": {"model": "gpt-test", "cwd": "/w"}},
    item(
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "You are codex."}],
        }
    ),
    item(
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>/w</environment_context>"}
            ],
        }
    ),
    item(
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "# Task"}]}
    ),
    item(
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Two things at once."}]}
    ),
    item(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Reading both."}],
        }
    ),
    item(
        {
            "type": "function_call",
            "name": "exec_command",
            "arguments": '{"cmd": "cat a"}',
            "call_id": "c1",
        }
    ),
    item(
        {
            "type": "custom_tool_call",
            "name": "apply_patch",
            "input": "*** Begin Patch\n*** End Patch",
            "call_id": "c2",
        }
    ),
    {"type": "token_usage_record", "payload": {"response_id": "r1", "usage": USAGE}},
    b"not json",
    item({"type": "function_call_output", "call_id": "c1", "output": "A"}),
    item({"type": "custom_tool_call_output", "call_id": "c2", "output": {"content": "patched"}}),
    {"type": "event_msg", "payload": {"type": "error", "message": "unexpected status 500"}},
    item(
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "keep going"}],
        }
    ),
    {"type": "token_usage_record", "payload": {"response_id": "r2", "usage": {}}},
)


def test_a_codex_rollout_is_one_message_per_response_with_its_calls_and_usage() -> None:
    assert codex_rollout(ROLLOUT) == [
        Message(
            role="assistant",
            content="Reading both.",
            reasoning="Two things at once.",
            tool_calls=[
                ToolCall(id="c1", name="exec_command", arguments={"cmd": "cat a"}),
                ToolCall(
                    id="c2",
                    name="apply_patch",
                    arguments={"input": "*** Begin Patch\n*** End Patch"},
                ),
            ],
            usage=Usage(
                input_tokens=100,
                cached_tokens=40,
                cache_write_tokens=5,
                output_tokens=9,
                reasoning_tokens=3,
            ),
            model="gpt-test",
        ),
        Message(role="tool", content="A", tool_call_id="c1", name="exec_command"),
        Message(role="tool", content="patched", tool_call_id="c2", name="apply_patch"),
        Message(role="error", content="unexpected status 500", error=AgentFault(kind="error")),
        Message(role="user", content="keep going"),
        Message(role="assistant", usage=Usage(), model="gpt-test"),
    ]


def claude_line(kind: str, message: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": kind, "message": message, **extra}


def test_a_claude_session_joins_one_api_message_and_leaves_side_chains_out() -> None:
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 2,
        "cache_read_input_tokens": 30,
        "output_tokens": 7,
    }
    record = lines(
        {"type": "queue-operation"},
        claude_line("user", {"role": "user", "content": "# Task"}),
        claude_line(
            "assistant",
            {
                "id": "m1",
                "model": "claude-x",
                "content": [{"type": "thinking", "thinking": "Hm."}],
                "usage": usage,
            },
        ),
        claude_line(
            "assistant",
            {
                "id": "m1",
                "model": "claude-x",
                "content": [
                    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
                ],
                "usage": usage,
            },
        ),
        claude_line(
            "assistant",
            {"id": "s1", "model": "claude-x", "content": [{"type": "text", "text": "sub"}]},
            isSidechain=True,
        ),
        claude_line(
            "user",
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t1",
                        "content": [{"type": "text", "text": "a b"}],
                    }
                ],
            },
        ),
        claude_line(
            "assistant",
            {
                "id": "x",
                "model": "<synthetic>",
                "content": [{"type": "text", "text": "API Error: 500"}],
            },
            error="unknown",
        ),
        b"{",
    )
    assert claude_session(record) == [
        Message(
            role="assistant",
            reasoning="Hm.",
            tool_calls=[ToolCall(id="t1", name="Bash", arguments={"command": "ls"})],
            usage=Usage(input_tokens=42, cached_tokens=30, cache_write_tokens=2, output_tokens=7),
            model="claude-x",
        ),
        Message(role="tool", content="a b", tool_call_id="t1", name="Bash"),
        Message(
            role="error", content="API Error: 500", error=AgentFault(kind="synthetic", status=500)
        ),
    ]


def test_records_are_found_by_session_id_and_bounded(tmp_path: Path) -> None:
    day = tmp_path / "codex" / "sessions" / "2026" / "12" / "02"
    day.mkdir(parents=True)
    (day / "rollout-2026-12-02T10-00-00-t-1.jsonl").write_bytes(b"\n".join(ROLLOUT))
    env = {"CODEX_HOME": str(tmp_path / "codex"), "HOME": str(tmp_path)}
    found = read_session("codex", "t-1", env)
    assert (
        found is not None
        and found.source == "codex-rollout"
        and found.messages == codex_rollout(ROLLOUT)
    )
    assert read_session("codex", "t-2", env) is None
    assert read_session("codex", "../t-1", env) is None and read_session("codex", None, env) is None
    assert read_session("codex", "*", env) is None and read_session("codex", "t-[1]", env) is None
    assert read_session("kimi", "t-1", env) is None  # no record reader for it
    with (day / "rollout-2026-12-02T11-00-00-big.jsonl").open("wb") as big:
        big.truncate(MAX_RECORD_BYTES + 1)
    assert read_session("codex", "big", env) is None
    # a record that is a link (to a file of the Host's, say) or not a file is not read
    (day / "rollout-2026-12-02T12-00-00-link.jsonl").symlink_to(
        day / "rollout-2026-12-02T10-00-00-t-1.jsonl"
    )
    assert read_session("codex", "link", env) is None
    os.mkfifo(day / "rollout-2026-12-02T13-00-00-fifo.jsonl")
    assert read_session("codex", "fifo", env) is None


def test_the_workspace_path_is_written_as_dot() -> None:
    message = Message(
        role="assistant",
        content="wrote /tmp/ws-1/program/p.py in /tmp/ws-1",
        tool_calls=[ToolCall(id="c", name="x", arguments={"path": ["/tmp/ws-1/a"]})],
    )
    (fixed,) = relative_to_workspace([message], "/tmp/ws-1")
    assert fixed.content == "wrote program/p.py in ."
    assert fixed.tool_calls[0].arguments == {"path": ["a"]}


def test_a_kimi_wire_file_is_read_by_its_appended_messages() -> None:
    def appended(message: dict[str, Any], **meta: Any) -> dict[str, Any]:
        return {"type": "agent.message.appended", "message": {"message": message, "meta": meta}}

    record = lines(
        {"type": "llm.request", "model": "k2"},
        appended({"role": "user", "content": [{"type": "text", "text": "# Task"}]}),
        appended(
            {
                "role": "user",
                "content": [{"type": "text", "text": "<system-reminder>date</system-reminder>"}],
            }
        ),
        appended(
            {
                "role": "assistant",
                "content": [{"type": "think", "think": "Both."}, {"type": "text", "text": "Go."}],
                "toolCalls": [
                    {"id": "a", "name": "Bash", "arguments": '{"command": "ls"}'},
                    {"id": "b", "name": "Read", "arguments": '{"path": "TASK.md"}'},
                ],
            },
            usage={"inputOther": 50, "output": 6, "inputCacheRead": 20, "inputCacheCreation": 0},
        ),
        appended({"role": "tool", "content": [{"type": "text", "text": "x"}], "toolCallId": "a"}),
        {"type": "usage.record"},
        b"[]",
    )
    from evopolicygym.agents.cli_records import kimi_wire

    assert kimi_wire(record) == [
        Message(
            role="assistant",
            content="Go.",
            reasoning="Both.",
            tool_calls=[
                ToolCall(id="a", name="Bash", arguments={"command": "ls"}),
                ToolCall(id="b", name="Read", arguments={"path": "TASK.md"}),
            ],
            usage=Usage(input_tokens=70, cached_tokens=20, output_tokens=6),
            model="k2",
        ),
        Message(role="tool", content="x", tool_call_id="a", name="Bash"),
    ]


def test_a_kimi_cli_context_file_keeps_its_messages_and_drops_its_bookkeeping(
    tmp_path: Path,
) -> None:
    from evopolicygym.agents.cli_records import kimi_cli_context

    record = lines(
        {"role": "_system_prompt", "content": "You are Kimi."},
        {"role": "_checkpoint", "id": 0},
        {"role": "user", "content": "# Task"},
        {"role": "_usage", "token_count": 10},
        {
            "role": "assistant",
            "content": [{"type": "think", "think": "Both."}],
            "tool_calls": [
                {
                    "type": "function",
                    "id": "a",
                    "function": {"name": "Shell", "arguments": '{"command": "ls"}'},
                },
                {
                    "type": "function",
                    "id": "b",
                    "function": {"name": "ReadFile", "arguments": '{"path": "program/policy.py"}'},
                },
            ],
        },
        {"role": "tool", "content": "x", "tool_call_id": "a"},
    )
    assert kimi_cli_context(record) == [
        Message(
            role="assistant",
            reasoning="Both.",
            tool_calls=[
                ToolCall(id="a", name="Shell", arguments={"command": "ls"}),
                ToolCall(id="b", name="ReadFile", arguments={"path": "program/policy.py"}),
            ],
        ),
        Message(role="tool", content="x", tool_call_id="a", name="Shell"),
    ]
    sessions = tmp_path / "share" / "sessions" / "h" / "0b1c2d3e-aaaa"
    sessions.mkdir(parents=True)
    (sessions / "context.jsonl").write_bytes(b"\n".join(record))
    found = read_session("kimi", "0b1c2d3e-aaaa", {"KIMI_SHARE_DIR": str(tmp_path / "share")})
    assert found is not None and found.source == "kimi-cli-context" and len(found.messages) == 2
