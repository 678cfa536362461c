"""Reacher baseline: a proportional-derivative controller in task space (no learned weights).

The observation gives the joint angles (as cos and sin), the joint velocities and the vector
from the target to the fingertip. The fingertip's Jacobian follows from the two link lengths
(0.1 and 0.11 in Reacher's model), so the torque J^T (target - fingertip) pulls the tip
toward the target; a damping term on the joint velocities stops it there.
"""

import numpy as np

LINKS = (0.1, 0.11)
GAIN = 20.0  # torque per metre of error, through the Jacobian
DAMPING = 0.1  # torque per rad/s of joint velocity


class ReacherPolicy:
    def act(self, observation):
        obs = np.asarray(observation, dtype=np.float64)
        c0, c1, s0, s1 = obs[0], obs[1], obs[2], obs[3]
        velocity = obs[6:8]
        error = -obs[8:10]  # target minus fingertip
        c01 = c0 * c1 - s0 * s1  # cos and sin of the tip link's absolute angle
        s01 = s0 * c1 + c0 * s1
        l0, l1 = LINKS
        jacobian = np.array([[-l0 * s0 - l1 * s01, -l1 * s01], [l0 * c0 + l1 * c01, l1 * c01]])
        torque = GAIN * jacobian.T @ error - DAMPING * velocity
        return np.clip(torque, -1.0, 1.0).tolist()


def make_policy(context):
    return ReacherPolicy()
