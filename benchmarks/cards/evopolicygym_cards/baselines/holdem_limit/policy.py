"""Heads-up limit Hold'em baseline: bet by hand strength, call when the pot pays for it.

Strength is a number in [0, 1]. Before the flop, from the two private cards (pairs, high
cards, suited and connected cards score higher). After it, from the best five cards the
private cards make with the board: what the board alone makes counts for nothing, a pair
counts more the higher it is against the board, two pair and better are strong, and a
four-card flush or open-ended straight draw adds DRAW before the river. Raise from
RAISE_AT up; with nothing to call, check; facing a bet, call from CALL_AT up or when the
price (the call's share of the pot after calling) is below the strength times POT_ODDS;
else fold. Only legal actions are played: 0 fold, 1 call, 2 raise.
"""

from itertools import combinations

RANKS = "23456789TJQKA"
RAISE_AT = 0.6
CALL_AT = 0.3
POT_ODDS = 0.7
DRAW = 0.15
SUITED = 0.06
CONNECTED = 0.04
PAIR_BASE = 0.55
TOP_PAIR = 0.15
OVERPAIR = 0.2
HIGH_CARD = 0.25


def rank_five(cards):
    ranks = sorted((RANKS.index(c[0]) for c in cards), reverse=True)
    counts = {}
    for r in ranks:
        counts[r] = counts.get(r, 0) + 1
    groups = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    flush = len({c[1] for c in cards}) == 1
    distinct = sorted(counts, reverse=True)
    high = -1
    if len(distinct) == 5:
        if distinct[0] - distinct[4] == 4:
            high = distinct[0]
        elif distinct == [12, 3, 2, 1, 0]:
            high = 3
    if high >= 0:
        return (8 if flush else 4, high)
    shape = [n for _, n in groups]
    order = tuple(r for r, _ in groups)
    if shape == [4, 1]:
        return (7, *order)
    if shape == [3, 2]:
        return (6, *order)
    if flush:
        return (5, *ranks)
    if shape[0] == 3:
        return (3, *order)
    if shape[:2] == [2, 2]:
        return (2, *order)
    if shape[0] == 2:
        return (1, *order)
    return (0, *ranks)


def category(cards):
    if len(cards) < 5:
        counts = {}
        for c in cards:
            counts[c[0]] = counts.get(c[0], 0) + 1
        most = max(counts.values())
        return 3 if most >= 3 else 1 if most == 2 else 0
    return max(rank_five(list(five)) for five in combinations(cards, 5))[0]


def draws(cards):
    suits = {}
    for c in cards:
        suits[c[1]] = suits.get(c[1], 0) + 1
    if max(suits.values()) == 4:
        return True
    ranks = sorted({RANKS.index(c[0]) for c in cards})
    return any(all(r + k in ranks for k in range(4)) for r in ranks)


def before_flop(cards):
    high, low = sorted((RANKS.index(c[0]) for c in cards), reverse=True)
    if high == low:
        return 0.6 + 0.4 * high / 12
    s = 0.55 * (high + low) / 24 + (0.1 if high == 12 else 0.0)
    if cards[0][1] == cards[1][1]:
        s += SUITED
    if high - low == 1:
        s += CONNECTED
    return s


def after_flop(cards, board):
    mine = category(cards + board)
    top = max(RANKS.index(c[0]) for c in board)
    hole = sorted((RANKS.index(c[0]) for c in cards), reverse=True)
    draw = DRAW if len(board) < 5 and draws(cards + board) else 0.0
    if mine <= category(board):
        return HIGH_CARD * hole[0] / 12 * 0.5 + draw
    if mine == 0:
        return HIGH_CARD * hole[0] / 12 + draw
    if mine == 1:
        board_ranks = {c[0] for c in board}
        paired = [RANKS.index(c[0]) for c in cards if c[0] in board_ranks]
        if not paired:  # a pocket pair
            return PAIR_BASE + (OVERPAIR if hole[0] > top else 0.0) + draw
        return PAIR_BASE + (TOP_PAIR if max(paired) >= top else -0.1) + draw
    return min(0.8 + 0.05 * (mine - 2), 1.0)


class StrengthRule:
    def act(self, observation):
        legal = observation["legal_actions"]
        if not legal:
            return 1
        cards, board = observation["private_cards"], observation["board"]
        s = after_flop(cards, board) if board else before_flop(cards)
        if 2 in legal and s >= RAISE_AT:
            return 2
        to_call = observation["to_call"]
        if to_call == 0 or 0 not in legal:
            return 1
        price = to_call / (observation["pot"] + to_call)
        if s >= CALL_AT or price < s * POT_ODDS:
            return 1
        return 0


def make_policy(context):
    return StrengthRule()
