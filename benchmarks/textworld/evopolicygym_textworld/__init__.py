"""The TextWorld family: text adventures generated locally from seeds by TextWorld's
challenge generators (coin collector, treasure hunter, cooking), each at three difficulty
profiles, cached by content (``EVOPOLICY_TEXTWORLD_CACHE``), with a baseline program
(``baselines/agent``) and a uniform-random one (``baselines/random``). Installed with
``uv sync --extra textworld``.
"""

from evopolicygym_textworld.benchmark import (
    BASELINES_DIR,
    DEFAULT_PROFILE,
    PROFILES,
    REFERENCES,
    VERBS,
    TextWorldBenchmark,
    coin,
    cooking,
    treasure,
)
from evopolicygym_textworld.environment import TextWorldEnvironment
from evopolicygym_textworld.games import CACHE_ENV, cache_dir, cache_key, ensure_game

__all__ = [
    "BASELINES_DIR",
    "CACHE_ENV",
    "DEFAULT_PROFILE",
    "PROFILES",
    "REFERENCES",
    "VERBS",
    "TextWorldBenchmark",
    "TextWorldEnvironment",
    "cache_dir",
    "cache_key",
    "coin",
    "cooking",
    "ensure_game",
    "treasure",
]
