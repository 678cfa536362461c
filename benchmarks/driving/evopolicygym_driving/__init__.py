"""The driving family: Core16's highway-env tasks ``parking`` (continuous control toward a
goal spot, goal-conditioned dict observations) and ``roundabout`` (discrete meta-actions
among traffic), with difficulty profiles (``--param profile=...``), domain Feedback
(collided, mean speed, parked, distance to the goal) and baseline programs.

Installed with ``uv sync --extra driving`` from the project root (it brings ``highway-env``).
"""

from evopolicygym_driving.tasks import BASELINES_DIR, PROFILES, DrivingTracker, parking, roundabout

__all__ = ["BASELINES_DIR", "PROFILES", "DrivingTracker", "parking", "roundabout"]
