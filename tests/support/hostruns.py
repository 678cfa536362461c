"""Runs the Host drives with a command Agent scripted in Python: a small RunConfig, the
Agent's script, creating a Run, driving it to its end and picking its events by type.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

from evopolicygym.agents.launcher import ProviderLauncher
from evopolicygym.agents.providers import agent_identity
from evopolicygym.records.events import Event
from evopolicygym.records.location import Store
from evopolicygym.run.config import AssessmentConfig, RunConfig, ValidationConfig
from evopolicygym.run.create import create_run
from evopolicygym.run.host import RunHost
from evopolicygym.run.ledger import load_run

SMALL = RunConfig(
    episode_budget=12,
    validation=ValidationConfig(episodes_per_candidate=3, max_candidates=2),
    assessment=AssessmentConfig(episodes=3),
    agent_timeout=120.0,
)


def agent_script(tmp_path: Path, body: str, name: str = "agent.py") -> str:
    """A command Agent written in Python: ``cli(*args)`` runs `evopolicy` and returns
    (exit code, stdout JSON or None, stderr JSON or text)."""
    prelude = textwrap.dedent(
        """
        import json, os, subprocess, sys
        CLI = json.loads(os.environ["EVOPOLICY_CLI"])
        LOG = open(os.path.join(os.environ["EVOPOLICY_WORKSPACE"], "analysis", "log.jsonl"), "a")

        def cli(*args):
            done = subprocess.run([*CLI, "session", *args], capture_output=True, text=True)
            def parse(text):
                try:
                    return json.loads(text)
                except ValueError:
                    return text.strip()
            result = (done.returncode, parse(done.stdout), parse(done.stderr))
            LOG.write(json.dumps([list(args), result]) + "\\n")
            LOG.flush()
            return result
        """
    )
    path = tmp_path / name
    path.write_text(prelude + textwrap.dedent(body))
    return f"{sys.executable} {path}"


def drive(store: Store, run_id: str, workspace: Path | None = None) -> tuple[Any, list[Event]]:
    RunHost(store, run_id, launcher=ProviderLauncher(), workspace=workspace).drive()
    return load_run(store, run_id)


def new_run(store: Store, command: str, config: RunConfig = SMALL, **kw: Any) -> str:
    return create_run(store, "cartpole", config, agent_identity("command", command=command), **kw)


def of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]
