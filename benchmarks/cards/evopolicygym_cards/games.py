"""The card games of the family, over OpenSpiel: how each is loaded, dealt, and seen by one seat.

A seat's view is read from OpenSpiel's own information state for that seat (its private
cards, the board, the round) and its public observation (the chips each seat has put in),
so what a seat is shown is what the library says that seat may know. Both games number
their betting actions alike: 0 fold, 1 call (a check when nothing is owed), 2 raise (a bet
when nothing has been bet).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import pyspiel

__all__ = [
    "ACTION_NAMES",
    "CATEGORIES",
    "GAMES",
    "CardGame",
    "SeatView",
    "hand_category",
    "rank_five",
]

FOLD, CALL, RAISE = 0, 1, 2
ACTION_NAMES = {FOLD: "fold", CALL: "call", RAISE: "raise"}
# One letter per action in a hand's compact betting string (ACPC's letters: r, c, f).
ACTION_LETTERS = {FOLD: "f", CALL: "c", RAISE: "r"}

_PRIVATE = re.compile(r"\[Private: ([^\]]*)\]")
_PUBLIC = re.compile(r"\[Public: ([^\]]*)\]")
_ROUND = re.compile(r"\[Round (\d+)\]")
_MONEY = re.compile(r"\[Money: (\d+) (\d+)\]")
_CONTRIBUTION = re.compile(r"\[PlayerContribution: (\d+) (\d+)\]")

LEDUC_STACK = 100  # OpenSpiel's leduc_poker: each seat starts with 100 chips
RANKS = "23456789TJQKA"


@dataclass(frozen=True)
class SeatView:
    """What one seat may know of a hand in progress."""

    private: list[str]
    board: list[str]
    round: int  # 0-based
    contributions: tuple[int, int]  # chips each seat (OpenSpiel player 0, 1) has put in


@dataclass(frozen=True)
class CardGame:
    """One OpenSpiel poker game and how this family reads it."""

    name: str
    game_string: str
    description: str
    rules: str
    default_hands: int
    big_blind: int  # the unit results are also reported in (Leduc: the ante)
    first_to_act: int  # the OpenSpiel player who acts first in a hand

    def load(self) -> Any:
        return _load(self.game_string)

    def view(self, state: Any, player: int) -> SeatView:
        info = state.information_state_string(player)
        if self.name == "leduc":
            private = _PRIVATE.search(info)
            public = _PUBLIC.search(info)
            money = _MONEY.search(info)
            round_ = _ROUND.search(info)
            assert private and money and round_, info
            return SeatView(
                private=[leduc_card(int(private.group(1)))],
                board=[leduc_card(int(public.group(1)))] if public else [],
                round=int(round_.group(1)) - 1,
                contributions=(
                    LEDUC_STACK - int(money.group(1)),
                    LEDUC_STACK - int(money.group(2)),
                ),
            )
        private = _PRIVATE.search(info)
        public = _PUBLIC.search(info)
        round_ = _ROUND.search(info)
        contribution = _CONTRIBUTION.search(state.observation_string(player))
        assert private and round_ and contribution, info
        return SeatView(
            private=_split_cards(private.group(1)),
            board=_split_cards(public.group(1)) if public else [],
            round=int(round_.group(1)),
            contributions=(int(contribution.group(1)), int(contribution.group(2))),
        )


@functools.cache
def _load(game_string: str) -> Any:
    return pyspiel.load_game(game_string)


def leduc_card(card: int) -> str:
    """OpenSpiel's Leduc card ``c`` has rank ``c // 2`` (J, Q, K) and one of two suits."""
    return "JQK"[card // 2] + "sh"[card % 2]


def _split_cards(text: str) -> list[str]:
    return [text[i : i + 2] for i in range(0, len(text), 2)]


# Heads-up limit Texas Hold'em as OpenSpiel documents it for universal_poker: blinds 10/5
# (player 0 posts the big blind, player 1 the small blind and acts first before the flop),
# bets of 10 before and on the flop and 20 on the turn and river, at most 3 raises before
# the flop and 4 after.
HOLDEM_LIMIT = (
    "universal_poker(betting=limit,numPlayers=2,numRounds=4,blind=10 5,firstPlayer=2 1 1 1,"
    "numSuits=4,numRanks=13,numHoleCards=2,numBoardCards=0 3 1 1,raiseSize=10 10 20 20,"
    "maxRaises=3 4 4 4)"
)

GAMES: dict[str, CardGame] = {
    "leduc": CardGame(
        name="leduc",
        game_string="leduc_poker",
        description=(
            "Leduc poker, heads-up, against a fixed opponent: win chips over a match of hands."
        ),
        rules=(
            "Six cards: J, Q, K in two suits. Each seat antes 1 and gets one private card. "
            "Round 1: bets of 2, round 2 (after one public board card): bets of 4, at most two "
            "raises a round; the first seat to act is OpenSpiel player 0. A pair with the board "
            "wins the showdown, else the higher card; equal ranks split the pot."
        ),
        default_hands=20,
        big_blind=1,
        first_to_act=0,
    ),
    "holdem_limit": CardGame(
        name="holdem_limit",
        game_string=HOLDEM_LIMIT,
        description=(
            "Heads-up limit Texas Hold'em against a fixed opponent: "
            "win chips over a match of hands."
        ),
        rules=(
            "52 cards, two private cards per seat, a board of 3, 1 and 1 cards. Blinds 10/5: "
            "OpenSpiel player 0 posts the big blind, player 1 the small blind and acts first "
            "before the flop, last after it. Bets of 10 before and on the flop, 20 on the turn "
            "and river; at most 3 raises before the flop and 4 after. Best five of seven cards "
            "wins the showdown."
        ),
        default_hands=20,
        big_blind=10,
        first_to_act=1,
    ),
}


# --- hand ranking (for the Hold'em rule opponent and showdown descriptions) --------------------

CATEGORIES = (
    "high card",
    "pair",
    "two pair",
    "three of a kind",
    "straight",
    "flush",
    "full house",
    "four of a kind",
    "straight flush",
)


def rank_five(cards: list[str]) -> tuple[int, ...]:
    """A comparable rank of five cards: (category, tie-breaking ranks...)."""
    ranks = sorted((RANKS.index(c[0]) for c in cards), reverse=True)
    counts: dict[int, int] = {}
    for r in ranks:
        counts[r] = counts.get(r, 0) + 1
    groups = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    flush = len({c[1] for c in cards}) == 1
    distinct = sorted(counts, reverse=True)
    straight_high = -1
    if len(distinct) == 5:
        if distinct[0] - distinct[4] == 4:
            straight_high = distinct[0]
        elif distinct == [12, 3, 2, 1, 0]:  # A-2-3-4-5
            straight_high = 3
    if straight_high >= 0:
        return (8 if flush else 4, straight_high)
    shape = [n for _, n in groups]
    tiebreak = tuple(r for r, _ in groups)
    if shape == [4, 1]:
        return (7, *tiebreak)
    if shape == [3, 2]:
        return (6, *tiebreak)
    if flush:
        return (5, *ranks)
    if shape == [3, 1, 1]:
        return (3, *tiebreak)
    if shape == [2, 2, 1]:
        return (2, *tiebreak)
    if shape == [2, 1, 1, 1]:
        return (1, *tiebreak)
    return (0, *ranks)


def best_rank(cards: list[str]) -> tuple[int, ...]:
    """The best rank of any five of ``cards`` (five to seven); fewer than five: by pairs only."""
    if len(cards) < 5:
        counts: dict[str, int] = {}
        for c in cards:
            counts[c[0]] = counts.get(c[0], 0) + 1
        most = max(counts.values(), default=0)
        pairs = sum(1 for n in counts.values() if n == 2)
        category = {4: 7, 3: 3}.get(most, 2 if pairs == 2 else 1 if pairs == 1 else 0)
        return (category,)
    return max(rank_five(list(five)) for five in combinations(cards, 5))


def hand_category(cards: list[str]) -> str:
    """``"two pair"`` and so on: the best five of ``cards``, named."""
    return CATEGORIES[best_rank(cards)[0]]
