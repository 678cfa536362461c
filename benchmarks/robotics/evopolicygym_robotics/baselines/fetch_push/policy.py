"""FetchPush baseline: get behind the block, then push it to the goal.

The observation's first entries are the gripper's position (0:3) and the block's (3:6),
in metres; the action moves the gripper by up to 5 cm a step along x, y, z (the 4th entry
opens or closes the fingers, kept closed). The policy aims at a point 6 cm behind the
block on the line from the goal through it: there from above (it rises first, so as not
to knock the block), then lowered to the block's height, it pushes toward the goal along
that line, going back behind the block whenever it drifts more than 1.5 cm off it.
"""

import math

BEHIND, CLEAR = 0.06, 0.05


def clip(value):
    return max(-1.0, min(1.0, value))


def toward(grip, target, gain=10.0):
    return [clip(gain * (t - g)) for g, t in zip(grip, target, strict=True)]


class Pusher:
    def act(self, observation):
        o = [float(v) for v in observation["observation"]]
        goal = [float(v) for v in observation["desired_goal"]]
        grip, block = o[0:3], o[3:6]
        dx, dy = goal[0] - block[0], goal[1] - block[1]
        norm = math.hypot(dx, dy)
        if norm < 1e-6:
            return [0.0, 0.0, 0.0, -1.0]
        ux, uy = dx / norm, dy / norm
        bx, by = block[0] - ux * BEHIND, block[1] - uy * BEHIND
        # Where the gripper is relative to the block, along and across the push line.
        rx, ry = grip[0] - block[0], grip[1] - block[1]
        along, across = rx * ux + ry * uy, -rx * uy + ry * ux
        lined_up = along < -0.03 and abs(across) < 0.015
        if lined_up and grip[2] < block[2] + 0.02:
            target = [block[0] + ux * 0.05, block[1] + uy * 0.05, block[2]]
            return [*toward(grip, target, 6.0), -1.0]
        if math.hypot(grip[0] - bx, grip[1] - by) > 0.01:
            height = block[2] + CLEAR
            if grip[2] < height - 0.01 and not lined_up:
                return [0.0, 0.0, 1.0, -1.0]
            return [*toward(grip, [bx, by, height]), -1.0]
        return [*toward(grip, [bx, by, block[2]]), -1.0]


def make_policy(context):
    return Pusher()
