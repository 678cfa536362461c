"""The MuJoCo family: Core16's four MuJoCo tasks (``reacher5``, ``halfcheetah5``, ``ant5``,
``pusher5``, Gymnasium's v5 environments) with difficulty profiles (``--param
profile=...``), domain Feedback (final distance to the target or goal, distance travelled,
forward velocity, whether the Ant fell, why an Episode ended) and baseline programs.

Installed with ``uv sync --extra mujoco`` from the project root (it brings ``mujoco``, and
with it ``gymnasium:Hopper-v5`` style ids work too).
"""

from evopolicygym_mujoco.tasks import (
    BASELINES_DIR,
    PROFILES,
    REACHED_DISTANCE,
    LocomotionTracker,
    PusherTracker,
    ReacherTracker,
    ant,
    halfcheetah,
    pusher,
    reacher,
)

__all__ = [
    "BASELINES_DIR",
    "PROFILES",
    "REACHED_DISTANCE",
    "LocomotionTracker",
    "PusherTracker",
    "ReacherTracker",
    "ant",
    "halfcheetah",
    "pusher",
    "reacher",
]
