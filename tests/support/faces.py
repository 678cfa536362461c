"""Reading and writing the package faces (see tests/test_package_faces.py for the shape).

``uv run python -m tests.support.faces`` writes each face's ``__init__.pyi`` from its
``_EXPORTS`` table.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITE = "uv run python -m tests.support.faces"

# What follows the table in every face, exactly (compared as syntax trees).
FUNCTIONS = """
def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value

def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
"""

HEADER = ["from __future__ import annotations", "import importlib"]

STUB_HEADER = """\
# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `{write}`; tests/test_package_faces.py checks it.
"""


def faces() -> dict[str, Path]:
    """Package -> its ``__init__.py``: every package of the kernel and of the exporters, at
    any depth (a subpackage such as ``evopolicygym.run.decider`` is a face too)."""
    found: dict[str, Path] = {}
    for root in (ROOT / "evopolicygym", ROOT / "exporters" / "evopolicygym_exporters"):
        for init in sorted(root.rglob("__init__.py")):
            parts = init.parent.relative_to(root.parent).parts
            found[".".join(parts)] = init
    return found


def family_inits() -> dict[str, Path]:
    inits = sorted((ROOT / "benchmarks").glob("*/evopolicygym_*/__init__.py"))
    return {init.parent.name: init for init in inits}


def is_lazy(source: str) -> bool:
    return bool(re.search(r"^(def __getattr__|_EXPORTS\b)", source, re.MULTILINE))


# --------------------------------------------------------------------------- reading


@dataclass
class Face:
    """What a face's ``__init__.py`` declares, and how it departs from the shape."""

    table: dict[str, str] = field(default_factory=dict)
    constants: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def all(self) -> list[str]:
        return [*self.constants, *sorted(self.table)]


def read_table(node: ast.stmt, face: Face) -> None:
    if not (
        isinstance(node, ast.Assign)
        and ast.unparse(node.targets) == "_EXPORTS"
        and isinstance(node.value, ast.Dict)
    ):
        face.problems.append(f"line {node.lineno}: expected `_EXPORTS = {{name: module}}`")
        return
    for key, value in zip(node.value.keys, node.value.values, strict=True):
        if not (
            isinstance(key, ast.Constant)
            and isinstance(key.value, str)
            and isinstance(value, ast.Constant)
            and isinstance(value.value, str)
        ):
            face.problems.append(f"line {node.lineno}: _EXPORTS maps str names to str modules")
            continue
        if key.value in face.table:
            face.problems.append(f"line {key.lineno}: {key.value!r} is in _EXPORTS twice")
        face.table[key.value] = value.value


def read_face(source: str) -> Face:
    """The face ``source`` declares; its ``problems`` name each departure from the shape."""
    face = Face()
    body = ast.parse(source).body
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)):
        face.problems.append("no docstring")
    else:
        body = body[1:]
    head = [ast.unparse(stmt) for stmt in body[: len(HEADER)]]
    if head != HEADER:
        face.problems.append(f"expected {HEADER} first, found {head}")
    rest = list(body[len(HEADER) :])
    while rest and re.fullmatch(r"__\w+__ = '[^']*'", ast.unparse(rest[0])):
        face.constants.append(ast.unparse(rest.pop(0)).split(" ")[0])
    if not rest:
        face.problems.append("no _EXPORTS")
        return face
    read_table(rest.pop(0), face)
    listed = ", ".join(f"{c!r}" for c in face.constants)
    expected = (
        f"__all__ = [{listed}, *sorted(_EXPORTS)]" if listed else "__all__ = sorted(_EXPORTS)"
    )
    if not rest or ast.unparse(rest.pop(0)) != expected:
        face.problems.append(f"expected `{expected}` after the table")
    if ast.dump(ast.Module(body=rest, type_ignores=[])) != ast.dump(ast.parse(FUNCTIONS)):
        face.problems.append("what follows __all__ is not FUNCTIONS exactly")
    return face


@dataclass
class Stub:
    """What a face's ``__init__.pyi`` declares."""

    imports: dict[str, str] = field(default_factory=dict)
    all: list[str] | None = None
    constants: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_stub(source: str) -> Stub:
    stub = Stub()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                if alias.asname != alias.name:
                    stub.problems.append(f"line {node.lineno}: {alias.name} as {alias.name}")
                stub.imports[alias.name] = node.module
        elif isinstance(node, ast.Assign) and ast.unparse(node.targets) == "__all__":
            stub.all = ast.literal_eval(node.value)
        elif isinstance(node, ast.AnnAssign) and re.fullmatch(r"__\w+__", ast.unparse(node.target)):
            stub.constants.append(ast.unparse(node.target))
        else:
            stub.problems.append(f"line {node.lineno}: not an import, __all__ or a dunder")
    return stub


def render_stub(face: Face) -> str:
    """The ``__init__.pyi`` of ``face`` (``write_stubs`` has ruff order and wrap it)."""
    pairs = sorted((module, name) for name, module in face.table.items())
    lines = [STUB_HEADER.format(write=WRITE)]
    lines += [f"from {m} import {n} as {n}" for m, n in pairs]
    lines += ["", *(f"{constant}: str" for constant in face.constants)]
    lines.append("__all__ = [" + "".join(f'\n    "{name}",' for name in face.all) + "\n]")
    return "\n".join(lines) + "\n"


def stub_meaning(stub_source: str) -> tuple[object, ...]:
    """What a stub says, whatever order ruff gives ``__all__``."""
    stub = read_stub(stub_source)
    return stub.imports, sorted(stub.all or []), stub.constants, stub.problems


def all_faces() -> dict[str, Face]:
    return {p: read_face(path.read_text(encoding="utf-8")) for p, path in faces().items()}


# --------------------------------------------------------------------------- the writer


def write_stubs() -> list[Path]:
    """Writes each face's ``__init__.pyi`` that differs from its ``_EXPORTS``, then lets
    ruff order and format them (the lint group); the paths it wrote."""
    inits = list(faces().values())
    inits += [p for p in family_inits().values() if is_lazy(p.read_text(encoding="utf-8"))]
    written = []
    for init in inits:
        face, stub = read_face(init.read_text(encoding="utf-8")), init.with_suffix(".pyi")
        text = render_stub(face)
        if not stub.exists() or stub_meaning(stub.read_text(encoding="utf-8")) != stub_meaning(
            text
        ):
            stub.write_text(text, encoding="utf-8")
            written.append(stub)
    if written:
        ruff = [sys.executable, "-m", "ruff"]
        subprocess.run(
            [*ruff, "check", "-q", "--fix", "--select", "I,RUF022", *written], check=True
        )
        subprocess.run([*ruff, "format", "-q", *written], check=True)
    return written


if __name__ == "__main__":
    for path in write_stubs():
        print(f"wrote {path.relative_to(ROOT)}")
