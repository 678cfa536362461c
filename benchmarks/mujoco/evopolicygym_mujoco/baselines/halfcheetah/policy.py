"""HalfCheetah baseline: an open-loop sinusoidal gait (no learned weights, no feedback).

Each of the six joints follows bias + amplitude * sin(frequency * t + phase), t counting the
policy's own steps. The constants were picked by a one-off search over 250 random gaits
(300-step trials), the best twelve then played for 1000 steps from ten start states of their
own (not the assessment split's): this one ran forward from every start, about 1.3 m/s.
"""

import numpy as np

FREQUENCY = 0.997  # radians per step (0.05 s): a stride about every 0.3 s
AMPLITUDE = np.array([0.46, 0.49, 0.39, 0.57, 0.56, 0.78])  # bthigh bshin bfoot fthigh fshin ffoot
PHASE = np.array([5.63, 1.56, 5.09, 1.94, 2.56, 0.81])
BIAS = np.array([0.24, -0.08, 0.12, -0.28, 0.12, -0.16])


class GaitPolicy:
    def __init__(self):
        self.t = 0

    def act(self, observation):
        torque = BIAS + AMPLITUDE * np.sin(FREQUENCY * self.t + PHASE)
        self.t += 1
        return np.clip(torque, -1.0, 1.0).tolist()


def make_policy(context):
    return GaitPolicy()
