"""``TrainingProgress``: the trainer's step, for the Runs its rollouts start.

Given to the trainer as a callback (``callbacks=[progress]``) and to ``PolicyEvolutionEnv``
as ``progress=``, it keeps the trainer's global step as the trainer reports it, so each
Run records the step it was made at and its seed follows from it (every generation of a
GRPO group is made in one step, so they share their Episodes). Duck-typed to the
``transformers.TrainerCallback`` interface, so this module imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["TrainingProgress"]


class TrainingProgress:
    """The trainer's ``state.global_step``, kept from every callback event."""

    def __init__(self) -> None:
        self.step: int | None = None

    def _seen(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step = getattr(state, "global_step", None)
        if isinstance(step, int):
            self.step = step
        return None  # the trainer's control is left as it is

    def __getattr__(self, name: str) -> Callable[..., None]:
        # Every event of the callback interface (on_step_begin, on_train_begin, ...).
        if name.startswith("on_"):
            return self._seen
        raise AttributeError(name)
