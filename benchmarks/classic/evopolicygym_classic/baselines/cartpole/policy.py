"""CartPole baseline: push the cart the way the pole is swinging.

If the pole's angular velocity is positive (swinging right) push right, else
push left. It ignores the pole angle and the cart position, so the pole
drifts over and the cart wanders off: decent, but far from 500 steps.
"""


class SwingRule:
    def act(self, observation):
        _x, _x_dot, _angle, angle_dot = (float(v) for v in observation)
        return 1 if angle_dot > 0 else 0


def make_policy(context):
    return SwingRule()
