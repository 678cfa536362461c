"""The layering rules of DESIGN §3 (``ALLOWED``: what each unit may import) and the
reader of a module's imports that checks them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "evopolicygym"
EXPORTERS = "evopolicygym_exporters"
BASELINES = "baselines"  # a family's baseline programs: submitted code, the Policy ABI only
ANY = "*"


# Leaves shared by layers that must not import each other (standard library only).
_LEAVES = {"hostdirs", "namespaces"}
_VALUES = {"policy", "values", "program", "seeds", "protocol", "transcript"}


ALLOWED: dict[str, set[str]] = {
    "policy": set(),
    "seeds": set(),
    "hostdirs": set(),
    "namespaces": set(),
    # The redactor: the agents redact what they record with it, the exporters what they export.
    "redaction": set(),
    # Serving an ASGI app on this machine (socket, uvicorn, the token gate): serve-env, view.
    "serving": set(),
    # The value leaves: the Policy ABI and each other where needed, never a layer above.
    "values": _VALUES,
    "program": _VALUES,
    "protocol": _VALUES,
    "transcript": _VALUES,
    # The authoring interface a family imports: values, seeds and the Policy ABI.
    "benchmark": {"values", "seeds", "policy"},
    # Entry-point discovery of Benchmarks.
    "registry": {"benchmark"},
    "evaluation": {"benchmark", "values", "program", "policy", "seeds", *_LEAVES},
    "records": {"values", "program", "transcript"},
    "agents": {"protocol", "transcript", "program", "redaction", *_LEAVES},
    "run": {
        "evaluation",
        "records",
        "protocol",
        "transcript",
        "benchmark",
        "program",
        "registry",
        "seeds",
        *_LEAVES,
    },
    "experiments": {"run", "records"},
    # What an edit was and which program it started from: one definition for the exports
    # and the analysis dataframes (Programs only).
    "program_edits": {"program"},
    # A Run's Submissions against their parents and each other: one fold for both readers.
    "lineage": {"program_edits", "records"},
    # The read API, plus the edit kinds and parents of the Programs they read from blobs.
    "analysis": {"records", "transcript", "program", "program_edits", "lineage"},
    "report": {"records", "transcript", "program", "program_edits", "analysis"},
    # The store viewer: what the report reads, the report's figures, and the serving leaf.
    "view": {
        "records",
        "transcript",
        "program",
        "program_edits",
        "lineage",
        "analysis",
        "report",
        "serving",
    },
    # A Run as a live environment: the Host (run) with the trainer's model as its Agent,
    # whose tools hold paths in the workspace as the chat agent's do (agents.chat_tools),
    # and the engine that measures the reward's reference scores (evaluation).
    "training": {
        "run",
        "records",
        "protocol",
        "transcript",
        "benchmark",
        "registry",
        "program",
        "evaluation",
        "agents",
        "seeds",
        "serving",
        *_LEAVES,
    },
    "cli": {ANY},
    KERNEL: {ANY},  # the package's own __init__: lazy re-exports by name
    # The reward function (rewards.py) loads a task's Benchmark by name and evaluates programs.
    EXPORTERS: {
        "records",
        "transcript",
        "program",
        "program_edits",
        "lineage",
        "evaluation",
        "registry",
        "redaction",
    },
    BASELINES: {"policy"},
}


FAMILY_ALLOWED = {"benchmark"}


def family_units() -> list[str]:
    return sorted(p.name for p in (ROOT / "benchmarks").glob("*/evopolicygym_*") if p.is_dir())


def is_family(unit: str) -> bool:
    return unit.startswith("evopolicygym_") and unit != EXPORTERS


def allowed(unit: str) -> set[str]:
    return FAMILY_ALLOWED if is_family(unit) else ALLOWED[unit]


def source_roots() -> dict[str, Path]:
    """Top-level import name -> its directory, for every distribution of the workspace."""
    roots = {KERNEL: ROOT / KERNEL, EXPORTERS: ROOT / "exporters" / EXPORTERS}
    for name in family_units():
        roots[name] = next((ROOT / "benchmarks").glob(f"*/{name}"))
    return roots


def unit_of(module: str) -> str | None:
    """The unit a module belongs to; None for anything outside the project."""
    parts = module.split(".")
    top = parts[0]
    if top == KERNEL:
        return parts[1] if len(parts) > 1 else KERNEL
    if top == EXPORTERS:
        return EXPORTERS
    if top.startswith("evopolicygym_"):
        return top
    return None


def _exists(module: str) -> bool:
    parts = module.split(".")
    root = source_roots().get(parts[0])
    if root is None:
        return False
    path = root.joinpath(*parts[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def imported(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, module) for every import in ``tree``; ``from X import y`` names ``X.y`` when
    that is a module of the project, else ``X``."""
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield node.lineno, sub if _exists(sub) else target


def violations(source: str, module: str, unit: str, is_package: bool = False) -> list[str]:
    """The imports of ``source`` (the module ``module`` of ``unit``) its row forbids."""
    found = []
    rules = allowed(unit)
    for line, target in imported(ast.parse(source), module, is_package):
        other = unit_of(target)
        if other is None or other == unit or ANY in rules or other in rules:
            continue
        found.append(f"{module}:{line} ({unit}) imports {target} ({other})")
    return found
