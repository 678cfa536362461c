"""Finding a Gymnasium environment id, and what to tell the user when it cannot be made."""

from __future__ import annotations

import importlib
import re
from importlib.metadata import PackageNotFoundError, metadata
from typing import Any

import gymnasium

from evopolicygym.benchmark.contract import BenchmarkError

__all__ = ["dependency_hint", "lookup_spec"]


def dependency_hint(message: str) -> str:
    """Gymnasium's missing-dependency text with its pip advice replaced by this project's extra.

    Gymnasium says ``pip install "gymnasium[box2d]"``, which builds box2d-py with swig; the
    project's ``box2d`` extra installs the box2d wheel and pygame instead. Text naming no extra
    of this project is kept.
    """
    try:
        extras = set(metadata("evopolicygym").get_all("Provides-Extra") or [])
    except PackageNotFoundError:
        return message
    named = re.search(r"gymnasium\[(\w+)\]", message)
    if named and named.group(1).lower() in extras:
        missing = re.split(r",|\.| is not installed", message, maxsplit=1)[0].strip()
        extra = named.group(1).lower()
        return f"{missing} is not installed; install it with: uv sync --extra {extra}"
    return message


# Environment ids registered only when their package is imported (Gymnasium 1.x loads no
# plugins): id prefix -> (the module to name, the extra that installs it).
_REGISTERED_ON_IMPORT = {
    "ALE/": ("ale_py", "ale"),
    "MiniGrid-": ("minigrid", "minigrid"),
    "BabyAI-": ("minigrid", "minigrid"),
}


def _register_hint(env_id: str) -> str:
    """For an id whose package registers it on import: the id that imports it, and the extra."""
    for prefix, (module, extra) in _REGISTERED_ON_IMPORT.items():
        if env_id.startswith(prefix):
            return (
                f" {module} registers it when imported, so name it gymnasium:{module}:{env_id}"
                f" ({module} is installed by: uv sync --extra {extra})"
            )
    return ""


def lookup_spec(env_id: str) -> Any:
    """The registered EnvSpec; ``module:Env-v0`` imports ``module`` first, like gymnasium.make."""
    name = env_id
    if ":" in env_id:
        module, name = env_id.split(":", 1)
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise BenchmarkError(
                f"Gymnasium environment {env_id!r}: cannot import {module!r} ({exc})"
            ) from exc
    try:
        return gymnasium.spec(name)
    except gymnasium.error.Error as exc:
        raise BenchmarkError(
            f"unknown Gymnasium environment id {env_id!r}: {exc}{_register_hint(env_id)}"
        ) from exc
