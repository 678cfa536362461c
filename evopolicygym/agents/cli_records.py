"""The session records the agent CLIs keep of their own, read back into transcript messages.

A CLI's stdout stream (``streams``) is what it chooses to print: codex prints its own
rendering of a tool call (``shell`` with a login-shell command line for the model's
``exec_command``, a patch's paths without its body) and one usage total per turn. The
record it keeps for resuming holds what the model saw and said: codex's rollout
(``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread id>.jsonl``) has every response
item with the model's exact tool names and arguments and a usage record per model
response. Claude Code's session file, Kimi Code's wire file and kimi-cli's context file
hold the same for theirs. ``read_session`` finds an attempt's record by the session id
its output gave (``session_id_in``) and turns it into one assistant message per model
response (its text, reasoning, parallel calls, usage and model), the tool results and
the CLI's errors, so the Host can record it beside the live stream.

The CLI's own instructions (codex's developer messages, the environment context) stay in
the record, kept raw; the transcript starts where the task does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.agents.streams import (
    KimiParser,
    anthropic_usage,
    openai_usage,
    synthetic_fault,
    tool_arguments,
)
from evopolicygym.transcript import AgentFault, Message, ToolCall, Usage

__all__ = [
    "MAX_RECORD_BYTES",
    "SessionRecord",
    "claude_session",
    "codex_rollout",
    "function_tool",
    "kimi_cli_context",
    "kimi_tools",
    "kimi_wire",
    "read_session",
    "relative_to_workspace",
    "session_id_in",
]

MAX_RECORD_BYTES = 64 * 1024 * 1024  # a larger record is not read
_SESSION_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{0,127}")


class SessionRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt's session record: where it came from, its bytes, its messages."""

    source: str  # "codex-rollout", "claude-session", "kimi-wire", "kimi-cli-context"
    raw: bytes
    messages: list[Message]
    tools: list[dict[str, Any]] | None = None  # offered to the model, where the record lists them


def read_session(
    provider: str, session_id: str | None, env: Mapping[str, str]
) -> SessionRecord | None:
    """The session record of ``provider``'s attempt ``session_id`` (None where the CLI keeps
    none, it cannot be found, or it is too large)."""
    # The Agent's output names it: a name, never a path or a pattern.
    if not session_id or not _SESSION_ID.fullmatch(session_id):
        return None
    home = Path(env.get("HOME") or "~").expanduser()
    if provider == "codex":
        where = Path(env.get("CODEX_HOME") or home / ".codex") / "sessions"
        pattern, source, parse = (
            f"*/*/*/rollout-*-{session_id}.jsonl",
            "codex-rollout",
            codex_rollout,
        )
    elif provider == "claude-code":
        where = Path(env.get("CLAUDE_CONFIG_DIR") or home / ".claude") / "projects"
        pattern, source, parse = f"*/{session_id}.jsonl", "claude-session", claude_session
    elif provider == "kimi" and session_id.startswith("session_"):  # Kimi Code 2.x
        where = Path(env.get("KIMI_CODE_HOME") or home / ".kimi-code") / "sessions"
        pattern, source, parse = f"*/{session_id}/agents/main/wire.jsonl", "kimi-wire", kimi_wire
    elif provider == "kimi":  # kimi-cli 1.x
        where = Path(env.get("KIMI_SHARE_DIR") or home / ".kimi") / "sessions"
        pattern, source, parse = (
            f"*/{session_id}/context.jsonl",
            "kimi-cli-context",
            kimi_cli_context,
        )
    else:
        return None
    with contextlib.suppress(OSError):
        found = sorted(where.glob(pattern))
        raw = _read_regular(found[-1]) if found else None
        if raw is None:
            return None
        tools = kimi_tools(raw.splitlines()) if provider == "kimi" else None
        return SessionRecord(source=source, raw=raw, messages=parse(raw.splitlines()), tools=tools)
    return None


_KIMI_CLI_RESUME = re.compile(rb"kimi -r ([0-9a-f][0-9a-f-]{7,63})\b")


def session_id_in(provider: str, stdout: bytes, stderr: bytes = b"") -> str | None:
    """The id a CLI gave its session, as its output says it: codex's ``thread.started``,
    Claude Code's ``system``/``init``, Kimi Code's ``session.resume_hint`` (stdout) or
    kimi-cli's resume line (stderr). From the recorded output, so an attempt whose Host
    died can be found again on resume."""
    marker = {
        "codex": b"thread.started",
        "claude-code": b'"init"',
        "kimi": b"session.resume_hint",
    }.get(provider)
    if marker is None:
        return None
    for event in _objects(stdout.splitlines(), marker):
        found = event.get("thread_id") if provider == "codex" else event.get("session_id")
        if isinstance(found, str) and found:
            return found
    if provider == "kimi":
        resume = _KIMI_CLI_RESUME.search(stderr[-65536:])
        return resume.group(1).decode() if resume else None
    return None


def _objects(lines: Iterable[bytes], marker: bytes = b"") -> Iterator[dict[str, Any]]:
    """The JSON objects among ``lines`` (those holding ``marker``); the rest is skipped."""
    for line in lines:
        if marker not in line:
            continue
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                yield entry


def _read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not a link: the Agent writes these
    directories, and the Host must not be led to read its own files) of at most
    ``MAX_RECORD_BYTES``."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        raw = handle.read(MAX_RECORD_BYTES + 1)
    return raw if len(raw) <= MAX_RECORD_BYTES else None


def _text(content: Any) -> str:
    """The text of a Responses API content list (or a plain string)."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


class _Response:
    """What one model response said so far: its reasoning, text and calls."""

    def __init__(self) -> None:
        self.reasoning: list[str] = []
        self.texts: list[str] = []
        self.calls: list[ToolCall] = []

    def __bool__(self) -> bool:
        return bool(self.reasoning or self.texts or self.calls)

    def message(self, usage: Usage | None, model: str | None) -> Message:
        return _said(self.texts, self.reasoning, self.calls, usage, model)


def _said(
    texts: list[str],
    thoughts: list[str],
    calls: list[ToolCall],
    usage: Usage | None,
    model: str | None,
) -> Message:
    """One model response as an assistant message."""
    return Message(
        role="assistant",
        content="\n".join(texts),
        reasoning="\n\n".join(thoughts) or None,
        tool_calls=calls,
        usage=usage,
        model=model,
    )


def codex_rollout(lines: Iterable[bytes]) -> list[Message]:
    """A codex rollout's conversation: one assistant message per model response (closed by
    its usage record), tool results, user messages after the first (the task), errors."""
    out: list[Message] = []
    response = _Response()
    names: dict[str, str] = {}
    model: str | None = None
    seen_task = False

    def close(usage: Usage | None = None) -> None:
        nonlocal response
        if response or usage is not None:
            out.append(response.message(usage, model))
        response = _Response()

    for entry in _objects(lines):
        if not isinstance(entry.get("payload"), dict):
            continue
        kind, payload = entry.get("type"), entry["payload"]
        if kind == "turn_context" and isinstance(payload.get("model"), str):
            model = payload["model"]
        elif kind == "token_usage_record":  # the fields of codex's own usage lines
            close(openai_usage(payload.get("usage")) or Usage())
        elif kind == "event_msg" and payload.get("type") in ("error", "stream_error"):
            close()
            message = payload.get("message")
            out.append(
                Message(
                    role="error",
                    content=str(message or ""),
                    error=AgentFault(kind=str(payload["type"])),
                )
            )
        elif kind == "response_item":
            item_type = payload.get("type")
            if item_type == "reasoning":
                summary = _text(payload.get("summary"))
                if summary:
                    response.reasoning.append(summary)
            elif item_type == "message" and payload.get("role") == "assistant":
                response.texts.append(_text(payload.get("content")))
            elif item_type == "message" and payload.get("role") == "user":
                text = _text(payload.get("content"))
                if text.startswith("<environment_context>"):
                    continue  # the CLI's own context, kept in the raw record
                if not seen_task:
                    seen_task = True  # the task: the transcript's system message already
                    continue
                close()
                out.append(Message(role="user", content=text))
            elif item_type in ("function_call", "custom_tool_call", "local_shell_call"):
                call_id = str(
                    payload.get("call_id") or payload.get("id") or f"codex-call-{len(names)}"
                )
                name = str(
                    payload.get("name")
                    or ("local_shell" if item_type == "local_shell_call" else "?")
                )
                if item_type == "custom_tool_call":  # freeform (apply_patch): its text whole
                    arguments = {"input": str(payload.get("input") or "")}
                else:
                    raw = payload.get("arguments" if item_type == "function_call" else "action")
                    arguments = tool_arguments(raw)
                names[call_id] = name
                response.calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
            elif item_type in ("function_call_output", "custom_tool_call_output"):
                close()
                call_id = str(payload.get("call_id") or "")
                output = payload.get("output")
                if isinstance(output, dict):  # {"content": ..., "success": ...} in some versions
                    output = output.get("content", "")
                out.append(
                    Message(
                        role="tool",
                        content=_text(output),
                        tool_call_id=call_id,
                        name=names.get(call_id),
                    )
                )
    close()
    return out


def claude_session(lines: Iterable[bytes]) -> list[Message]:
    """A Claude Code session file's conversation: the lines of one API message (one per
    content block, sharing ``message.id``) as one assistant message with that message's
    final usage and model; tool results; user text after the task; the CLI's synthetic
    messages as errors. Side chains (subagents) are left out."""
    out: list[Message] = []
    group: list[dict[str, Any]] = []
    seen_task = False

    def close() -> None:
        if not group:
            return
        texts: list[str] = []
        thoughts: list[str] = []
        calls: list[ToolCall] = []
        for message in group:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
                    thoughts.append(block["thinking"])
                elif block.get("type") == "tool_use":
                    calls.append(
                        ToolCall(
                            id=str(block.get("id") or ""),
                            name=str(block.get("name") or "?"),
                            arguments=tool_arguments(block.get("input")),
                        )
                    )
        last = group[-1]
        model = last.get("model") if isinstance(last.get("model"), str) else None
        out.append(_said(texts, thoughts, calls, anthropic_usage(last.get("usage")), model))
        group.clear()

    names: dict[str, str] = {}
    for entry in _objects(lines):
        if entry.get("isSidechain") is True:
            continue
        message = entry.get("message")
        if not isinstance(message, dict):
            continue
        if entry.get("type") == "assistant":
            fault = synthetic_fault(entry)
            if fault is not None:
                close()
                out.append(fault)
                continue
            if group and message.get("id") != group[-1].get("id"):
                close()
            group.append(message)
            for block in message.get("content") or ():
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    names[str(block.get("id") or "")] = str(block.get("name") or "?")
        elif entry.get("type") == "user":
            close()
            content = message.get("content")
            if isinstance(content, str):
                if seen_task:
                    out.append(Message(role="user", content=content))
                seen_task = True  # the first is the task: the transcript's system message already
                continue
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    call_id = str(block.get("tool_use_id") or "")
                    out.append(
                        Message(
                            role="tool",
                            content=_text(block.get("content")),
                            tool_call_id=call_id,
                            name=names.get(call_id),
                        )
                    )
                elif isinstance(block, dict) and block.get("type") == "text":
                    if seen_task:
                        out.append(Message(role="user", content=str(block.get("text") or "")))
                    seen_task = True
    close()
    return out


def kimi_wire(lines: Iterable[bytes]) -> list[Message]:
    """Kimi Code's wire file, by its ``agent.message.appended`` records: each model step's
    message (thinking, text, calls) with the step's usage, tool results, and the model the
    loop asked (``llm.request``)."""
    out: list[Message] = []
    model: str | None = None
    names: dict[str, str] = {}
    seen_task = False
    for entry in _objects(lines):
        if entry.get("type") == "llm.request" and isinstance(entry.get("model"), str):
            model = entry["model"]
            continue
        if entry.get("type") != "agent.message.appended" or not isinstance(
            entry.get("message"), dict
        ):
            continue
        envelope = entry["message"]
        message, meta = envelope.get("message"), envelope.get("meta")
        if not isinstance(message, dict):
            continue
        meta = meta if isinstance(meta, dict) else {}
        role = message.get("role")
        given = message.get("content")
        parts: list[Any] = given if isinstance(given, list) else []
        texts = [
            str(p.get("text") or "")
            for p in parts
            if isinstance(p, dict) and p.get("type") == "text"
        ]
        thoughts = [
            str(p.get("think") or "")
            for p in parts
            if isinstance(p, dict) and p.get("type") == "think"
        ]
        if role == "assistant":
            calls = []
            for call in message.get("toolCalls") or ():
                if isinstance(call, dict):
                    call_id = str(call.get("id") or "")
                    names[call_id] = str(call.get("name") or "?")
                    calls.append(
                        ToolCall(
                            id=call_id,
                            name=names[call_id],
                            arguments=tool_arguments(call.get("arguments")),
                        )
                    )
            usage = meta.get("usage") if isinstance(meta.get("usage"), dict) else None
            out.append(
                _said(texts, thoughts, calls, None if usage is None else _kimi_usage(usage), model)
            )
        elif role == "tool":
            call_id = str(message.get("toolCallId") or "")
            out.append(
                Message(
                    role="tool",
                    content="\n".join(texts),
                    tool_call_id=call_id,
                    name=names.get(call_id),
                )
            )
        elif role == "user":
            if seen_task and not any(t.startswith("<system-reminder>") for t in texts):
                out.append(Message(role="user", content="\n".join(texts)))
            seen_task = True  # the first is the task: the transcript's system message already
    return out


def kimi_cli_context(lines: Iterable[bytes]) -> list[Message]:
    """kimi-cli's context file: the messages its stream prints, whole (its printed stream
    cuts a second parallel call's arguments short), with its bookkeeping (``_usage``,
    ``_checkpoint``, the system prompt) and the task left out."""
    parser = KimiParser()
    out: list[Message] = []
    seen_task = False
    for line in lines:
        for message in parser.feed(line):
            if message.role == "user" and not seen_task:
                seen_task = True  # the task: the transcript's system message already
            elif message.role in ("assistant", "tool", "user"):
                out.append(message)
    return out


def kimi_tools(lines: Iterable[bytes]) -> list[dict[str, Any]] | None:
    """The tools of Kimi Code's main loop, from its last ``llm.tools_snapshot``."""
    tools = None
    for entry in _objects(lines, b"llm.tools_snapshot"):
        if entry.get("type") == "llm.tools_snapshot":
            tools = [
                function_tool(str(t.get("name") or "?"), t.get("description"), t.get("parameters"))
                for t in entry.get("tools") or ()
                if isinstance(t, dict)
            ]
    return tools


def function_tool(name: str, description: Any = None, parameters: Any = None) -> dict[str, Any]:
    """An OpenAI-style function tool; what a CLI does not tell is left out."""
    function: dict[str, Any] = {"name": name}
    if isinstance(description, str):
        function["description"] = description
    if isinstance(parameters, dict):
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def _kimi_usage(usage: dict[str, Any]) -> Usage | None:
    """Kimi Code's step usage: the Messages API's counts under other names (input without
    the cache's part)."""
    return anthropic_usage(
        {
            "input_tokens": usage.get("inputOther"),
            "cache_read_input_tokens": usage.get("inputCacheRead"),
            "cache_creation_input_tokens": usage.get("inputCacheCreation"),
            "output_tokens": usage.get("output"),
        }
    )


def relative_to_workspace(messages: list[Message], workspace: str) -> list[Message]:
    """``messages`` with the workspace's absolute path written as ``.``: a temporary path of
    the Host's machine is nothing a trainer should learn."""
    if not workspace or workspace == "/":
        return messages
    root = workspace.rstrip(os.sep)

    def fix(value: Any) -> Any:
        if isinstance(value, str):
            return value.replace(root + os.sep, "").replace(root, ".")
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return [
        msgspec.structs.replace(
            m,
            content=fix(m.content),
            reasoning=fix(m.reasoning),
            tool_calls=[
                msgspec.structs.replace(c, arguments=fix(c.arguments)) for c in m.tool_calls
            ],
        )
        for m in messages
    ]
