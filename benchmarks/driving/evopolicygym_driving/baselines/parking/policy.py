"""Parking baseline: pure pursuit along the goal spot's axis.

The observation's positions are in units of 100 m, its speeds of 5 m/s, its headings as
(cos, sin). The spots open onto the aisle (the lot's middle, y = 0), so the car enters
its spot moving away from the aisle: forward when the goal's heading points into the
spot, in reverse when it points out. The policy follows the spot's axis: it aims at a
point on that axis a few metres ahead of the car's projection on it, but never nearer the
spot than 1.5 times its lateral offset (so it comes in at a shallow angle), steering in
proportion to the bearing of that point (the rear's bearing when reversing), with a
wanted speed that falls with the distance to the goal (at most 8 m/s: every step costs
the distance left). It plans no manoeuvre: facing
away from the point, it turns on full lock, which parked cars or a wall may stop.
"""

import math

SCALE, SPEED_SCALE = 100.0, 5.0
MAX_STEER = math.pi / 4  # the environment's steering range: action 1 is 45 degrees
LOOKAHEAD = 5.0


def clip(value, low=-1.0, high=1.0):
    return max(low, min(high, value))


def wrap(angle):
    return (angle + math.pi) % (2 * math.pi) - math.pi


class ParkingController:
    def act(self, observation):
        x, y, vx, vy, cos_h, sin_h = (float(v) for v in observation["observation"])
        gx, gy, _, _, cos_g, sin_g = (float(v) for v in observation["desired_goal"])
        x, y, gx, gy = x * SCALE, y * SCALE, gx * SCALE, gy * SCALE
        # d: the direction of motion into the spot, away from the aisle.
        d = (cos_g, sin_g) if cos_g * gx + sin_g * gy > 0 else (-cos_g, -sin_g)
        gear = 1.0 if d[0] * cos_g + d[1] * sin_g > 0 else -1.0
        s = (x - gx) * d[0] + (y - gy) * d[1]  # along the axis: negative before the spot
        e = -(x - gx) * d[1] + (y - gy) * d[0]  # across it
        along = min(s + LOOKAHEAD, -1.5 * abs(e), 0.0)
        tx, ty = gx + d[0] * along, gy + d[1] * along
        heading = math.atan2(sin_h, cos_h) + (0.0 if gear > 0 else math.pi)
        bearing = wrap(math.atan2(ty - y, tx - x) - heading)
        steer = clip(gear * 2.0 * bearing / MAX_STEER)
        distance = math.hypot(gx - x, gy - y)
        target = gear * min(8.0, 0.6 * distance + 0.5)
        speed = (vx * cos_h + vy * sin_h) * SPEED_SCALE  # signed: negative when reversing
        return [clip(0.6 * (target - speed)), steer]


def make_policy(context):
    return ParkingController()
