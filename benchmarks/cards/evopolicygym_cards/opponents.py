"""The fixed opponents a policy plays against: part of the Environment, seeded per hand.

Each opponent sees only its own seat's view (``CardGame.view``), never the policy's cards.
They are the difficulty profiles of a game, easiest first (``PROFILES``), in the order of the
baseline program's measured winnings against them:

- ``calling``: always calls or checks, never folds, never raises (a calling station, which
  pays off every value bet);
- ``random``: a legal action uniformly at random (folds a third of the time it is bet into);
- ``rule``: a hand-strength rule: raises strong hands, calls middling ones, folds weak ones
  to a bet, bluff-raises 5% of the time;
- ``equilibrium`` (Leduc only): an approximate Nash equilibrium of heads-up Leduc poker (CFR+,
  exploitability about 0.002 chips a hand), which no policy beats by more than that on average.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evopolicygym_cards.games import CALL, FOLD, RAISE, RANKS, CardGame, best_rank

__all__ = ["OPPONENTS", "OPPONENT_DESCRIPTIONS", "PROFILES", "choose"]

EQUILIBRIUM_FILE = Path(__file__).resolve().parent / "leduc_equilibrium.json"

Opponent = Callable[[CardGame, Any, int, random.Random], int]

BLUFF = 0.05
RAISE_AT = 0.75
CALL_AT = 0.45


def _random(game: CardGame, state: Any, player: int, rng: random.Random) -> int:
    return rng.choice(state.legal_actions())


def _calling(game: CardGame, state: Any, player: int, rng: random.Random) -> int:
    return CALL


def _by_strength(strength: float, legal: list[int], owed: int, rng: random.Random) -> int:
    if RAISE in legal and (strength >= RAISE_AT or rng.random() < BLUFF):
        return RAISE
    if strength >= CALL_AT or owed == 0 or FOLD not in legal:
        return CALL
    return FOLD


def leduc_strength(private: list[str], board: list[str]) -> float:
    rank = "JQK".index(private[0][0])
    if not board:
        return (0.2, 0.5, 0.85)[rank]
    if board[0][0] == private[0][0]:
        return 1.0
    return (0.1, 0.3, 0.6)[rank]


def holdem_strength(private: list[str], board: list[str]) -> float:
    high, low = sorted((RANKS.index(c[0]) for c in private), reverse=True)
    if not board:
        if high == low:
            return 0.6 + 0.4 * high / 12
        score = 0.6 * (high + low) / 24 + (0.05 if private[0][1] == private[1][1] else 0.0)
        return score + (0.05 if high - low == 1 else 0.0)
    mine = best_rank(private + board)[0]
    if mine == best_rank(board)[0]:  # the board plays: the private cards add nothing
        return 0.1 + 0.1 * high / 12
    if mine == 1:
        top = max(RANKS.index(c[0]) for c in board)
        paired = {c[0] for c in private} & {c[0] for c in board} or {private[0][0]}
        return 0.5 + (0.15 if max(RANKS.index(r) for r in paired) >= top else 0.0)
    return min(0.8 + 0.05 * (mine - 2), 1.0)


def _rule(game: CardGame, state: Any, player: int, rng: random.Random) -> int:
    view = game.view(state, player)
    owed = view.contributions[1 - player] - view.contributions[player]
    strength = (leduc_strength if game.name == "leduc" else holdem_strength)(
        view.private, view.board
    )
    return _by_strength(strength, state.legal_actions(), owed, rng)


@functools.lru_cache(maxsize=1)
def equilibrium_table() -> dict[str, list[float]]:
    """Information state (OpenSpiel's string for the seat to act) -> [fold, call, raise]."""
    table: dict[str, list[float]] = json.loads(EQUILIBRIUM_FILE.read_text())
    return table


def _equilibrium(game: CardGame, state: Any, player: int, rng: random.Random) -> int:
    key = state.information_state_string(player)
    probabilities = equilibrium_table().get(key)
    legal = state.legal_actions()
    if probabilities is None:  # cannot happen for a complete table; play safe, not crash
        return CALL
    weights = [probabilities[a] for a in legal]
    return rng.choices(legal, weights=weights)[0] if sum(weights) > 0 else CALL


OPPONENTS: dict[str, Opponent] = {
    "random": _random,
    "calling": _calling,
    "rule": _rule,
    "equilibrium": _equilibrium,
}

OPPONENT_DESCRIPTIONS = {
    "calling": "a calling station: always calls or checks, never folds or raises.",
    "random": "plays a legal action uniformly at random.",
    "rule": (
        "a hand-strength rule: raises strong hands, calls middling ones, folds weak ones to a bet, "
        "bluffs 5% of the time."
    ),
    "equilibrium": (
        "an approximate Nash equilibrium (CFR+, exploitability about 0.002 chips a hand)."
    ),
}

# Each game's profiles (its opponents), easiest first.
PROFILES: dict[str, tuple[str, ...]] = {
    "leduc": ("calling", "random", "rule", "equilibrium"),
    "holdem_limit": ("calling", "random", "rule"),
}


def choose(name: str, game: CardGame, state: Any, player: int, rng: random.Random) -> int:
    return OPPONENTS[name](game, state, player, rng)
