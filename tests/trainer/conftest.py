"""The trainer tier's tests run from this directory in its own environment
(`uv run pytest` here: torch, TRL); the root suite, which reaches this directory through its
`testpaths` but has no torch, collects nothing here."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    # This directory's own pyproject.toml makes it the rootdir when the tier runs.
    if config.rootpath != HERE:
        return True
    return None
