"""Leduc poker baseline: bet by hand strength, call when the pot pays for it.

A hand's strength is a number in [0, 1]: before the board card, by the private card's rank;
after it, a pair with the board is the nuts, else by rank (a king still beats most hands).
Raise from RAISE_AT up; with nothing to call, check (or bet from PROBE_AT up after the
board); facing a bet, call from CALL_AT up or when the price (the share of the pot after
calling that the call is) is below the strength times POT_ODDS; else fold. Only legal
actions are played: 0 fold, 1 call, 2 raise.
"""

RAISE_AT = 0.8
CALL_AT = 0.45
POT_ODDS = 0.6
BEFORE_BOARD = {"J": 0.25, "Q": 0.55, "K": 0.9}
UNPAIRED = {"J": 0.05, "Q": 0.3, "K": 0.6}
PAIRED = 1.0
# With nothing to call after the board card, bet from PROBE_AT up; above 1 (the most a
# strength can be) it never does.
PROBE_AT = 1.1


def strength(observation):
    card = observation["private_cards"][0][0]
    board = observation["board"]
    if not board:
        return BEFORE_BOARD[card]
    if board[0][0] == card:
        return PAIRED
    return UNPAIRED[card]


class StrengthRule:
    def act(self, observation):
        legal = observation["legal_actions"]
        if not legal:
            return 1
        s = strength(observation)
        if 2 in legal and s >= RAISE_AT:
            return 2
        to_call = observation["to_call"]
        if to_call == 0 and 2 in legal and observation["board"] and s >= PROBE_AT:
            return 2
        if to_call == 0 or 0 not in legal:
            return 1
        price = to_call / (observation["pot"] + to_call)
        if s >= CALL_AT or price < s * POT_ODDS:
            return 1
        return 0


def make_policy(context):
    return StrengthRule()
