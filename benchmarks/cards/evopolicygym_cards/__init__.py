"""The card-game family: imperfect-information card games from OpenSpiel, each played by the
policy's seat against a fixed opponent that is part of the Environment.

- ``leduc``: Leduc poker (OpenSpiel ``leduc_poker``);
- ``holdem_limit``: heads-up limit Texas Hold'em (OpenSpiel ``universal_poker``).

An Episode is a match of hands, dealt and played deterministically from its seed; the
policy sees only what its seat may see, and an illegal action fails the Episode. Profiles
are the opponents, easiest first (``PROFILES``), chosen with ``--param opponent=NAME``. Each
game has a baseline program (``baselines/<game>``); ``baselines/random`` plays uniformly at
random among the legal actions. Installed with ``uv sync --extra cards``.
"""

from evopolicygym_cards.benchmark import (
    BASELINES_DIR,
    DEFAULT_PROFILE,
    MEASURED,
    CardGameBenchmark,
    holdem_limit,
    leduc,
)
from evopolicygym_cards.environment import CardEnvironment
from evopolicygym_cards.games import GAMES, CardGame
from evopolicygym_cards.opponents import PROFILES

__all__ = [
    "BASELINES_DIR",
    "DEFAULT_PROFILE",
    "GAMES",
    "MEASURED",
    "PROFILES",
    "CardEnvironment",
    "CardGame",
    "CardGameBenchmark",
    "holdem_limit",
    "leduc",
]
