"""The chat agent: a tool-calling loop against any OpenAI-compatible Chat Completions endpoint.

Run as::

    python -m evopolicygym.agents.chat --base-url URL --model NAME [--api-key-env VAR]
        [--max-turns N] [--max-tokens N] [--temperature T] [--timeout S] [--max-retries N]
        [--no-system-message]

with ``EVOPOLICY_SESSION``, ``EVOPOLICY_WORKSPACE`` and ``EVOPOLICY_CLI`` set by the Host.
It POSTs to ``{base_url}/chat/completions`` (``base_url`` like ``http://127.0.0.1:8000/v1``:
OpenAI, vLLM, SGLang, Ollama and the like) with the standard library only. The system
message is ``TASK.md``; the model works through the tools in ``transcript.CHAT_TOOLS``:
workspace files (reads anywhere in the workspace, writes only under ``program/`` and
``analysis/``), Python in ``analysis/`` without the session, and the session's ``submit``
and ``finish``.

The loop ends when ``finish`` is accepted, after ``--max-turns`` model calls, or once the
``--max-tokens`` budget (prompt plus completion tokens, as the server reports them) is
spent. Without an accepted finish the agent then finishes with its best published
Submissions itself, so the Run still has a candidate.

stdout carries only the transcript: one ``transcript.Message`` per line, as it happens.
The opening system (``TASK.md``) and user messages are on it too, unless
``--no-system-message`` leaves out the system one (the Host records it already). Each model
turn is an assistant message with its ``usage`` and ``reasoning`` (``reasoning_content`` or
``reasoning`` from the server), followed by one tool message per tool call. Diagnostics go
to stderr. Exit status: 0 when the loop ended; 3 when the model API failed for good (a 4xx
other than 429, or every retry spent), with one line on stderr; 1 on an internal error; 2
for bad arguments. The fallback finish runs in every case but a bad argument. The API key
(from the variable named by ``--api-key-env``) is never printed, nor seen by run_analysis.

This module is the loop (``run_agent``), its ``Options`` and the command line. The model
API is in ``chat_client``, the tools in ``chat_tools``, the session commands in
``session_client`` and the transcript in ``transcript_writer``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from evopolicygym.agents.chat_client import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT_S,
    ApiError,
    ChatClient,
    ParsedCall,
    choice_message,
    content_text,
    parse_calls,
    response_usage,
)
from evopolicygym.agents.chat_tools import Tools, Workspace
from evopolicygym.agents.session_client import SessionClient, cli_from_env
from evopolicygym.agents.transcript_writer import TranscriptWriter
from evopolicygym.protocol import WORKSPACE_ENV
from evopolicygym.transcript import CHAT_TOOLS, KICKOFF, TOOLS_NOTE, Message, ToolCall

__all__ = ["Options", "main", "run_agent"]

DEFAULT_MAX_TURNS = 60
DEFAULT_MAX_TOKENS = 2_000_000
MAX_IDLE_REPLIES = 3  # replies in a row without a tool call before the loop gives up


# --------------------------------------------------------------------------- the loop


@dataclass
class Options:
    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    max_turns: int = DEFAULT_MAX_TURNS
    max_tokens: int = DEFAULT_MAX_TOKENS
    temperature: float | None = None
    timeout: float = DEFAULT_TIMEOUT_S
    max_retries: int = DEFAULT_MAX_RETRIES
    system_message: bool = True


def run_agent(workspace: Path, cli: Sequence[str], options: Options, out: IO[bytes]) -> int:
    """The agent's whole life in ``workspace``; returns the exit status."""
    transcript = TranscriptWriter(out)
    ws = Workspace(workspace)
    api_key = os.environ.get(options.api_key_env) or None
    hidden = (options.api_key_env,) if options.api_key_env else ()
    tools = Tools(ws, SessionClient(cli, ws.root), hidden_env=hidden)
    client = ChatClient(
        options.base_url,
        options.model,
        api_key=api_key,
        temperature=options.temperature,
        timeout=options.timeout,
        max_retries=options.max_retries,
    )
    chat = _Chat(options, transcript, tools, client)
    chat.open(_task_md(ws.root))
    try:
        status, stop = chat.loop()
    except Exception:
        traceback.print_exc(file=sys.stderr)
        status, stop = 1, "an internal error"
    if not tools.finished:
        try:
            _fallback_finish(tools, transcript, stop)
        except Exception:
            traceback.print_exc(file=sys.stderr)
    return status


def _task_md(root: Path) -> str:
    try:
        return (root / "TASK.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"chat agent: TASK.md is unreadable ({exc}); task.json stands in", file=sys.stderr)
        return "# Task\n\nSee `task.json` in the workspace.\n"


_NUDGE = (
    "No tool was called. Continue with the tools; when you are done, call "
    "`finish` with your best Submission ids, best first."
)


class _Chat:
    """The conversation: the messages sent to the model, what is spent, and its steps."""

    def __init__(
        self, options: Options, transcript: TranscriptWriter, tools: Tools, client: ChatClient
    ) -> None:
        self.options = options
        self.transcript = transcript
        self.tools = tools
        self.client = client
        self.messages: list[dict[str, Any]] = []
        self.turns = self.tokens = self.idle = 0
        self.reminded_turns = self.reminded_tokens = False

    def say(self, role: Literal["system", "user"], content: str) -> None:
        self.transcript.emit(Message(role=role, content=content, at=time.time_ns()))
        self.messages.append({"role": role, "content": content})

    def open(self, task_md: str) -> None:
        """The system message (``TASK.md``) and the kickoff."""
        if self.options.system_message:
            self.say("system", task_md)
        else:  # the Host recorded the system message already: the model still needs it
            self.messages.append({"role": "system", "content": task_md})
        self.say("user", f"{KICKOFF}\n\n{TOOLS_NOTE.format(turns=self.options.max_turns)}")

    def loop(self) -> tuple[int, str]:
        """Model turns until the Run is finished or something stops them: (exit status, what
        stopped them)."""
        while not self.tools.finished:
            limit = self.limit()
            if limit is not None:
                return 0, limit
            try:
                payload = self.client.complete(self.messages, CHAT_TOOLS)
            except ApiError as exc:
                print(f"chat agent: {self.client.redact(str(exc))}", file=sys.stderr, flush=True)
                return 3, "a model API failure"
            calls = self.reply(payload)
            if not calls:
                self.idle += 1
                if self.idle >= MAX_IDLE_REPLIES:
                    return 0, f"{self.idle} replies in a row without a tool call"
                self.say("user", _NUDGE)
                continue
            self.idle = 0
            self.run_calls(calls)
            if self.tools.finished:
                break
            self.remind()
        return 0, "the loop ended"

    def limit(self) -> str | None:
        """The limit reached (turns or tokens), if any."""
        if self.turns >= self.options.max_turns:
            return f"the turn limit ({self.options.max_turns} model calls)"
        if self.tokens >= self.options.max_tokens:
            return f"the token budget ({self.tokens} of {self.options.max_tokens} tokens spent)"
        return None

    def reply(self, payload: Mapping[str, Any]) -> list[ParsedCall]:
        """Record the model's reply (transcript and messages); its tool calls."""
        self.turns += 1
        message = choice_message(payload) or {}
        usage, spent = response_usage(payload)
        if not spent:  # no usage from the server: a rough estimate keeps the budget bounded
            spent = (len(json.dumps(self.messages)) + len(json.dumps(message))) // 4
        self.tokens += spent
        content = content_text(message.get("content"))
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        calls = parse_calls(message, self.turns)
        self.transcript.emit(
            Message(
                role="assistant",
                content=content,
                reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
                tool_calls=[ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls],
                usage=usage,
                # The model that answered, as the server names it (a served alias may
                # resolve to a checkpoint); the one asked for when the server says none.
                model=_served_model(payload) or self.options.model,
                at=time.time_ns(),
            )
        )
        entry: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            entry["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.raw},
                }
                for c in calls
            ]
        self.messages.append(entry)
        return calls

    def run_calls(self, calls: list[ParsedCall]) -> None:
        """Run the reply's tool calls in order, each result recorded and sent back."""
        for call in calls:
            if self.tools.finished:
                result = "skipped: the Run is already finished"
            elif call.problem is not None:
                result = (
                    f"error: {call.problem}; nothing was done. Call {call.name or 'the tool'} "
                    "again with a JSON object of arguments."
                )
            else:
                result = self.tools.run(call.name, call.arguments)
            self.transcript.result(call.id, call.name, result)
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    def remind(self) -> None:
        """Once each, near the end of the turns or of the token budget: say so."""
        left = self.options.max_turns - self.turns
        if 0 < left <= 2 and not self.reminded_turns:
            self.reminded_turns = True
            self.say("user", _reminder(f"{left} model turn(s) left"))
        elif (
            0.9 * self.options.max_tokens <= self.tokens < self.options.max_tokens
            and not self.reminded_tokens
        ):
            self.reminded_tokens = True
            self.say(
                "user",
                _reminder(f"{self.options.max_tokens - self.tokens} tokens of the budget left"),
            )


def _served_model(payload: Mapping[str, Any]) -> str | None:
    model = payload.get("model")
    return model if isinstance(model, str) and model.strip() else None


def _reminder(what: str) -> str:
    return (
        f"Reminder: {what}. Make sure your best program is submitted, then call `finish` with "
        "your best Submission ids, best first."
    )


def _fallback_finish(tools: Tools, transcript: TranscriptWriter, stop: str) -> None:
    """Finish with the best published Submissions, recorded as the agent's own tool calls."""
    ids = tools.best_published()
    if not ids:
        transcript.say(
            f"Stopped by {stop} without a finish, and no Submission was published: "
            "there is nothing to finish with."
        )
        transcript.flush()
        return
    attempts = [ids] if len(ids) == 1 else [ids, ids[:1]]
    for number, candidates in enumerate(attempts, 1):
        arguments: dict[str, Any] = {"candidates": candidates}
        transcript.say(
            f"Stopped by {stop} without a finish: finishing with the best published "
            f"Submission(s) {', '.join(map(str, candidates))}, best first."
        )
        result = transcript.tool(
            "finish",
            arguments,
            functools.partial(tools.run, "finish", arguments),
            call_id=f"call_fallback_{number}",
        )
        if tools.finished or not result.startswith("rejected"):
            return


# --------------------------------------------------------------------------- the command


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evopolicygym.agents.chat",
        description="A tool-calling agent on an OpenAI-compatible Chat Completions endpoint.",
    )
    parser.add_argument("--base-url", required=True, help="like http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="the model name the server knows")
    parser.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="the environment variable holding the API key (none sent when unset)",
    )
    parser.add_argument("--max-turns", type=_positive_int, default=DEFAULT_MAX_TURNS)
    parser.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=DEFAULT_MAX_TOKENS,
        help="the budget of prompt plus completion tokens over all model calls",
    )
    parser.add_argument("--temperature", type=float, default=None)
    parser.add_argument(
        "--timeout", type=_positive_float, default=DEFAULT_TIMEOUT_S, help="seconds per request"
    )
    parser.add_argument("--max-retries", type=_non_negative_int, default=DEFAULT_MAX_RETRIES)
    parser.add_argument(
        "--no-system-message",
        dest="system_message",
        action="store_false",
        help="leave the system message (TASK.md) out of the transcript on stdout",
    )
    args = parser.parse_args(argv)
    scheme = urllib.parse.urlsplit(args.base_url).scheme
    if scheme not in ("http", "https"):
        parser.error("--base-url must be an http:// or https:// URL")
    workspace = Path(os.environ.get(WORKSPACE_ENV) or os.getcwd())
    cli = cli_from_env("chat agent")
    options = Options(
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
        max_turns=args.max_turns,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        timeout=args.timeout,
        max_retries=args.max_retries,
        system_message=args.system_message,
    )
    return run_agent(workspace, cli, options, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
