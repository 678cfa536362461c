# The types of __init__.py's lazy exports, for type checkers: an import per _EXPORTS entry.
# Written by `uv run python -m tests.support.faces`; tests/test_package_faces.py checks it.

from evopolicygym.experiments.decider import OUTCOMES as OUTCOMES
from evopolicygym.experiments.decider import RETRYABLE as RETRYABLE
from evopolicygym.experiments.decider import next_step as next_step
from evopolicygym.experiments.ray_executor import RayExecutor as RayExecutor
from evopolicygym.experiments.ray_executor import RayUnavailable as RayUnavailable
from evopolicygym.experiments.runner import CellLauncher as CellLauncher
from evopolicygym.experiments.runner import Executor as Executor
from evopolicygym.experiments.runner import ExperimentBusy as ExperimentBusy
from evopolicygym.experiments.runner import ExperimentMismatch as ExperimentMismatch
from evopolicygym.experiments.runner import ExperimentOutcome as ExperimentOutcome
from evopolicygym.experiments.runner import ExperimentRunner as ExperimentRunner
from evopolicygym.experiments.runner import LocalExecutor as LocalExecutor
from evopolicygym.experiments.runner import default_carry_argv as default_carry_argv
from evopolicygym.experiments.spec import MAX_CELLS as MAX_CELLS
from evopolicygym.experiments.spec import PROFILES as PROFILES
from evopolicygym.experiments.spec import ExperimentSpec as ExperimentSpec
from evopolicygym.experiments.spec import SpecError as SpecError
from evopolicygym.experiments.spec import load_spec as load_spec
from evopolicygym.experiments.spec import resolve as resolve
from evopolicygym.experiments.spec import spec_schema as spec_schema

__all__ = [
    "MAX_CELLS",
    "OUTCOMES",
    "PROFILES",
    "RETRYABLE",
    "CellLauncher",
    "Executor",
    "ExperimentBusy",
    "ExperimentMismatch",
    "ExperimentOutcome",
    "ExperimentRunner",
    "ExperimentSpec",
    "LocalExecutor",
    "RayExecutor",
    "RayUnavailable",
    "SpecError",
    "default_carry_argv",
    "load_spec",
    "next_step",
    "resolve",
    "spec_schema",
]
