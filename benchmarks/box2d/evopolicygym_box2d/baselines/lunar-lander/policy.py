"""LunarLander baseline: fall slowly, stay upright, lean toward the pad.

A proportional-derivative rule on the tilt: the target angle leans toward the
pad (from horizontal offset and speed), side engines correct the error plus
half the angular velocity, and the main engine fires whenever the lander
falls faster than 0.4. After touchdown it only brakes. The fixed descent
speed wastes fuel high up and lands hard sometimes.
"""

NOOP, LEFT_ENGINE, MAIN_ENGINE, RIGHT_ENGINE = 0, 1, 2, 3


class PDLander:
    def act(self, observation):
        x, _y, vx, vy, angle, angular_velocity, left_leg, right_leg = (
            float(v) for v in observation
        )
        if left_leg or right_leg:
            return MAIN_ENGINE if vy < -0.2 else NOOP
        if vy < -0.4:
            return MAIN_ENGINE
        target_angle = max(-0.4, min(0.4, 0.5 * x + 1.0 * vx))
        tilt = angle - target_angle + 0.5 * angular_velocity
        if tilt > 0.1:
            return RIGHT_ENGINE
        if tilt < -0.1:
            return LEFT_ENGINE
        return NOOP


def make_policy(context):
    return PDLander()
