"""The workspace as the trainer's model reads and writes it, through the environment's tools.

Paths are relative to the Agent workspace as the CLI agents see it (``TASK.md``,
``program/``, ``feedback/``, ``analysis/``) and are held inside it the way the chat agent's
are (``agents.chat_tools.Workspace``: no absolute paths, no ``..``, no symlink out; writes
under ``program/`` and ``analysis/`` only). What a call cannot do is a ``ToolError`` whose
message the model reads.
"""

from __future__ import annotations

import os
from pathlib import Path

from evopolicygym.agents.chat_tools import ToolError, Workspace
from evopolicygym.program import MAX_FILE_BYTES, MAX_FILES, MAX_TOTAL_BYTES
from evopolicygym.protocol import CLI_SHIM

__all__ = ["READ_CHARS", "list_files", "read_file", "write_file"]

READ_CHARS = 20_000  # of a file, per read_file answer
LIST_ENTRIES = 300
_SKIPPED = frozenset({"__pycache__", ".git"})


def list_files(workspace: Workspace) -> str:
    root = workspace.root
    lines: list[str] = []
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.startswith("."))
        for name in sorted(files):
            path = Path(directory, name)
            rel = path.relative_to(root).as_posix()
            if name.startswith(".") or rel == CLI_SHIM:  # the Host's, not the model's
                continue
            if len(lines) == LIST_ENTRIES:
                lines.append(f"[... more files left out; at most {LIST_ENTRIES} are listed]")
                return "\n".join(lines)
            try:
                size = path.lstat().st_size
            except OSError:
                continue
            lines.append(f"{rel}  ({size} bytes)")
    return "\n".join(lines) if lines else "(the workspace is empty)"


def read_file(workspace: Workspace, path: str) -> str:
    real = workspace.resolve(path)
    if not real.is_file():
        raise ToolError(f"{path}: no such file")
    with real.open("rb") as handle:
        data = handle.read(READ_CHARS * 4 + 4)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        try:  # a multi-byte character cut at the read's end
            text = data[:-3].decode("utf-8") if len(data) > READ_CHARS * 4 else ""
        except UnicodeDecodeError:
            text = ""
        if not text:
            raise ToolError(f"{path}: not UTF-8 text") from None
    size = real.stat().st_size
    if len(text) > READ_CHARS or size > len(data):
        return f"{text[:READ_CHARS]}\n[... cut: the file has {size} bytes]"
    return text


def write_file(workspace: Workspace, path: str, content: str) -> str:
    if not isinstance(content, str):
        raise ToolError("content must be a string")
    data = content.encode("utf-8", "surrogatepass")
    real = workspace.resolve(path, write=True)
    if real.is_dir():
        raise ToolError(f"{path}: is a directory")
    if len(data) > MAX_FILE_BYTES:
        raise ToolError(f"{path}: {len(data)} bytes is over a program file's {MAX_FILE_BYTES}")
    top = workspace.root / real.relative_to(workspace.root).parts[0]
    files, total = _footprint(top, leaving=real)
    if files + 1 > MAX_FILES or total + len(data) > MAX_TOTAL_BYTES:
        raise ToolError(
            f"{path}: refused; a program holds at most {MAX_FILES} files and "
            f"{MAX_TOTAL_BYTES} bytes (now {files} files, {total} bytes besides this one)"
        )
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_bytes(data)
    return f"wrote {len(data)} bytes to {path}"


def _footprint(top: Path, *, leaving: Path) -> tuple[int, int]:
    """Files and bytes under ``top``, not counting ``leaving`` (the file being replaced)."""
    files = total = 0
    for directory, _dirs, names in os.walk(top):
        for name in names:
            path = Path(directory, name)
            if path == leaving:
                continue
            try:
                total += path.lstat().st_size
            except OSError:
                continue
            files += 1
    return files, total
