"""The chat agent's tools: what the model can do in the workspace, and the session.

``Workspace`` keeps every path inside the workspace (reads anywhere in it, writes only
under ``program/`` and ``analysis/``); ``Tools`` runs the tools of ``transcript.CHAT_TOOLS``
(``list_files``, ``read_file``, ``write_file``, ``edit_file``, ``run_analysis`` and the
session's ``submit`` and ``finish``, through ``session_client``) and returns the text the
model gets back; ``Tools.best_published`` is what the agent finishes with when the model
did not.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from evopolicygym.agents.session_client import (
    Published,
    SessionClient,
    SessionResult,
    SessionUnavailable,
    rank_published,
)
from evopolicygym.agents.text import one_line
from evopolicygym.protocol import SESSION_ENV
from evopolicygym.transcript import ANALYSIS_TIMEOUT_S, CHAT_TOOLS, READ_CHARS

__all__ = ["ToolError", "Tools", "Workspace"]

ANALYSIS_FILE_LIMIT = 64 * 1024 * 1024  # RLIMIT_FSIZE of run_analysis (its output files too)
OUTPUT_CHARS = 8_000  # of run_analysis stdout and of its stderr, each (head and tail)
READ_BYTES = 16 * 1024 * 1024  # and reads no further into a file than this
RESULT_CHARS = 24_000  # any tool result, as the model sees it
LIST_ENTRIES = 300
WRITABLE = ("program", "analysis")
SKIPPED_DIRS = frozenset({"__pycache__", ".git"})


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


# --------------------------------------------------------------------------- the tools


@dataclass
class Tools:
    """The tools the model calls. Each returns the text the model gets back."""

    workspace: Workspace
    session: SessionClient
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
        except (ToolError, SessionUnavailable) as exc:
            return f"error: {exc}"
        except Exception as exc:  # a tool bug must not end the Run's only Agent
            traceback.print_exc(file=sys.stderr)
            return (
                f"error: the tool failed unexpectedly: {type(exc).__name__}: {one_line(str(exc))}"
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
        result = self.session.submit(str(directory), episodes.strip())
        reply = result.reply
        sid = reply.get("submission_id") if reply else None
        if reply is not None and isinstance(sid, int):
            self.replies[sid] = reply
        return _answer(result)

    def tool_finish(self, args: Mapping[str, Any]) -> str:
        ids = _ids(args.get("candidates"))
        result = self.session.finish(ids)
        if result.code == 0:
            self.finished = True
        return _answer(result) or "finished"

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
        maximize = benchmark.get("score_direction") != "minimize"
        limit = task.get("max_candidates")
        limit = limit if isinstance(limit, int) and limit >= 1 else 1
        return rank_published(published, maximize, limit)


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


def _answer(result: SessionResult) -> str:
    """A session command's result as the model gets it back."""
    if result.code == 0:
        return _compact(result.out)
    if result.code == 1:
        return f"rejected: {_compact(result.err)}"
    return f"error: the session command failed (exit {result.code}): {one_line(result.err)}"


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
        return f"\nwarning: {path.name} does not compile: {one_line(str(exc))}"
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
