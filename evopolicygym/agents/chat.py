"""The chat agent: a tool-calling loop against any OpenAI-compatible Chat Completions endpoint.

Run as::

    python -m evopolicygym.agents.chat --base-url URL --model NAME [--api-key-env VAR]
        [--max-turns N] [--max-tokens N] [--temperature T] [--timeout S] [--max-retries N]
        [--no-system-message]

with ``EVOPOLICY_SESSION``, ``EVOPOLICY_WORKSPACE`` and ``EVOPOLICY_CLI`` set by the Host.
It POSTs to ``{base_url}/chat/completions`` (``base_url`` like ``http://127.0.0.1:8000/v1``:
OpenAI, vLLM, SGLang, Ollama and the like) with the standard library only. The system
message is ``TASK.md``; the model works through the tools in ``transcript.CHAT_TOOLS``: workspace files
(reads anywhere in the workspace, writes only under ``program/`` and ``analysis/``), Python
in ``analysis/`` without the session, and the session's ``submit`` and ``finish``.

The loop ends when ``finish`` is accepted, after ``--max-turns`` model calls, or once the
``--max-tokens`` budget (prompt plus completion tokens, as the server reports them) is
spent. Without an accepted finish the agent then finishes with its best published
Submissions itself, so the Run still has a candidate.

stdout carries only the transcript: one ``records.events.Message`` per line, as it happens.
The opening system (``TASK.md``) and user messages are on it too, unless
``--no-system-message`` leaves out the system one (the Host records it already). Each model
turn is an assistant message with its ``usage`` and ``reasoning`` (``reasoning_content`` or
``reasoning`` from the server), followed by one tool message per tool call. Diagnostics go
to stderr. Exit status: 0 when the loop ended; 3 when the model API failed for good (a 4xx
other than 429, or every retry spent), with one line on stderr; 1 on an internal error; 2
for bad arguments. The fallback finish runs in every case but a bad argument. The API key
(from the variable named by ``--api-key-env``) is never printed, nor seen by run_analysis.
"""

from __future__ import annotations

import argparse
import contextlib
import email.utils
import http.client
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Literal

import msgspec

from evopolicygym.protocol import CLI_ENV, SESSION_ENV, WORKSPACE_ENV
from evopolicygym.transcript import (
    ANALYSIS_TIMEOUT_S,
    CHAT_TOOLS,
    KICKOFF,
    READ_CHARS,
    TOOLS_NOTE,
    Message,
    ToolCall,
    Usage,
)

__all__ = [
    "ApiError",
    "ChatClient",
    "Options",
    "ToolError",
    "Tools",
    "Transcript",
    "Workspace",
    "main",
    "run_agent",
]

DEFAULT_MAX_TURNS = 60
DEFAULT_MAX_TOKENS = 2_000_000
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_MAX_RETRIES = 5
BACKOFF_BASE_S, BACKOFF_FACTOR, BACKOFF_CAP_S = 0.5, 2.0, 8.0
RETRY_AFTER_CAP_S = 60.0  # a server asking for longer is not waited on longer
ANALYSIS_FILE_LIMIT = 64 * 1024 * 1024  # RLIMIT_FSIZE of run_analysis (its output files too)
OUTPUT_CHARS = 8_000  # of run_analysis stdout and of its stderr, each (head and tail)
READ_BYTES = 16 * 1024 * 1024  # and reads no further into a file than this
RESULT_CHARS = 24_000  # any tool result, as the model sees it
LIST_ENTRIES = 300
MAX_IDLE_REPLIES = 3  # replies in a row without a tool call before the loop gives up
WRITABLE = ("program", "analysis")
SKIPPED_DIRS = frozenset({"__pycache__", ".git"})


# --------------------------------------------------------------------------- the transcript


class Transcript:
    """The normalized transcript on a stream: one ``Message`` per line, flushed per line."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream

    def emit(self, message: Message) -> None:
        with contextlib.suppress(BrokenPipeError, ValueError):
            self.stream.write(msgspec.json.encode(message) + b"\n")
            self.stream.flush()


# --------------------------------------------------------------------------- the workspace


class ToolError(Exception):
    """A tool call that cannot be done; its message goes back to the model."""


class Workspace:
    """Paths inside the workspace: relative, without ``..``, not escaping through symlinks."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))

    def resolve(self, rel: Any, *, write: bool = False) -> Path:
        if not isinstance(rel, str) or not rel.strip():
            raise ToolError("the path must be a non-empty string")
        if "\x00" in rel:
            raise ToolError("the path holds a NUL character")
        pure = PurePosixPath(rel)
        if pure.is_absolute() or rel.startswith("~"):
            raise ToolError(
                f"{rel}: absolute paths are refused; give a path relative to the workspace"
            )
        if ".." in pure.parts:
            raise ToolError(f"{rel}: '..' is refused; paths stay inside the workspace")
        parts = [p for p in pure.parts if p not in ("", ".")]
        real = Path(os.path.realpath(self.root.joinpath(*parts)))
        if real != self.root and not real.is_relative_to(self.root):
            raise ToolError(f"{rel}: leads outside the workspace (through a symlink); refused")
        if write:
            inside = real.relative_to(self.root).parts
            if len(inside) < 2 or inside[0] not in WRITABLE:
                raise ToolError(
                    f"{rel}: read-only; only files under program/ and analysis/ can be written"
                )
        return real

    def display(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return rel or "."

    def read_json(self, rel: str) -> Any:
        try:
            return json.loads((self.root / rel).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n[... {len(text) - limit} characters left out ...]\n{text[-tail:]}"


def _one_line(text: str, limit: int = 500) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


# --------------------------------------------------------------------------- the tools


@dataclass
class Published:
    submission_id: int
    score: float
    failures: int
    digest: str | None


@dataclass
class Tools:
    """The tools the model calls. Each returns the text the model gets back."""

    workspace: Workspace
    cli: list[str]
    hidden_env: tuple[str, ...] = ()  # variables run_analysis must not see (the API key's)
    finished: bool = False
    replies: dict[int, dict[str, Any]] = field(default_factory=dict)  # submit replies by id

    def run(self, name: str, arguments: Mapping[str, Any]) -> str:
        handler: Callable[[Mapping[str, Any]], str] | None = getattr(self, f"tool_{name}", None)
        if handler is None or name not in _TOOL_NAMES:
            return (
                f"error: there is no tool {name!r}; the tools are {', '.join(sorted(_TOOL_NAMES))}"
            )
        try:
            return _bounded(handler(arguments), RESULT_CHARS)
        except ToolError as exc:
            return f"error: {exc}"
        except Exception as exc:  # a tool bug must not end the Run's only Agent
            traceback.print_exc(file=sys.stderr)
            return (
                f"error: the tool failed unexpectedly: {type(exc).__name__}: {_one_line(str(exc))}"
            )

    # ----------------------------------------------------------------- files

    def tool_list_files(self, args: Mapping[str, Any]) -> str:
        rel = args.get("path") or "."
        top = self.workspace.resolve(rel)
        if not top.is_dir():
            raise ToolError(f"{rel}: not a directory")
        lines: list[str] = []
        for directory, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
            base = Path(directory)
            for name in [*dirnames, *sorted(filenames)]:
                path = base / name
                shown = self.workspace.display(path)
                if path.is_symlink():
                    lines.append(f"{shown} (symlink)")
                elif path.is_dir():
                    lines.append(f"{shown}/")
                else:
                    with contextlib.suppress(OSError):
                        lines.append(f"{shown} ({path.stat().st_size} bytes)")
                if len(lines) >= LIST_ENTRIES:
                    lines.append(
                        f"[listing stopped at {LIST_ENTRIES} entries; list a subdirectory]"
                    )
                    return "\n".join(lines)
        return "\n".join(lines) if lines else f"{rel}: empty directory"

    def tool_read_file(self, args: Mapping[str, Any]) -> str:
        rel = args.get("path")
        path = self.workspace.resolve(rel)
        if not path.is_file():
            raise ToolError(f"{rel}: no such file" if not path.exists() else f"{rel}: not a file")
        offset = args.get("offset") or 0
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ToolError("offset must be a non-negative integer")
        with path.open("rb") as f:
            data = f.read(READ_BYTES + 1)
        if b"\x00" in data[:8192]:
            size = path.stat().st_size
            return f"{rel}: a binary file ({size} bytes); inspect it with run_analysis"
        cut = len(data) > READ_BYTES
        text = data[:READ_BYTES].decode("utf-8", errors="replace")
        if cut:
            text += (
                f"\n[... the file goes on past {READ_BYTES} bytes; read it with run_analysis ...]"
            )
        part = text[offset : offset + READ_CHARS]
        rest = len(text) - offset - len(part)
        if rest > 0:
            part += (
                f"\n[... {rest} more characters: read_file with offset={offset + len(part)} ...]"
            )
        return part if text else f"{rel}: empty file"

    def tool_write_file(self, args: Mapping[str, Any]) -> str:
        rel, content = args.get("path"), args.get("content")
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        path = self.workspace.resolve(rel, write=True)
        if path.is_dir():
            raise ToolError(f"{rel}: is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        path.write_bytes(data)
        return (
            f"wrote {self.workspace.display(path)} ({len(data)} bytes){_syntax_note(path, content)}"
        )

    def tool_edit_file(self, args: Mapping[str, Any]) -> str:
        rel, old, new = args.get("path"), args.get("old"), args.get("new")
        if not isinstance(old, str) or not isinstance(new, str):
            raise ToolError("old and new must be strings")
        if not old:
            raise ToolError("old must not be empty")
        path = self.workspace.resolve(rel, write=True)
        if not path.is_file():
            raise ToolError(f"{rel}: no such file")
        text = path.read_text(encoding="utf-8")
        count = text.count(old)
        if count == 0:
            raise ToolError(f"{rel}: `old` does not occur in the file (it must match exactly)")
        if count > 1:
            raise ToolError(
                f"{rel}: `old` occurs {count} times; include more context to make it unique"
            )
        updated = text.replace(old, new, 1)
        path.write_text(updated, encoding="utf-8")
        return f"edited {self.workspace.display(path)}{_syntax_note(path, updated)}"

    # ----------------------------------------------------------------- analysis

    def tool_run_analysis(self, args: Mapping[str, Any]) -> str:
        code = args.get("code")
        if not isinstance(code, str):
            raise ToolError("code must be a string")
        cwd = self.workspace.root / "analysis"
        if cwd.is_symlink() or (cwd.exists() and not cwd.is_dir()):
            raise ToolError("analysis/ is not a directory")
        cwd.mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != SESSION_ENV and k not in self.hidden_env}
        env["PYTHONUNBUFFERED"] = "1"
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            process = subprocess.Popen(
                [sys.executable, "-"],
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own group: a timeout ends its children too
                preexec_fn=_limit_files,
            )
            timed_out = False
            try:
                process.communicate(code.encode("utf-8"), timeout=ANALYSIS_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                # Whatever it left running in its group goes with it.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            status = (
                f"timed out after {ANALYSIS_TIMEOUT_S:g} s and was killed"
                if timed_out
                else f"exit status {process.returncode}"
            )
            return f"{status}\n--- stdout ---\n{_head_tail(out)}\n--- stderr ---\n{_head_tail(err)}"

    # ----------------------------------------------------------------- the session

    def session(self, *args: str) -> tuple[int, str, str]:
        try:
            done = subprocess.run(
                [*self.cli, "session", *args],
                cwd=self.workspace.root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise ToolError(f"the session command could not run: {exc.strerror or exc}") from exc
        return (
            done.returncode,
            done.stdout.decode("utf-8", errors="replace"),
            done.stderr.decode("utf-8", errors="replace"),
        )

    def tool_submit(self, args: Mapping[str, Any]) -> str:
        episodes = args.get("episodes")
        if isinstance(episodes, int) and not isinstance(episodes, bool):
            episodes = str(episodes)
        if not isinstance(episodes, str) or not episodes.strip():
            raise ToolError("episodes must be a selector string like 0:4")
        rel = args.get("directory") or "program"
        directory = self.workspace.resolve(rel)
        if not directory.is_dir():
            raise ToolError(f"{rel}: not a directory")
        code, out, err = self.session("submit", str(directory), "--episodes", episodes.strip())
        if code == 0:
            reply = _json_object(out)
            sid = reply.get("submission_id") if reply else None
            if reply is not None and isinstance(sid, int):
                self.replies[sid] = reply
            return _compact(out)
        if code == 1:
            return f"rejected: {_compact(err)}"
        return f"error: the session command failed (exit {code}): {_one_line(err)}"

    def tool_finish(self, args: Mapping[str, Any]) -> str:
        ids = _ids(args.get("candidates"))
        code, out, err = self.session("finish", *(str(i) for i in ids))
        if code == 0:
            self.finished = True
            return _compact(out) or "finished"
        if code == 1:
            return f"rejected: {_compact(err)}"
        return f"error: the session command failed (exit {code}): {_one_line(err)}"

    # ----------------------------------------------------------------- the fallback

    def best_published(self) -> list[int]:
        """Published Submissions, best first (distinct programs, at most the candidate limit):
        from the feedback files, and the submit replies where those are unreadable."""
        documents: dict[int, dict[str, Any]] = dict(self.replies)
        feedback = self.workspace.root / "feedback"
        for path in sorted(feedback.glob("submission-*/feedback.json")):
            with contextlib.suppress(OSError, ValueError):
                data = json.loads(path.read_text(encoding="utf-8"))
                if isinstance(data, dict) and isinstance(data.get("submission_id"), int):
                    documents[data["submission_id"]] = data
        latest = self.workspace.read_json("feedback/latest.json")
        if isinstance(latest, dict) and isinstance(latest.get("submission_id"), int):
            documents.setdefault(latest["submission_id"], latest)
        published: list[Published] = []
        for sid, data in documents.items():
            score = data.get("score")
            if data.get("status", "published") != "published":
                continue
            if not isinstance(score, int | float) or isinstance(score, bool) or score != score:
                continue
            failures = data.get("failures")
            digest = data.get("program_digest")
            published.append(
                Published(
                    sid,
                    float(score),
                    failures if isinstance(failures, int) else 0,
                    digest if isinstance(digest, str) else None,
                )
            )
        loaded = self.workspace.read_json("task.json")
        task: dict[str, Any] = loaded if isinstance(loaded, dict) else {}
        spec = task.get("benchmark")
        benchmark: dict[str, Any] = spec if isinstance(spec, dict) else {}
        sign = 1.0 if benchmark.get("score_direction") == "minimize" else -1.0
        limit = task.get("max_candidates")
        limit = limit if isinstance(limit, int) and limit >= 1 else 1
        published.sort(key=lambda p: (sign * p.score, p.failures, p.submission_id))
        ids: list[int] = []
        seen: set[str] = set()
        for p in published:
            if p.digest is not None:
                if p.digest in seen:
                    continue
                seen.add(p.digest)
            ids.append(p.submission_id)
        return ids[:limit]


_TOOL_NAMES = frozenset(tool["function"]["name"] for tool in CHAT_TOOLS)


def _ids(value: Any) -> list[int]:
    items = value if isinstance(value, list) else [value]
    ids: list[int] = []
    for item in items:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item.strip())
        if not isinstance(item, int) or isinstance(item, bool) or item < 0:
            raise ToolError("candidates must be a non-empty list of Submission ids (integers)")
        ids.append(item)
    if not ids:
        raise ToolError("candidates must be a non-empty list of Submission ids (integers)")
    return ids


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _compact(text: str) -> str:
    """JSON output on one line (the session CLI indents it): fewer tokens for the model."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text.strip()


def _syntax_note(path: Path, source: str) -> str:
    if path.suffix != ".py":
        return ""
    try:
        compile(source, path.name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"\nwarning: {path.name} does not compile: {exc.msg} (line {exc.lineno})"
    except (ValueError, MemoryError, RecursionError) as exc:
        return f"\nwarning: {path.name} does not compile: {_one_line(str(exc))}"
    return ""


def _limit_files() -> None:
    with contextlib.suppress(Exception):
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (ANALYSIS_FILE_LIMIT, ANALYSIS_FILE_LIMIT))


def _head_tail(stream: IO[bytes]) -> str:
    stream.seek(0, os.SEEK_END)
    size = stream.tell()
    stream.seek(0)
    if size <= OUTPUT_CHARS:
        return stream.read().decode("utf-8", errors="replace")
    head = stream.read(OUTPUT_CHARS // 2).decode("utf-8", errors="replace")
    stream.seek(size - OUTPUT_CHARS // 2)
    tail = stream.read().decode("utf-8", errors="replace")
    return f"{head}\n[... {size - OUTPUT_CHARS} bytes left out ...]\n{tail}"


# --------------------------------------------------------------------------- the model API


class ApiError(Exception):
    """The model API failed for good: a client error, or every retry spent."""


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    # A redirect would carry the Authorization header elsewhere: it is an error instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class ChatClient:
    """POST ``{base_url}/chat/completions``, retrying 429, 5xx and connection failures."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        temperature: float | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        max_retries: int = DEFAULT_MAX_RETRIES,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key or None
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max(0, max_retries)
        self.sleep = sleep
        handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
        host = urllib.parse.urlsplit(self.url).hostname or ""
        if host in ("localhost", "127.0.0.1", "::1"):
            handlers.append(urllib.request.ProxyHandler({}))  # loopback never goes via a proxy
        self.opener = urllib.request.build_opener(*handlers)

    def redact(self, text: str) -> str:
        return text.replace(self.api_key, "[redacted]") if self.api_key else text

    def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "tools": tools,
            "stream": False,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        headers["User-Agent"] = "evopolicygym-chat-agent"
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                request = urllib.request.Request(
                    self.url, data=data, headers=headers, method="POST"
                )
                with self.opener.open(request, timeout=self.timeout) as response:
                    raw = response.read()
                payload = _json_object(raw.decode("utf-8", errors="replace"))
                if payload is not None and _choice_message(payload) is not None:
                    return payload
                problem = "the response is not a chat completion"
                if payload is not None and isinstance(payload.get("error"), dict):
                    problem += f": {_error_text(self.redact(raw.decode('utf-8', 'replace')))}"
            except urllib.error.HTTPError as exc:
                try:
                    text = _error_text(self.redact(exc.read().decode("utf-8", errors="replace")))
                except Exception:
                    text = exc.reason if isinstance(exc.reason, str) else ""
                problem = f"HTTP {exc.code}{': ' + text if text else ''}"
                if exc.code != 429 and exc.code < 500:
                    raise ApiError(
                        self.redact(f"the model API refused the request: {problem}")
                    ) from None
                retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
            except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
                reason = getattr(exc, "reason", None) or exc
                problem = f"{type(exc).__name__}: {reason}"
            problem = self.redact(_one_line(problem, 300))
            if attempt >= self.max_retries:
                raise ApiError(f"the model API failed after {attempt + 1} attempt(s): {problem}")
            delay = (
                retry_after
                if retry_after is not None
                else min(BACKOFF_CAP_S, BACKOFF_BASE_S * BACKOFF_FACTOR**attempt)
            )
            print(f"chat agent: {problem}; retrying in {delay:g} s", file=sys.stderr, flush=True)
            self.sleep(delay)
            attempt += 1


def _error_text(text: str) -> str:
    """The message of an error body (OpenAI's ``{"error": {"message"}}`` or the like)."""
    data = _json_object(text)
    if data is not None:
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return _one_line(str(error["message"]), 300)
        if isinstance(error, str):
            return _one_line(error, 300)
        if isinstance(data.get("message"), str):
            return _one_line(data["message"], 300)
    return _one_line(text, 300)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - time.time()
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_CAP_S)


def _choice_message(payload: Mapping[str, Any]) -> dict[str, Any] | None:
    choices = payload.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return None
    message = choices[0].get("message")
    return message if isinstance(message, dict) else None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in value
        )
    return str(value)


def _usage(payload: Mapping[str, Any]) -> tuple[Usage | None, int]:
    """The response's usage, and the tokens it spent (prompt plus completion)."""
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return None, 0

    def count(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    prompt, completion = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    details = usage.get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, dict) else 0
    cached = cached or count(usage.get("cached_tokens"))
    spent = prompt + completion or count(usage.get("total_tokens"))
    return Usage(input_tokens=prompt, output_tokens=completion, cached_tokens=cached), spent


@dataclass
class _Call:
    id: str
    name: str
    arguments: dict[str, Any]
    raw: str  # the arguments as sent back to the API
    problem: str | None  # why the arguments are unusable


def _calls(message: Mapping[str, Any], turn: int) -> list[_Call]:
    calls: list[_Call] = []
    raw_calls = message.get("tool_calls")
    for number, item in enumerate(raw_calls if isinstance(raw_calls, list) else [], 1):
        if not isinstance(item, dict):
            continue
        found = item.get("function")
        function: dict[str, Any] = found if isinstance(found, dict) else {}
        given = item.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{turn}_{number}"
        named = function.get("name")
        name = named if isinstance(named, str) else ""
        arguments = function.get("arguments")
        problem = None
        if isinstance(arguments, dict):
            parsed: dict[str, Any] = arguments
            raw = json.dumps(arguments, ensure_ascii=False)
        else:
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            try:
                value = json.loads(raw) if raw.strip() else {}
            except ValueError as exc:
                value, problem = None, f"the arguments are not valid JSON ({exc})"
            if problem is None and not isinstance(value, dict):
                problem = "the arguments are not a JSON object"
            if problem is None:
                assert isinstance(value, dict)
                parsed = value
            else:
                parsed = {"_raw": raw}
                # What goes back to the API must parse: some servers re-read it for templates.
                raw = json.dumps(parsed, ensure_ascii=False)
        calls.append(_Call(call_id, name, parsed, raw, problem))
    return calls


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
    transcript = Transcript(out)
    ws = Workspace(workspace)
    api_key = os.environ.get(options.api_key_env) or None
    hidden = (options.api_key_env,) if options.api_key_env else ()
    tools = Tools(ws, list(cli), hidden_env=hidden)
    client = ChatClient(
        options.base_url,
        options.model,
        api_key=api_key,
        temperature=options.temperature,
        timeout=options.timeout,
        max_retries=options.max_retries,
    )

    def say(role: Literal["system", "user"], content: str, api: list[dict[str, Any]]) -> None:
        transcript.emit(Message(role=role, content=content, at=time.time_ns()))
        api.append({"role": role, "content": content})

    try:
        task_md = (ws.root / "TASK.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"chat agent: TASK.md is unreadable ({exc}); task.json stands in", file=sys.stderr)
        task_md = "# Task\n\nSee `task.json` in the workspace.\n"
    messages: list[dict[str, Any]] = []
    if options.system_message:
        say("system", task_md, messages)
    else:  # the Host recorded the system message already: the model still needs it
        messages.append({"role": "system", "content": task_md})
    say("user", f"{KICKOFF}\n\n{TOOLS_NOTE.format(turns=options.max_turns)}", messages)

    turns = tokens = idle = 0
    reminded_turns = reminded_tokens = False
    status = 0
    stop = "the loop ended"
    try:
        while not tools.finished:
            if turns >= options.max_turns:
                stop = f"the turn limit ({options.max_turns} model calls)"
                break
            if tokens >= options.max_tokens:
                stop = f"the token budget ({tokens} of {options.max_tokens} tokens spent)"
                break
            try:
                payload = client.complete(messages, CHAT_TOOLS)
            except ApiError as exc:
                print(f"chat agent: {client.redact(str(exc))}", file=sys.stderr, flush=True)
                status, stop = 3, "a model API failure"
                break
            turns += 1
            message = _choice_message(payload) or {}
            usage, spent = _usage(payload)
            if not spent:  # no usage from the server: a rough estimate keeps the budget bounded
                spent = (len(json.dumps(messages)) + len(json.dumps(message))) // 4
            tokens += spent
            content = _text(message.get("content"))
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            calls = _calls(message, turns)
            transcript.emit(
                Message(
                    role="assistant",
                    content=content,
                    reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
                    tool_calls=[
                        ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls
                    ],
                    usage=usage,
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
            messages.append(entry)
            if not calls:
                idle += 1
                if idle >= MAX_IDLE_REPLIES:
                    stop = f"{idle} replies in a row without a tool call"
                    break
                say(
                    "user",
                    "No tool was called. Continue with the tools; when you are done, call "
                    "`finish` with your best Submission ids, best first.",
                    messages,
                )
                continue
            idle = 0
            for call in calls:
                if tools.finished:
                    result = "skipped: the Run is already finished"
                elif call.problem is not None:
                    result = (
                        f"error: {call.problem}; nothing was done. Call {call.name or 'the tool'} "
                        "again with a JSON object of arguments."
                    )
                else:
                    result = tools.run(call.name, call.arguments)
                transcript.emit(
                    Message(
                        role="tool",
                        content=result,
                        tool_call_id=call.id,
                        name=call.name,
                        at=time.time_ns(),
                    )
                )
                messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
            if tools.finished:
                break
            left = options.max_turns - turns
            if 0 < left <= 2 and not reminded_turns:
                reminded_turns = True
                say("user", _reminder(f"{left} model turn(s) left"), messages)
            elif 0.9 * options.max_tokens <= tokens < options.max_tokens and not reminded_tokens:
                reminded_tokens = True
                say(
                    "user",
                    _reminder(f"{options.max_tokens - tokens} tokens of the budget left"),
                    messages,
                )
    except Exception:
        traceback.print_exc(file=sys.stderr)
        status, stop = 1, "an internal error"
    if not tools.finished:
        try:
            _fallback_finish(tools, transcript, stop)
        except Exception:
            traceback.print_exc(file=sys.stderr)
    return status


def _reminder(what: str) -> str:
    return (
        f"Reminder: {what}. Make sure your best program is submitted, then call `finish` with "
        "your best Submission ids, best first."
    )


def _fallback_finish(tools: Tools, transcript: Transcript, stop: str) -> None:
    """Finish with the best published Submissions, recorded as the agent's own tool calls."""
    ids = tools.best_published()
    if not ids:
        transcript.emit(
            Message(
                role="assistant",
                content=f"Stopped by {stop} without a finish, and no Submission was published: "
                "there is nothing to finish with.",
                at=time.time_ns(),
            )
        )
        return
    attempts = [ids] if len(ids) == 1 else [ids, ids[:1]]
    for number, candidates in enumerate(attempts, 1):
        call_id = f"call_fallback_{number}"
        arguments = {"candidates": candidates}
        transcript.emit(
            Message(
                role="assistant",
                content=f"Stopped by {stop} without a finish: finishing with the best published "
                f"Submission(s) {', '.join(map(str, candidates))}, best first.",
                tool_calls=[ToolCall(id=call_id, name="finish", arguments=arguments)],
                at=time.time_ns(),
            )
        )
        result = tools.run("finish", arguments)
        transcript.emit(
            Message(
                role="tool", content=result, tool_call_id=call_id, name="finish", at=time.time_ns()
            )
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
    try:
        cli = json.loads(os.environ.get(CLI_ENV) or '["evopolicy"]')
        if not isinstance(cli, list) or not cli or not all(isinstance(a, str) for a in cli):
            raise ValueError("not a non-empty list of strings")
    except ValueError as exc:
        print(f"chat agent: {CLI_ENV} is unusable ({exc}); using evopolicy", file=sys.stderr)
        cli = ["evopolicy"]
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
