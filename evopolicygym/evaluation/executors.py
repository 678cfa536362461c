"""Where Episodes run: ``local`` (this machine's runner processes) or ``ray`` (Ray actors on
any node of a cluster). A placement, not a condition of what is measured: both give the
same results for the same Episodes."""

from __future__ import annotations

from evopolicygym.evaluation.engine import Evaluator

__all__ = ["EXECUTORS", "make_evaluator"]

EXECUTORS = ("local", "ray")


def make_evaluator(executor: str = "local", *, address: str | None = None) -> Evaluator:
    """An Evaluator of ``executor``; ``address`` is the Ray cluster's (None: a local Ray, or
    the one this process is connected to). Ray is imported only here, and only for ``ray``;
    EvaluationError where it is not installed or cannot be reached."""
    if executor == "local":
        if address is not None:
            raise ValueError("a Ray address is only for the ray executor")
        return Evaluator()
    if executor == "ray":
        from evopolicygym.evaluation.ray_executor import RayEvaluator

        return RayEvaluator(address)
    raise ValueError(f"unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
