"""Roundabout baseline: keep the lane, slow down for whatever the car would meet.

The observation is five rows (the car first, then the nearest vehicles) of (presence, x,
y, vx, vy), positions in units of 100 m and speeds of 15 m/s. For each vehicle the policy
predicts, at constant velocities, how close the two will come within the next few
seconds; a vehicle that would come within 12 m, or one close ahead in the car's own
direction, makes it brake (SLOWER); otherwise it keeps its speed while any vehicle is
within 25 m and speeds up (FASTER, which the reward pays for) when none is. It never
changes lane, and braking is all it knows: a vehicle closing in from behind is not its
concern.
"""

import math

LANE_LEFT, IDLE, LANE_RIGHT, FASTER, SLOWER = 0, 1, 2, 3, 4
SCALE, SPEED_SCALE = 100.0, 15.0
HORIZON = 5.0  # seconds looked ahead
NEAR = 12.0  # metres: closer than this at the closest approach is a threat
CLEAR = 25.0  # metres: with a vehicle nearer than this it keeps its speed rather than speeding up


class CautiousDriver:
    def act(self, observation):
        rows = [[float(v) for v in row] for row in observation]
        _, x, y, vx, vy = rows[0]
        x, y, vx, vy = x * SCALE, y * SCALE, vx * SPEED_SCALE, vy * SPEED_SCALE
        speed = math.hypot(vx, vy)
        hx, hy = (vx / speed, vy / speed) if speed > 0.1 else (0.0, 0.0)
        action = FASTER
        for present, ox, oy, ovx, ovy in rows[1:]:
            if present < 0.5:
                continue
            rx, ry = ox * SCALE - x, oy * SCALE - y
            rvx, rvy = ovx * SPEED_SCALE - vx, ovy * SPEED_SCALE - vy
            ahead = rx * hx + ry * hy
            if 0 < ahead < 15.0 and abs(rx * hy - ry * hx) < 3.0:
                return SLOWER
            closing = rvx * rvx + rvy * rvy
            t = 0.0 if closing < 1e-6 else max(0.0, min(HORIZON, -(rx * rvx + ry * rvy) / closing))
            if t > 0 and math.hypot(rx + rvx * t, ry + rvy * t) < NEAR:
                return SLOWER
            if math.hypot(rx, ry) < CLEAR:
                action = IDLE
        return action


def make_policy(context):
    return CautiousDriver()
