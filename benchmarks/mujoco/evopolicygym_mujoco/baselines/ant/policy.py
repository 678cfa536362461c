"""Ant baseline: a stable stance (no learned weights).

The Ant is paid 1 for every step its torso stays between heights 0.2 and 1.0 and pays
0.5 * sum(action^2) for its torques; a random policy pays about 1.3 a step and soon tips
over, ending the Episode. Standing still with the joints lightly damped keeps the torso up
for the whole Episode at almost no torque cost. Walking is left to the policies evolved
from here.
"""

import numpy as np

# Joint velocities are observation items 19..26 (after z, the quaternion, 8 angles and the
# torso's 6 velocities).
JOINT_VELOCITIES = slice(19, 27)
DAMPING = 0.02


class StancePolicy:
    def act(self, observation):
        velocity = np.asarray(observation, dtype=np.float64)[JOINT_VELOCITIES]
        return np.clip(-DAMPING * velocity, -1.0, 1.0).tolist()


def make_policy(context):
    return StancePolicy()
