"""A uniformly random card player: one of the legal actions, each equally likely.

The reference point the baselines are measured against (a random action of the whole action
space would often be illegal, which fails the Episode). Seeded with the Episode's policy
seed, so an Episode replays the same.
"""

import random


class UniformLegal:
    def __init__(self, seed):
        self.rng = random.Random(seed)

    def act(self, observation):
        legal = observation["legal_actions"]
        return self.rng.choice(legal) if legal else 1


def make_policy(context):
    return UniformLegal(context.policy_seed)
