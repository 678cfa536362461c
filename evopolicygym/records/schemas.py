"""The JSON Schemas of the event payloads, checked in under ``schemas/events/<Type>.json``.

The files are generated from the code (``events.event_schema``) so that readers
in other languages know every payload's shape and version; ``check_schemas``
fails when the checked-in files and the code disagree.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from evopolicygym.records.events import EVENT_TYPES, event_schema

__all__ = ["SCHEMA_DIR", "check_schemas", "render_schemas", "write_schemas"]

SCHEMA_DIR = Path("schemas") / "events"
_MARKER = "x-schema-version"  # every generated file has it; a stale one may be removed


def render_schemas() -> dict[str, str]:
    """File name -> file text, for every event type (sorted keys, 2-space indent, final newline)."""
    return {
        f"{name}.json": json.dumps(event_schema(cls), indent=2, sort_keys=True, ensure_ascii=False)
        + "\n"
        for name, cls in sorted(EVENT_TYPES.items())
    }


def _generated(path: Path) -> bool:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(value, dict) and _MARKER in value


def write_schemas(directory: str | os.PathLike[str]) -> list[Path]:
    """Write every schema into ``directory`` and remove generated files of types that are gone.

    Returns the files written or changed (unchanged files are left alone).
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    expected = render_schemas()
    changed: list[Path] = []
    for name, text in expected.items():
        path = root / name
        try:
            if path.read_text(encoding="utf-8") == text:
                continue
        except OSError:
            pass
        tmp = path.with_name(f".{name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        changed.append(path)
    for path in sorted(root.glob("*.json")):
        if path.name not in expected and _generated(path):
            path.unlink()
            changed.append(path)
    return changed


def check_schemas(directory: str | os.PathLike[str]) -> list[str]:
    """One line per file that drifted from the code, is missing, or names no event type."""
    root = Path(directory)
    expected = render_schemas()
    problems: list[str] = []
    for name, text in expected.items():
        path = root / name
        try:
            found = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.append(f"{path}: missing")
            continue
        except OSError as exc:
            problems.append(f"{path}: unreadable ({exc.strerror or exc})")
            continue
        if found != text:
            problems.append(f"{path}: drifted from the code")
    if root.is_dir():
        for path in sorted(root.glob("*.json")):
            if path.name not in expected:
                problems.append(f"{path}: extra (no event type {path.stem!r})")
    return problems
