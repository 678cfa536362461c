"""The robotics family: Core16's gymnasium-robotics Fetch arm tasks ``fetch_push`` and
``fetch_pickandplace`` (goal-conditioned dict observations), with step-limit profiles
(``--param profile=...``), domain Feedback (success, final block-to-goal distance, whether
the block moved) and scripted baseline programs.

Installed with ``uv sync --extra robotics`` from the project root (it brings
``gymnasium-robotics`` and MuJoCo).
"""

from evopolicygym_robotics.tasks import (
    BASELINES_DIR,
    PROFILES,
    FetchTracker,
    fetch_pickandplace,
    fetch_push,
)

__all__ = ["BASELINES_DIR", "PROFILES", "FetchTracker", "fetch_pickandplace", "fetch_push"]
