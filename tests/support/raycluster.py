"""A local Ray cluster of several nodes for the tests: a head that runs nothing (no CPUs) and
worker nodes, each standing for a machine of its own, that a test can kill.

Every worker node gets its own ``XDG_CACHE_HOME`` and ``TMPDIR`` (its raylet's environment,
which its workers and the Runs they carry inherit): a Run carried there keeps its Agent
workspace and its store cache in that node's directories, so one node never sees what
another left, as on separate machines, and a test can tell which node a Run is on. Killing a
node SIGKILLs its raylet and services (``Cluster.remove_node``); its workers, and the Hosts
they carry, die with them. The head checks its nodes' health every 0.5 s, so a dead one is
found in about 2 s rather than Ray's 15.

Processes are started by ``ray.cluster_utils.Cluster`` and stopped by ``shutdown`` (each by
the pid it started), never by name.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.rayutil import require_ray

__all__ = ["LocalCluster", "local_cluster", "wait_until"]

_HEALTH = {
    "health_check_period_ms": 500,
    "health_check_failure_threshold": 3,
    "health_check_initial_delay_ms": 0,
}


class LocalCluster:
    """A head and named worker nodes of ``cpus`` CPUs each; ``address`` joins it."""

    def __init__(self, root: Path, *, cpus: int = 1) -> None:
        # Before Ray is first imported (it reads this then): workers run this interpreter,
        # not `uv run` over an upload of the current directory (as local_ray says).
        os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
        require_ray()
        from ray.cluster_utils import Cluster

        self.root = root
        self.cpus = cpus
        self.nodes: dict[str, Any] = {}
        self._cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 0, "include_dashboard": False, "_system_config": _HEALTH},
        )
        self.address: str = self._cluster.address

    @property
    def session_dir(self) -> Path:
        """The cluster's session directory (its logs are under ``logs/``)."""
        return Path(self._cluster.head_node.get_session_dir_path())

    def machine(self, name: str) -> Path:
        """The directory standing for node ``name``'s disk (its cache and temporary files)."""
        return self.root / name

    def add(self, name: str) -> None:
        """Start worker node ``name`` and wait until the cluster has it."""
        home = self.machine(name)
        (home / "cache").mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(parents=True, exist_ok=True)
        env = {"XDG_CACHE_HOME": str(home / "cache"), "TMPDIR": str(home / "tmp")}
        self.nodes[name] = self._cluster.add_node(num_cpus=self.cpus, env_vars=env)
        self._cluster.wait_for_nodes()

    def kill(self, name: str) -> None:
        """SIGKILL node ``name``'s processes, as a machine that loses power."""
        self._cluster.remove_node(self.nodes.pop(name), allow_graceful=False)

    def runs_on(self, name: str) -> set[str]:
        """The Runs whose Agent workspace a Host on node ``name`` has prepared and not yet
        removed (the note each Host keeps in its store cache: ``runs/<id>.workspace``)."""
        stores = self.machine(name) / "cache" / "evopolicygym" / "stores"
        return {note.name.removesuffix(".workspace") for note in stores.glob("*/runs/*.workspace")}

    def shutdown(self) -> None:
        self._cluster.shutdown()


def local_cluster(root: Path, workers: int = 2) -> Iterator[LocalCluster]:
    """For a fixture: a cluster with ``workers`` nodes named ``node-1``, ``node-2``…, shut
    down afterwards. Environment variables a test process set for Ray are left alone."""
    cluster = LocalCluster(root)
    try:
        for number in range(1, workers + 1):
            cluster.add(f"node-{number}")
        yield cluster
    finally:
        cluster.shutdown()


def wait_until(condition: Any, timeout: float, what: str, interval: float = 0.1) -> None:
    """Poll ``condition()`` until it is true; fail naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(interval)
