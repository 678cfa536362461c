"""Pusher baseline: a scripted reach-then-push controller (no learned weights).

The arm's kinematics are not in the observation, so the policy learns how its tip moves
with its joints as it goes (a Broyden estimate of the 3 x 7 Jacobian, updated from each
step's change of joint angles and tip position). It drives the tip toward a point just
behind the object (on the side away from the goal), then through the object toward the
goal, with torques J^T (wanted - tip) and damping on the joint velocities.

What it achieves: the tip ends about 0.3 m from the object (random's flailing ends 0.54 m
away) at little torque cost, but the object seldom moves. The point behind the object lies
toward the arm's base, where the shoulder and elbow reach their joint limits before the tip
gets down to the table; pushing it to the goal is left to the policies evolved from here.
"""

import numpy as np

GAIN = 4.0
DAMPING = 0.5
BEHIND = 0.08  # metres behind the object's centre, on the line from the goal
LIMIT = 2.0


class PushPolicy:
    def __init__(self):
        self.jacobian = None
        self.last = None
        self.pushing = False

    def act(self, observation):
        obs = np.asarray(observation, dtype=np.float64)
        q, dq = obs[0:7], obs[7:14]
        tip, target, goal = obs[14:17], obs[17:20], obs[20:23]
        if self.jacobian is None:
            self.jacobian = 0.3 * np.eye(3, 7)
        elif self.last is not None:
            step_q = q - self.last[0]
            step_x = tip - self.last[1]
            norm = float(step_q @ step_q)
            if norm > 1e-8:
                self.jacobian += np.outer(step_x - self.jacobian @ step_q, step_q) / norm
        self.last = (q.copy(), tip.copy())
        away = target[:2] - goal[:2]
        away = away / max(1e-6, float(np.linalg.norm(away)))
        behind = target.copy()
        behind[:2] += BEHIND * away
        if np.linalg.norm((tip - behind)[:2]) < 0.04:
            self.pushing = True
        wanted = goal.copy() if self.pushing else behind
        wanted[2] = target[2]
        torque = GAIN * self.jacobian.T @ (wanted - tip) - DAMPING * dq
        return np.clip(torque, -LIMIT, LIMIT).tolist()


def make_policy(context):
    return PushPolicy()
