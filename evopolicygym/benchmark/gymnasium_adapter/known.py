"""What this project knows of particular Gymnasium environments, by name: what their
observations, actions and rewards mean, and the worst return an Episode can have."""

from __future__ import annotations

import math
from collections.abc import Callable

__all__ = ["KNOWN_ENVIRONMENTS", "WORST_RETURNS", "environment_name", "worst_return"]


# Public descriptions of what observations and actions mean, keyed by environment name.
KNOWN_ENVIRONMENTS: dict[str, dict[str, str]] = {
    "CartPole": {
        "observation": "[cart position, cart velocity, pole angle (rad), pole angular velocity]",
        "action": "0 pushes the cart left, 1 pushes it right",
        "reward": "+1 per step while the pole stays up; the Episode ends when it falls",
    },
    "FrozenLake": {
        "observation": "current cell as row * ncols + col",
        "action": "0 left, 1 down, 2 right, 3 up; on slippery ice the move may go sideways",
        "reward": "1 on reaching the goal G, else 0; falling into a hole H ends the Episode",
    },
    "Acrobot": {
        "observation": "[cos t1, sin t1, cos t2, sin t2, dt1, dt2] (joint angles, velocities)",
        "action": "torque on the middle joint: 0 is -1, 1 is 0, 2 is +1",
        "reward": "-1 per step until the tip swings above the target height",
    },
    "MountainCarContinuous": {
        "observation": "[car position, car velocity]",
        "action": "[force] in [-1, 1]",
        "reward": "+100 on reaching the flag at position 0.45, minus 0.1 * force^2 per step",
    },
    "MountainCar": {
        "observation": "[car position, car velocity]",
        "action": "0 pushes left, 1 does nothing, 2 pushes right",
        "reward": "-1 per step until the car reaches the flag",
    },
    "Pendulum": {
        "observation": "[cos theta, sin theta, angular velocity]",
        "action": "[torque] in [-2, 2]",
        "reward": "minus a cost on angle from upright, velocity and torque",
    },
    "LunarLander": {
        "observation": (
            "[x, y, vx, vy, angle, angular velocity, left leg contact, right leg contact]"
        ),
        "action": "0 noop, 1 fire left engine, 2 fire main engine, 3 fire right engine",
        "reward": "shaped by distance, speed, tilt and leg contact; -100 on crash, +100 on landing",
    },
}


# The worst return an Episode of at most T steps can have, from each environment's reward
# bounds (as Gymnasium documents and implements them): the failure score derived for
# ``gymnasium:<id>`` when none is given. An environment missing here needs
# ``--param failure_return=...``.
WORST_RETURNS: dict[str, Callable[[int], float]] = {
    "CartPole": lambda steps: 0.0,  # +1 per step
    "FrozenLake": lambda steps: 0.0,  # 0 or 1
    "MountainCar": lambda steps: -1.0 * steps,  # -1 per step
    "Acrobot": lambda steps: -1.0 * steps,  # -1 per step, 0 on the last
    "MountainCarContinuous": lambda steps: -0.1 * steps,  # -0.1 * force^2, force in [-1, 1]
    # -(angle^2 + 0.1 * speed^2 + 0.001 * torque^2), angle in [-pi, pi], speed in [-8, 8],
    # torque in [-2, 2]
    "Pendulum": lambda steps: -(math.pi**2 + 0.1 * 64 + 0.001 * 4) * steps,
    "Taxi": lambda steps: -10.0 * steps,  # -1 per step, -10 for an illegal pick-up or drop-off
    "CliffWalking": lambda steps: -100.0 * steps,  # -1 per step, -100 for the cliff
    "Blackjack": lambda steps: -1.0,  # one reward, -1 for a loss
}


def environment_name(env_id: str) -> str:
    """``CartPole`` for ``CartPole-v1``, ``gymnasium_robotics:FetchPush-v4`` -> ``FetchPush``."""
    return env_id.rsplit(":", 1)[-1].rsplit("/", 1)[-1].split("-v", 1)[0]


def worst_return(env_id: str, max_episode_steps: int) -> float | None:
    """The derived failure score of ``env_id`` under a step limit, None where unknown."""
    bound = WORST_RETURNS.get(environment_name(env_id))
    return None if bound is None else float(bound(max_episode_steps))
