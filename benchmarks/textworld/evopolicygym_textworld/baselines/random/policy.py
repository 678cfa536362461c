"""A uniform-random TextWorld policy: each step, one of the commands the game accepts now
(the observation's ``admissible_commands``), uniformly; where the observation lists none, a
random verb (alone if it takes no object) with a random object, from the action space's
vocabulary: what the Benchmark's ``sample_action`` does. Seeded with the
Episode's policy seed, so it is reproducible: the floor a baseline has to beat."""

import random


class UniformRandom:
    def __init__(self, space, seed):
        self.space = space
        self.rng = random.Random(seed)

    def act(self, observation):
        key = self.space.get("choices")
        choices = observation.get(key) if key and isinstance(observation, dict) else None
        if isinstance(choices, list) and choices:
            return self.rng.choice(choices)
        verb = self.rng.choice(self.space["verbs"])
        if verb in self.space.get("intransitive", ()):
            return verb
        return verb + " " + self.rng.choice(self.space["objects"])


def make_policy(context):
    return UniformRandom(context.action_space, context.policy_seed)
