"""MountainCarContinuous baseline: always push at full force in the direction of motion.

Pushing with the velocity rocks the car higher on every swing until it reaches
the flag. Full force costs 0.1 per step, so gentler pushes could score higher.
"""


class PushWithVelocity:
    def act(self, observation):
        velocity = float(observation[1])
        return [1.0 if velocity >= 0 else -1.0]


def make_policy(context):
    return PushWithVelocity()
