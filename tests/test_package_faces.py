"""The package faces: every package ``__init__.py`` re-exports lazily, in one typed shape.

A face, the ``__init__.py`` of every package of the kernel at any depth (``evopolicygym``,
``evopolicygym.run``, ``evopolicygym.run.decider`` ...), of the exporters, and of any family
distribution that exports lazily, has this shape after its docstring::

    from __future__ import annotations

    import importlib

    _EXPORTS = {"Name": "package.module", ...}  # a submodule: {"sub": "package"}

    __all__ = sorted(_EXPORTS)

    <FUNCTIONS below>

and an ``__init__.pyi`` beside it, written from the table by ``uv run python -m
tests.support.faces``: one ``from module import Name as Name`` per entry, and
``__all__``. Importing a face imports nothing of the project (the root's promise to a
submitted policy, tests/test_policy_abi.py); an export loads its module on first use; type
checkers read the stub, so they see each export's real type, and a name the face lacks is
an error there, not ``Any``. A dunder constant (the root's ``__version__``) may stand before
the table, listed first in ``__all__`` (and declared ``__version__: str`` in the stub).
A face holds no code of its own: a package's table or function lives in a module named for
it (``agents/streams/formats.py`` holds ``PARSERS`` and ``parser_for``).

The benchmark families (``benchmarks/*/evopolicygym_<family>``) keep plain eager re-exports:
each is a separate distribution, loaded only through its entry points when one of its
Benchmarks is made, which imports its tasks and Gymnasium anyway, so a lazy face would save
nothing; and a family is what an outside author copies, without this test to write stubs.
A family that does export lazily takes the shape, so there is no third style.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.architecture import unit_of, violations
from tests.support.faces import (
    FUNCTIONS,
    HEADER,
    ROOT,
    WRITE,
    all_faces,
    faces,
    family_inits,
    is_lazy,
    read_face,
    read_stub,
    render_stub,
    stub_meaning,
)
from tests.support.requires import EXTRAS_ENV, require_group

# --------------------------------------------------------------------------- the shape


@pytest.mark.parametrize("package", sorted(faces()))
def test_the_face_has_the_shape(package: str) -> None:
    face = read_face(faces()[package].read_text(encoding="utf-8"))
    assert not face.problems, "\n".join(face.problems)
    assert face.table, "a face exports something"


@pytest.mark.parametrize("package", sorted(faces()))
def test_the_stub_is_the_table(package: str) -> None:
    init = faces()[package]
    face = read_face(init.read_text(encoding="utf-8"))
    path = init.with_suffix(".pyi")
    written = stub_meaning(path.read_text(encoding="utf-8")) if path.exists() else None
    assert written == (face.table, sorted(face.all), face.constants, []), (
        f"{path.relative_to(ROOT)} is not what _EXPORTS says: `{WRITE}` rewrites it"
    )


@pytest.mark.parametrize("package", sorted(faces()))
def test_no_export_shares_its_name_with_another_submodule(package: str) -> None:
    """Once ``package.name`` is imported as a module, the import system binds it on the
    package over the lazy export: an export ``name`` must be that submodule or none."""
    face = read_face(faces()[package].read_text(encoding="utf-8"))
    directory = faces()[package].parent
    # listed, not probed with exists(): that would match `PARSERS` to parsers.py on a
    # case-insensitive file system, where the import system still tells them apart
    submodules = {path.stem for path in directory.glob("*.py")}
    submodules |= {init.parent.name for init in directory.glob("*/__init__.py")}
    clashes = [
        name for name, module in face.table.items() if module != package and name in submodules
    ]
    assert not clashes, f"exports named like a submodule of {package}: {clashes}"


@pytest.mark.parametrize("package", sorted(faces()))
def test_the_table_keeps_the_layering(package: str) -> None:
    """The table's imports are dynamic: tests/test_architecture.py's rules hold them as
    if they were import statements of the package."""
    face = read_face(faces()[package].read_text(encoding="utf-8"))
    source = "".join(f"from {m} import {n}\n" for n, m in face.table.items())
    unit = unit_of(package)
    assert unit is not None
    assert violations(source, package, unit, is_package=True) == []


def test_every_package_init_is_a_face() -> None:
    """The one style: a new package of the kernel, at any depth, joins ``faces()`` through
    its glob, and a family that re-exports lazily takes the shape too (the families export
    eagerly today, see the module's docstring)."""
    nested = {"evopolicygym.run.decider", "evopolicygym.benchmark.gymnasium_adapter"}
    assert {"evopolicygym", "evopolicygym.run", "evopolicygym_exporters", *nested} <= set(faces())
    assert family_inits(), "no benchmark family found"
    for init in family_inits().values():
        if is_lazy(init.read_text(encoding="utf-8")):
            face = read_face(init.read_text(encoding="utf-8"))
            stub = init.with_suffix(".pyi")
            stub_table = (
                read_stub(stub.read_text(encoding="utf-8")).imports if stub.exists() else {}
            )
            assert face.problems == [], f"{init.relative_to(ROOT)}: {face.problems}"
            assert stub_table == face.table, f"{stub.relative_to(ROOT)}: `{WRITE}` rewrites it"


_FACE = '"""d"""\n' + "\n".join(HEADER) + "\n_EXPORTS = {'a': 'm'}\n"


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("", "no docstring"),
        ('"""d"""\nfrom typing import Any\n', "expected"),
        ('"""d"""\n' + "\n".join(HEADER) + "\nfrom x import y\n", "expected `_EXPORTS"),
        ('"""d"""\n' + "\n".join(HEADER) + "\n_EXPORTS = {'a': 'm', 'a': 'm'}\n", "twice"),
        (_FACE + "__all__ = ['a']\n" + FUNCTIONS, "expected `__all__ = sorted(_EXPORTS)`"),
        (_FACE + "__all__ = sorted(_EXPORTS)\ndef __getattr__(name): pass\n", "FUNCTIONS"),
        (_FACE + "__all__ = sorted(_EXPORTS)\n" + FUNCTIONS + "x = 1\n", "FUNCTIONS"),
    ],
)
def test_the_shape_check_can_fail(source: str, problem: str) -> None:
    problems = read_face(source).problems
    assert any(problem in p for p in problems), problems


def test_a_stub_is_read_as_written() -> None:
    face = read_face(_FACE.replace("{", "{'b': 'm', ") + "__all__ = sorted(_EXPORTS)\n" + FUNCTIONS)
    assert face.problems == []
    stub = read_stub(render_stub(face))
    assert (stub.imports, stub.all, stub.problems) == ({"a": "m", "b": "m"}, ["a", "b"], [])
    stub = read_stub("from m import a\nfrom n import b as b\nx = 1\n")
    assert stub.imports == {"a": "m", "b": "n"}
    assert len(stub.problems) == 2


# --------------------------------------------------------------------------- at run time

# Imports each face in turn, noting what it loads beside itself, then resolves every export
# (first through __getattr__, then as a bound attribute) against its module's own object.
_PROBE = """
import importlib, json, sys
faces = json.loads(sys.argv[1])
problems = []
absent = []  # exports whose module needs an extra that is not installed (the view's Starlette)
for package in faces:
    before = set(sys.modules)
    face = importlib.import_module(package)
    parents = {package.rsplit(".", i)[0] for i in range(package.count(".") + 1)}
    added = {m for m in set(sys.modules) - before - parents
             if m.partition(".")[0] not in sys.stdlib_module_names}
    if added:
        problems.append(f"importing {package} imports {sorted(added)}")
for package, (table, expected_all) in faces.items():
    face = sys.modules[package]
    if face.__all__ != expected_all:
        problems.append(f"{package}.__all__ is not {expected_all}")
    for name, module in table.items():
        try:
            if module == package:
                want = importlib.import_module(f"{package}.{name}")
            else:
                want = getattr(importlib.import_module(module), name)
            first, again = getattr(face, name), getattr(face, name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] in ("evopolicygym", "evopolicygym_exporters"):
                problems.append(f"{package}.{name} ({module}): {type(exc).__name__}: {exc}")
            else:
                absent.append(f"{package}.{name} needs {exc.name}")
            continue
        except Exception as exc:
            problems.append(f"{package}.{name} ({module}): {type(exc).__name__}: {exc}")
            continue
        if not (first is want and again is want):
            problems.append(f"{package}.{name} is not {module}.{name}")
        if name not in dir(face):
            problems.append(f"dir({package}) lacks {name}")
    try:
        face.no_such_name
    except AttributeError as exc:
        if str(exc) != f"module {package!r} has no attribute 'no_such_name'":
            problems.append(f"{package}: {exc}")
    else:
        problems.append(f"{package}.no_such_name resolved")
print(json.dumps({"problems": problems, "absent": absent}))
"""


def test_every_export_resolves_lazily_to_its_modules_object() -> None:
    tables = {p: (face.table, face.all) for p, face in all_faces().items()}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(tables)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["problems"] == [], "\n".join(found["problems"])
    if found["absent"] and os.environ.get(EXTRAS_ENV) == "1":
        pytest.fail(f"{EXTRAS_ENV}=1, yet: {'; '.join(found['absent'])}", pytrace=False)


# --------------------------------------------------------------------------- for mypy


VAGUE = ("Any", "builtins.object")  # __getattr__'s type, were the stub not read


def test_mypy_sees_the_real_type_of_every_export(tmp_path: Path) -> None:
    """``reveal_type`` of each export through its face is never ``Any``, and a name a face
    lacks is an error. Run from the root, so mypy reads the project's configuration (and
    shares ``uv run mypy``'s cache)."""
    require_group("lint", "mypy")
    lines = [
        "import evopolicygym",
        "from evopolicygym import Program",
        "from evopolicygym.records import open_store",
        "reveal_type(Program)",
        "reveal_type(open_store)",
    ]
    for i, (package, face) in enumerate(sorted(all_faces().items())):
        lines.append(f"import {package} as face{i}")
        lines += [f"reveal_type(face{i}.{name})  # {package}.{name}" for name in face.table]
    missing = len(lines) + 1
    lines += ["evopolicygym.no_such_name", "from evopolicygym.records import no_such_name"]
    snippet = tmp_path / "faces_snippet.py"
    snippet.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", str(snippet)],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
        cwd=ROOT,
    )
    found: dict[int, list[str]] = {}
    for line in done.stdout.splitlines():
        # by name: where the snippet is unchanged, mypy's cache replays its old path
        match = re.match(rf".*\b{re.escape(snippet.name)}:(\d+): (.*)", line)
        if match:
            found.setdefault(int(match[1]), []).append(match[2])
    assert found, done.stdout[-3000:] + done.stderr[-3000:]
    vague = []
    for number, text in enumerate(lines, 1):
        if text.startswith("reveal_type("):
            notes = [n for n in found.get(number, []) if n.startswith("note: Revealed type is")]
            if not notes or {f'note: Revealed type is "{t}"' for t in VAGUE} & set(notes):
                vague.append(f"{text}: {found.get(number)}")
    assert not vague, "\n".join(vague)
    errors = {n: t for n, t in found.items() if any(m.startswith("error:") for m in t)}
    assert sorted(errors) == [missing, missing + 1], errors
