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
import sys
import tomllib
from functools import cache
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

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


def _module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, top-level module) of every import that runs when the module is imported:
    module-level statements and the bodies of module-level if/try/with, but not functions,
    classes' methods, ``if TYPE_CHECKING:``, or what follows a module-level ``require...(...)``
    call (it has skipped the module where the package is missing)."""
    found: list[tuple[int, str]] = []

    def walk(body: list[ast.stmt]) -> bool:
        """False once a require call guards the rest of the module."""
        for node in body:
            if _is_require(node):
                return False
            if isinstance(node, ast.Import):
                found.extend((node.lineno, alias.name.split(".")[0]) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.lineno, node.module.split(".")[0]))
            elif isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    walk(node.body)
                walk(node.orelse)
            elif isinstance(node, ast.Try):
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
    """Every module pytest may import: test files, conftest and the helpers beside them."""
    return sorted(p for p in TESTS.glob("*.py"))


def test_no_test_module_imports_an_optional_package_at_import_time() -> None:
    local = {p.stem for p in _test_modules()} | {"tests"}
    allowed = default_modules() | set(sys.stdlib_module_names) | local | {"__future__"}
    wrong = []
    for path in _test_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for line, module in _module_level_imports(tree):
            if module not in allowed:
                wrong.append(f"tests/{path.name}:{line} imports {module}")
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
        "try:\n    from trl import x\nexcept ImportError:\n    pass\n"
        "def f():\n    import mujoco\n"
        "require_extra('box2d')\nimport Box2D\n"
    )
    assert _module_level_imports(tree) == [(1, "os"), (2, "ray"), (6, "trl")]
