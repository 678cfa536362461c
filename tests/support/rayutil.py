"""Ray for the tests: skip where it is not installed, fail instead under EVOPOLICY_REQUIRE_RAY=1.

Ray is the ``ray`` extra (``uv sync --extra ray``). Tests that need a cluster start one of
their own (``local_ray``: a local instance without a dashboard, shut down afterwards) and
share it per module, since starting one takes seconds. CI sets EVOPOLICY_REQUIRE_RAY=1, so
a Ray tier that silently skipped there would fail instead.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from typing import Any

from tests.support.requires import missing

REQUIRE_ENV = "EVOPOLICY_REQUIRE_RAY"


def require_ray() -> None:
    """Skip (or, with EVOPOLICY_REQUIRE_RAY=1, fail) when Ray is not importable."""
    if importlib.util.find_spec("ray") is None:
        missing("needs the ray extra (ray is missing)", "uv sync --extra ray", env=REQUIRE_ENV)


@contextlib.contextmanager
def local_ray(num_cpus: int = 2, **options: Any) -> Iterator[Any]:
    """A local Ray instance of ``num_cpus`` CPUs for the duration (no dashboard; its workers'
    output kept off the test's), shut down afterwards; yields the ``ray`` module."""
    # As the Ray executor does (evaluation.ray_executor.import_ray): workers run this
    # interpreter, not `uv run` over an upload of the current directory.
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    require_ray()
    import ray

    if ray.is_initialized():  # another module's left over: start from a known cluster
        ray.shutdown()
    ray.init(
        address="local",  # a new instance, never one another process started on this machine
        num_cpus=num_cpus,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        **options,
    )
    try:
        yield ray
    finally:
        ray.shutdown()
