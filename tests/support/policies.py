"""Policy sources the tests evaluate, and ``program``: a Program of dedented sources."""

from __future__ import annotations

import textwrap

from evopolicygym.program import Program

GOOD = """
class Policy:
    def act(self, obs):
        return 1 if obs[0] < obs[1] else 0

def make_policy(context):
    return Policy()
"""


def program(source: str, **extra: str) -> Program:
    files = {"policy.py": textwrap.dedent(source)}
    files.update({k: textwrap.dedent(v) for k, v in extra.items()})
    return Program.from_files(files)


CRASHING_POLICY = """
class Crash:
    def act(self, observation):
        raise RuntimeError("boom " * 50)


def make_policy(context):
    return Crash()
"""
