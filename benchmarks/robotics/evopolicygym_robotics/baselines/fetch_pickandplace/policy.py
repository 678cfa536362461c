"""FetchPickAndPlace baseline: above the block, down, grasp, lift, carry to the goal.

The observation's first entries are the gripper's position (0:3), the block's (3:6) and
the two fingers' openings (9:11), in metres; the action moves the gripper by up to 5 cm a
step along x, y, z and opens (+1) or closes (-1) the fingers. A small state machine: move
over the block with the fingers open, lower onto it, close the fingers for a few steps,
then carry the block to the goal (in the air or on the table). If the block slips out
(it is more than 2 cm from the gripper), it starts again.
"""

import math


def clip(value):
    return max(-1.0, min(1.0, value))


def toward(grip, target, gain=10.0):
    return [clip(gain * (t - g)) for g, t in zip(grip, target, strict=True)]


class PickAndPlace:
    def __init__(self):
        self.closing = 0

    def act(self, observation):
        o = [float(v) for v in observation["observation"]]
        goal = [float(v) for v in observation["desired_goal"]]
        grip, block = o[0:3], o[3:6]
        gap = math.dist(grip, block)
        if self.closing >= 4 and gap > 0.02:
            self.closing = 0  # dropped it
        if self.closing >= 4:
            return [*toward(grip, goal), -1.0]
        if self.closing > 0 or gap < 0.01:
            self.closing += 1
            return [0.0, 0.0, 0.0, -1.0]
        if math.hypot(grip[0] - block[0], grip[1] - block[1]) > 0.01:
            return [*toward(grip, [block[0], block[1], block[2] + 0.08]), 1.0]
        return [*toward(grip, block), 1.0]


def make_policy(context):
    return PickAndPlace()
