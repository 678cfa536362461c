"""The trainer tier's tests run from this directory in its own environment
(`uv run pytest` here: torch, TRL); the root suite, which reaches this directory through its
`testpaths` but has no torch, collects nothing here."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # This directory's own pyproject.toml makes it the rootdir when the tier runs.
    if config.rootpath != HERE:
        return True
    if find_spec("torch") is None:  # `pytest tests/trainer` with the root's environment
        raise pytest.UsageError(
            "tests/trainer runs in an environment of its own, with torch: "
            "uv run --project tests/trainer pytest tests/trainer"
        )
    return None
