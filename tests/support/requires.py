"""What a test needs beyond the default install, and what it does when that is missing.

The README's ``uv run pytest`` runs on a fresh clone with the default install: a test that
needs an extra (a family, PostgreSQL's driver, Ray), a dependency group (TRL interop, the
browser driver), a service or a program (an agent CLI, chromium, tmux) skips, and its reason
is the command that installs what is missing. Where the matching ``EVOPOLICY_REQUIRE_*``
variable is ``1`` (CI's extras and services tier) it fails instead, so nothing skips there
unseen. No test module imports an optional package at import time
(``tests/test_test_tree.py`` checks it): it calls one of these first, then imports.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

__all__ = [
    "CLIS_ENV",
    "EXTRAS_ENV",
    "missing",
    "require_extra",
    "require_group",
    "require_program",
]

EXTRAS_ENV = "EVOPOLICY_REQUIRE_EXTRAS"  # every extra, dependency group and program below
CLIS_ENV = "EVOPOLICY_REQUIRE_CLIS"  # the released agent CLIs (.ci/agent-clis)


def missing(reason: str, install: str, *, env: str = EXTRAS_ENV) -> None:
    """Skip the calling test (or module, at import time) because of ``reason``, saying
    ``install``; fail instead where ``env`` is ``1``."""
    if os.environ.get(env) == "1":
        pytest.fail(f"{reason}, but {env}=1 requires it", pytrace=False)
    pytest.skip(f"{reason}: {install}", allow_module_level=True)


def _absent(modules: tuple[str, ...]) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def require_extra(extra: str, *modules: str) -> None:
    """The root project's extra ``extra``, checked by importing ``modules`` (default: the
    family distribution ``evopolicygym_<extra>``)."""
    absent = _absent(modules or (f"evopolicygym_{extra}",))
    if absent:
        missing(
            f"needs the {extra} extra ({', '.join(absent)} missing)", f"uv sync --extra {extra}"
        )


def require_group(group: str, *modules: str) -> None:
    """The development dependency group ``group`` (not in the default ``dev`` group)."""
    absent = _absent(modules)
    if absent:
        missing(
            f"needs the {group} dependency group ({', '.join(absent)} missing)",
            f"uv sync --group {group}",
        )


def require_program(name: str, install: str, *, env: str = EXTRAS_ENV) -> str:
    """The path of the program ``name`` on PATH."""
    found = shutil.which(name)
    if found is None:
        missing(f"needs {name} on PATH", install, env=env)
    assert found is not None
    return found
