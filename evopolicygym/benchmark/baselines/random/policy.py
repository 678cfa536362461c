"""A uniform-random policy for any action space the Benchmark describes (uniform over the
legal actions where a discrete action space's observation lists them, over the commands that
apply where a text action space names them): the floor a baseline
program has to beat. Seeded with the Episode's policy seed, so it is reproducible."""

import random


def sample(space, rng):
    kind = space.get("type")
    if kind == "discrete":
        return space.get("start", 0) + rng.randrange(space["n"])
    if kind == "box":
        shape = space["shape"]
        size = 1
        for n in shape:
            size *= n
        low, high = flat(space["low"], size), flat(space["high"], size)
        integral = space.get("dtype", "float32").startswith(("int", "uint"))
        values = [draw(lo, hi, integral, rng) for lo, hi in zip(low, high, strict=True)]
        return nest(values, shape)
    if kind == "multi_discrete":
        nvec, start = flat(space["nvec"], None), flat(space["start"], None)
        return [s + rng.randrange(n) for n, s in zip(nvec, start, strict=True)]
    if kind == "multi_binary":
        n = space["n"]
        count = n if isinstance(n, int) else prod(n)
        return [rng.randrange(2) for _ in range(count)]
    if kind == "tuple":
        return [sample(s, rng) for s in space["spaces"]]
    if kind == "dict":
        return {k: sample(s, rng) for k, s in space["spaces"].items()}
    if kind == "text" and space.get("verbs") and space.get("objects"):
        # A command (TextWorld): a verb alone where it takes no object, else with an object.
        verb = rng.choice(space["verbs"])
        if verb in space.get("intransitive", ()):
            return verb
        return verb + " " + rng.choice(space["objects"])
    raise ValueError(f"no random action for a space of type {kind!r}")


def prod(values):
    out = 1
    for v in values:
        out *= v
    return out


def flat(value, size):
    if isinstance(value, list):
        out = []
        for v in value:
            out.extend(flat(v, None))
        return out
    return [value] * (size or 1)


def nest(values, shape):
    if not shape:
        return values[0]
    if len(shape) == 1:
        return values
    step = len(values) // shape[0]
    return [nest(values[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def draw(low, high, integral, rng):
    # Unbounded sides (None) are sampled around the bound that exists, or a unit normal.
    if low is None and high is None:
        value = rng.gauss(0.0, 1.0)
    elif low is None:
        value = high - rng.expovariate(1.0)
    elif high is None:
        value = low + rng.expovariate(1.0)
    else:
        value = rng.uniform(low, high)
    if integral:
        lo = low if low is not None else value
        hi = high if high is not None else value
        return float(min(max(round(value), lo), hi))
    return value


class UniformRandom:
    def __init__(self, space, seed):
        self.space = space
        self.rng = random.Random(seed)

    def act(self, observation):
        # A text action space may name the observation's list of the commands that apply
        # (TextWorld's admissible commands): uniform over those where it is given.
        if self.space.get("type") == "text" and isinstance(observation, dict):
            choices = observation.get(self.space.get("choices") or "")
            if isinstance(choices, list) and choices:
                return self.rng.choice(choices)
        # Where the observation lists the legal actions (card and board games: any other
        # action fails the Episode), uniform over those: the floor a baseline has to beat.
        legal = observation.get("legal_actions") if isinstance(observation, dict) else None
        if self.space.get("type") == "discrete" and isinstance(legal, list) and legal:
            return self.rng.choice(legal)
        return sample(self.space, self.rng)


def make_policy(context):
    return UniformRandom(context.action_space, context.policy_seed)
