"""The test tree itself: the README's ``uv run pytest`` must collect on the default install.

No module under ``tests/`` imports, at import time, a package the default install does not
bring (an extra, a dependency group other than ``test``): such an import would stop the
whole run at collection where the package is missing. Imports inside functions, and under
``if TYPE_CHECKING:``, are what the tests do instead, after a ``requires`` call that skips
with the command installing it.

What the default install brings is read from the installed metadata: the closure of the
``evopolicygym`` distribution's requirements without extras, plus the ``test`` group of
``pyproject.toml``. So the check means the same wherever it runs, with every extra installed
(CI) or none.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.faces import is_lazy, read_face

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _closure(names: list[str]) -> set[str]:
    """Canonical names of ``names`` and everything they require without extras."""
    seen: set[str] = set()
    todo = [canonicalize_name(n) for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # not installed: nothing below it can be imported either
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonicalize_name(requirement.name))
    return seen


@cache
def default_modules() -> frozenset[str]:
    """Top-level import names the default install provides (beside the standard library)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)
    groups = project["dependency-groups"]
    test_group = [Requirement(text).name for text in groups["test"] if isinstance(text, str)]
    distributions = _closure(["evopolicygym", *test_group])
    # The workspace's own distributions are editable installs, which packages_distributions
    # does not map: their import names are their names.
    modules = {d.replace("-", "_") for d in distributions if d.startswith("evopolicygym")}
    modules |= {"_pytest", "py"}  # pytest's own
    for module, owners in metadata.packages_distributions().items():
        if any(canonicalize_name(owner) in distributions for owner in owners):
            modules.add(module)
    return frozenset(modules)


def _module_level_imports(tree: ast.Module, package: str = "") -> list[tuple[int, str]]:
    """(line, dotted module) of every import that runs when the module is imported:
    module-level statements and the bodies of module-level if/try/with, but not functions,
    classes' methods, ``if TYPE_CHECKING:``, a ``try`` that catches ImportError, or what
    follows a module-level ``require...(...)`` call (it has skipped the module where the
    package is missing). ``from a import b`` gives ``a.b`` (b may be a submodule); relative
    imports are resolved against ``package``."""
    found: list[tuple[int, str]] = []

    def walk(body: list[ast.stmt]) -> bool:
        """False once a require call guards the rest of the module."""
        for node in body:
            if _is_require(node):
                return False
            if isinstance(node, ast.Import):
                found.extend((node.lineno, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{parent}.{base}" if base else parent
                found.extend((node.lineno, f"{base}.{alias.name}") for alias in node.names)
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
                if not any(
                    "ImportError" in ast.unparse(h.type or ast.Name("")) for h in node.handlers
                ):
                    walk(node.body)
                walk(node.orelse)
                walk(node.finalbody)
            elif isinstance(node, ast.With | ast.ClassDef):
                walk(node.body)
        return True

    walk(tree.body)
    return found


def _is_require(node: ast.stmt) -> bool:
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return False
    name = ast.unparse(node.value.func).rsplit(".", 1)[-1]
    return name.startswith("require")


def _test_modules() -> list[Path]:
    """Every module pytest may import: test files, conftest and the helpers in support/."""
    return sorted([*TESTS.glob("*.py"), *TESTS.glob("support/*.py")])


def _source(dotted: str) -> tuple[Path, str] | None:
    """The file of a first-party module this check follows (the default install's own
    distributions and the test helpers), and its package; None for anything else."""
    top, _, rest = dotted.partition(".")
    roots = {
        "evopolicygym": ROOT / "evopolicygym",
        "evopolicygym_exporters": ROOT / "exporters" / top,
    }
    roots["evopolicygym_classic"] = ROOT / "benchmarks" / "classic" / "evopolicygym_classic"
    roots["tests"] = TESTS  # the test modules and tests.support, first-party too
    if top not in roots:
        return None
    base = roots[top].joinpath(*rest.split(".")) if rest else roots[top]
    if (base / "__init__.py").exists():
        return base / "__init__.py", dotted
    if base.with_suffix(".py").exists():
        return base.with_suffix(".py"), dotted.rpartition(".")[0]
    return None


@cache
def _imports_of(file: Path, package: str) -> list[tuple[int, str]]:
    return _module_level_imports(
        ast.parse(file.read_text(encoding="utf-8"), filename=str(file)), package
    )


@cache
def _exports_of(file: Path) -> dict[str, str]:
    """A lazy face's ``_EXPORTS`` (name -> defining module); {} for any other module."""
    source = file.read_text(encoding="utf-8")
    return read_face(source).table if file.name == "__init__.py" and is_lazy(source) else {}


def _exported(dotted: str) -> str | None:
    """``module.name`` for ``package.name`` that a lazy face exports from ``module``: importing
    the name runs that module, though the face's own file imports nothing."""
    package, _, name = dotted.rpartition(".")
    found = _source(package) if package else None
    module = _exports_of(found[0]).get(name) if found else None
    return f"{module}.{name}" if module and module != package else None


def optional_imports(path: Path, package: str = "") -> list[str]:
    """Each optional package importing ``path`` imports, as ``line: name (through ...)``,
    following the first-party modules it imports (and their packages) at import time, and
    from a lazy face the module that defines each name imported through it."""
    allowed = default_modules() | set(sys.stdlib_module_names) | {"__future__", "tests"}
    seen: set[Path] = set()
    wrong: list[str] = []

    def visit(file: Path, pkg: str, line: int | None, through: tuple[str, ...]) -> None:
        if file in seen:
            return
        seen.add(file)
        for at, dotted in _imports_of(file, pkg):
            follow(dotted, at if line is None else line, through)

    def follow(dotted: str, shown: int, through: tuple[str, ...]) -> None:
        parts = dotted.split(".")
        # The module itself and every package above it run when it is imported.
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            found = _source(name)
            if found is not None:
                visit(*found, shown, (*through, name))
            elif depth == 1 and name not in allowed:
                chain = f" (through {' > '.join(through)})" if through else ""
                wrong.append(f"{shown}: {name}{chain}")
            elif (defined := _exported(name)) is not None:
                follow(defined, shown, (*through, name))

    visit(path, package, None, ())
    return sorted(set(wrong))


def test_no_test_module_imports_an_optional_package_at_import_time() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{found}"
        for path in _test_modules()
        for found in optional_imports(path)
    ]
    assert not wrong, (
        "optional packages imported at import time (import them inside the test, after "
        "a `requires` call that skips with the command installing them):\n  " + "\n  ".join(wrong)
    )


def test_the_check_knows_the_default_install_from_an_optional_package() -> None:
    """The check can fail: the runtime and test packages are in, the extras' and groups' out."""
    modules = default_modules()
    assert {"evopolicygym", "evopolicygym_exporters", "evopolicygym_classic"} <= modules
    assert {"msgspec", "numpy", "gymnasium", "datasets", "pytest", "hypothesis"} <= modules
    optional = {"psycopg", "ray", "playwright", "trl", "transformers", "mujoco", "minigrid", "mypy"}
    assert not optional & modules
    tree = ast.parse(
        "import os\nimport ray\nif TYPE_CHECKING:\n    import psycopg\n"
        "try:\n    from trl import x\nexcept AttributeError:\n    pass\n"
        "try:\n    import mujoco\nexcept ImportError:\n    mujoco = None\n"
        "def f():\n    import mujoco\n"
        "require_extra('box2d')\nimport Box2D\n"
    )
    assert _module_level_imports(tree) == [(1, "os"), (2, "ray"), (6, "trl.x")]


def test_the_check_follows_the_projects_own_modules(tmp_path: Path) -> None:
    """A test importing a store module that imports psycopg imports psycopg."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import pytest\nfrom evopolicygym.records.postgres import PostgresEventStore\n"
    )
    assert optional_imports(probe) == ["2: psycopg (through evopolicygym.records.postgres)"]
    guarded = tmp_path / "test_guarded.py"
    guarded.write_text(
        "import pytest\nfrom tests.support import pg\npg.require_postgres()\n"
        "import evopolicygym.records.postgres\n"
    )
    assert optional_imports(guarded) == []


def test_the_check_follows_a_face_to_where_a_name_is_defined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lazy face's file imports nothing, so the check reads its ``_EXPORTS``: importing
    a name through a face (or two: ``evopolicygym.run`` names the decider's face) runs the
    module that defines it."""
    chain = ["evopolicygym.run.decide"]
    while (defined := _exported(chain[-1])) is not None:
        chain.append(defined)
    assert chain[-1] == "evopolicygym.run.decider.decision.decide", chain
    assert _exported("evopolicygym.run.decider") is None  # a submodule is followed as one
    # Were the records face to export the Postgres store, a test importing it through the
    # face would import psycopg.
    records = ROOT / "evopolicygym" / "records" / "__init__.py"
    table = {**_exports_of(records), "PostgresEventStore": "evopolicygym.records.postgres"}
    real = _exports_of
    monkeypatch.setitem(globals(), "_exports_of", lambda f: table if f == records else real(f))
    probe = tmp_path / "test_probe.py"
    probe.write_text("import pytest\nfrom evopolicygym.records import PostgresEventStore\n")
    assert optional_imports(probe) == [
        "2: psycopg (through evopolicygym.records.PostgresEventStore > "
        "evopolicygym.records.postgres)"
    ]


def test_no_module_of_tests_imports_a_test_file() -> None:
    """Shared helpers live in tests/support/: no module of tests/ imports a test file."""
    found = []
    paths = [*_test_modules(), *TESTS.glob("perf/*.py")]
    for path in paths:
        found += [
            f"{path.relative_to(ROOT)}: {name}" for name in _test_file_imports(path.read_text())
        ]
    assert not found, "\n".join(found)


def _test_file_imports(source: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return [n for n in names if re.fullmatch(r"(tests\.)?(test_\w+|conftest)", n)]


def test_an_import_of_a_test_file_is_found() -> None:
    assert _test_file_imports("from tests.test_decider import x\nimport test_run\n") == [
        "tests.test_decider",
        "test_run",
    ]
    assert _test_file_imports("from tests import conftest\n") == ["tests.conftest"]
    assert _test_file_imports("from tests.support.pg import x\n") == []
