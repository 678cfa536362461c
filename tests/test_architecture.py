"""The import rules and the code shape of DESIGN §3, checked over every module of every
distribution.

Each module belongs to a unit: a kernel module or package (``evopolicygym.<unit>``),
the exporters distribution, a benchmark family, or a family's baseline programs. A
unit may import only the units its row of ``ALLOWED`` (in tests/support/architecture.py)
names. Every import statement counts, function-local and ``TYPE_CHECKING`` ones too, so a
layering break cannot hide inside a function body.

The shape: no private name (``_x``) is taken from another module of the project, no
module is over 800 lines and no function body over 100 (a signature's lines, such as a
click command's options, do not count: they are declarations, not logic).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.architecture import (
    ALLOWED,
    BASELINES,
    EXPORTERS,
    family_units,
    is_family,
    source_roots,
    unit_of,
    violations,
)

# --------------------------------------------------------------------------- modules


def module_name(path: Path, top: str, root: Path) -> str:
    parts = [top, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> Iterator[tuple[Path, str, str, bool]]:
    """(path, module, unit, is_package) for every module of the project."""
    for top, root in source_roots().items():
        for path in sorted(root.rglob("*.py")):
            module = module_name(path, top, root)
            unit = unit_of(module)
            assert unit is not None
            if BASELINES in path.relative_to(root).parts:
                unit = BASELINES
            yield path, module, unit, path.name == "__init__.py"


# --------------------------------------------------------------------------- the rules


def test_every_import_follows_the_rules() -> None:
    problems: list[str] = []
    for path, module, unit, is_package in project_modules():
        problems += violations(path.read_text(encoding="utf-8"), module, unit, is_package)
    assert not problems, "\n".join(problems)


def test_every_unit_has_a_row() -> None:
    """A new package or leaf must be given its place in the table (and in DESIGN §3)."""
    units = {unit for _, _, unit, _ in project_modules()}
    missing = {u for u in units if not is_family(u) and u not in ALLOWED}
    assert not missing, f"units without a row in ALLOWED: {sorted(missing)}"
    assert family_units(), "no benchmark family found under benchmarks/"


def test_the_classic_family_and_the_exporters_are_units() -> None:
    units = {unit for _, _, unit, _ in project_modules()}
    assert {"evopolicygym_classic", EXPORTERS, "agents", "run", "records", BASELINES} <= units


# --------------------------------------------------------------------------- the check can fail


@pytest.mark.parametrize(
    ("source", "module", "unit"),
    [
        # agents never import run, not even inside a function
        ("def f():\n    from evopolicygym.run import RunHost\n", "evopolicygym.agents.x", "agents"),
        ("import evopolicygym.records.events\n", "evopolicygym.agents.x", "agents"),
        # records never import run
        ("from evopolicygym.run.decider import fold\n", "evopolicygym.records.x", "records"),
        # a relative import is resolved to its unit
        ("from ..run import decider\n", "evopolicygym.records.x", "records"),
        # exporters read records, never agents or run
        ("from evopolicygym.agents.chat import run_agent\n", "evopolicygym_exporters.x", EXPORTERS),
        # a family imports the authoring interface only
        (
            "from evopolicygym.values import encode_value\n",
            "evopolicygym_box2d.x",
            "evopolicygym_box2d",
        ),
        (
            "from evopolicygym_exporters import export\n",
            "evopolicygym_classic.x",
            "evopolicygym_classic",
        ),
        # baseline programs are submitted code: the Policy ABI only
        ("import evopolicygym.benchmark\n", "policy", BASELINES),
        # the kernel never imports a concrete exporter or family, but through entry points
        ("from evopolicygym_classic import cartpole\n", "evopolicygym.run.x", "run"),
        (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from evopolicygym.cli import main\n",
            "evopolicygym.run.x",
            "run",
        ),
    ],
)
def test_a_forbidden_import_is_found(source: str, module: str, unit: str) -> None:
    assert violations(source, module, unit), source


@pytest.mark.parametrize(
    ("source", "module", "unit"),
    [
        ("from evopolicygym.protocol import parse_selector\n", "evopolicygym.agents.x", "agents"),
        ("from evopolicygym import transcript\n", "evopolicygym.records.x", "records"),
        (
            "from evopolicygym.benchmark import GymnasiumBenchmark\n",
            "evopolicygym_classic.x",
            "evopolicygym_classic",
        ),
        ("from . import sibling\nimport numpy\n", "evopolicygym.run.x", "run"),
        ("from evopolicygym.run import RunHost\n", "evopolicygym.cli.x", "cli"),
    ],
)
def test_an_allowed_import_passes(source: str, module: str, unit: str) -> None:
    assert violations(source, module, unit) == []


# --------------------------------------------------------------------------- code shape

MAX_MODULE_LINES = 800
MAX_BODY_LINES = 100


def private_imports(source: str, module: str, is_package: bool = False) -> list[str]:
    """Private names (``_x``, not dunders) this module takes from another module of the project:
    ``from m import _x``, or ``m._x`` where ``m`` was bound by an import."""
    tree = ast.parse(source)
    found = []
    bound: set[str] = set()  # local names that stand for an imported project module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(f"{module}:{node.lineno} imports {alias.name}")
                elif node.level or unit_of(node.module or "") is not None:
                    bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if unit_of(alias.name) is not None:
                    bound.add(alias.asname or alias.name.partition(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and _is_private(node.attr)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
        ):
            found.append(f"{module}:{node.lineno} uses {node.value.id}.{node.attr}")
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def long_bodies(source: str, module: str) -> list[str]:
    """Functions whose body (first statement to last line, signature and decorators aside)
    is longer than MAX_BODY_LINES."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.body[0].lineno + 1
            if length > MAX_BODY_LINES:
                found.append(f"{module}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_private_name_crosses_a_module() -> None:
    problems: list[str] = []
    for path, module, unit, is_package in project_modules():
        if unit != BASELINES:
            problems += private_imports(path.read_text(encoding="utf-8"), module, is_package)
    assert not problems, "\n".join(problems)


def test_no_module_is_over_800_lines() -> None:
    long = [
        f"{module}: {n} lines"
        for path, module, _, _ in project_modules()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, "\n".join(long)


def test_no_function_body_is_over_100_lines() -> None:
    problems: list[str] = []
    for path, module, _, _ in project_modules():
        problems += long_bodies(path.read_text(encoding="utf-8"), module)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "source",
    [
        "from evopolicygym.evaluation.engine import _pinned\n",
        "from .blobs import _encode as encode\n",
        "from evopolicygym.evaluation import engine\nengine._read_only(1)\n",
        "import evopolicygym.records.blobs as blobs\nblobs._sha256(b'')\n",
    ],
)
def test_a_private_import_is_found(source: str) -> None:
    assert private_imports(source, "evopolicygym.run.x")


@pytest.mark.parametrize(
    "source",
    [
        "from evopolicygym.records import open_store\n",
        "from __future__ import annotations\n",
        "import os\nos._exit(0)\n",  # the standard library is not the project's
        "class A:\n    def f(self):\n        return self._x\n",
    ],
)
def test_a_public_import_passes(source: str) -> None:
    assert not private_imports(source, "evopolicygym.run.x")


def test_a_long_body_is_found_and_a_long_signature_is_not() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_BODY_LINES))
    params = "    a: int,\n" * 50
    assert not long_bodies(f"def f(\n{params}) -> None:\n{body}", "m")
    assert long_bodies(f"def f() -> None:\n{body}    return None\n", "m") == ["m:1 f: 101 lines"]
