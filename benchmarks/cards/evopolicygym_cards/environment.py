"""One Episode: a match of hands between the policy's seat and a fixed opponent.

The Environment deals every card and plays the opponent itself, so a step is one decision
of the policy; after it the Environment plays on (the opponent's moves, the deals, the next
hands) until the policy is to act again or the match is over. The step's reward is the chips
the policy won or lost in the hands that ended meanwhile (a hand that ended before the
policy's first decision is paid with that decision's reward).

Determinism: hand ``h`` of an Episode is dealt from a deck shuffled with a seed derived from
the Episode's seed and ``h``, and the opponent draws from its own generator seeded the same
way, so the same Episode and the same policy actions give the same match, and two policies
get the same cards in every hand they reach alike. Seats alternate, the policy acting first in
even hands (so it has a decision in the first hand, which a match needs before it can end).
"""

from __future__ import annotations

import random
from typing import Any

from evopolicygym.benchmark import BenchmarkError, InvalidAction, StepResult, derive_seed
from evopolicygym_cards.games import (
    ACTION_LETTERS,
    ACTION_NAMES,
    CALL,
    FOLD,
    CardGame,
    hand_category,
)
from evopolicygym_cards.opponents import choose

__all__ = ["SUMMARY_HANDS", "CardEnvironment", "match_facts"]

SUMMARY_HANDS = 200  # hands kept in an Episode's summary (a match may be longer)


class CardEnvironment:
    """A match of ``hands`` hands of ``game`` against the opponent ``opponent``."""

    def __init__(self, game: CardGame, opponent: str, hands: int, seed: int) -> None:
        self.game = game
        self.opponent = opponent
        self.hands = hands
        self.seed = seed
        self._spiel: Any = None
        self._closed = False
        self._state: Any = None
        self._done = True
        self._history: list[dict[str, Any]] = []
        self._finished: list[dict[str, Any]] = []
        self._chips = 0
        self._pending = 0
        self._hand = -1
        self._seat = 0

    # --- the Environment protocol ---------------------------------------------------------

    def reset(self) -> Any:
        if self._closed:
            raise BenchmarkError("reset() after close()")
        self._spiel = self.game.load()
        self._hand = -1
        self._chips = 0
        self._pending = 0
        self._finished = []
        self._history = []
        self._done = False
        self._next_hand()
        self._play_on()
        if self._done:  # the policy acts first in hand 0, so this is a bug, not a policy's doing
            raise BenchmarkError(
                f"{self.game.name}: the match ended before the policy's first decision"
            )
        return self._observation()

    def step(self, action: Any) -> StepResult:
        if self._closed or self._state is None:
            raise BenchmarkError("step() before reset() or after close()")
        if self._done:
            raise BenchmarkError("step() after the match ended")
        legal = self._state.legal_actions()
        if action not in legal:
            allowed = ", ".join(f"{a} ({ACTION_NAMES[a]})" for a in legal)
            raise InvalidAction(
                f"action {action} ({ACTION_NAMES.get(action, '?')}) is not legal here; "
                f"legal: {allowed}"
            )
        self._apply(action, "me")
        self._play_on()
        reward, self._pending = self._pending, 0
        return StepResult(self._observation(), float(reward), self._done, False)

    def close(self) -> None:
        self._closed = True
        self._state = None

    def summary(self) -> dict[str, Any]:
        """The Episode's public facts, asked once after its last step: why it ended (``won``,
        ``lost`` or ``even`` on chips once the match is over, ``stopped`` before), counts over
        its hands, and every finished hand's summary (the first SUMMARY_HANDS)."""
        if self._done:
            termination = "won" if self._chips > 0 else "lost" if self._chips < 0 else "even"
        else:
            termination = "stopped"
        return {
            "termination": termination,
            **match_facts(self._history),
            "hands": self._history[:SUMMARY_HANDS],
        }

    # --- the match ------------------------------------------------------------------------

    def _next_hand(self) -> None:
        self._hand += 1
        self._seat = (self._hand + self.game.first_to_act) % 2
        self._state = self._spiel.new_initial_state()
        deal = random.Random(derive_seed("cards-deal", self.game.name, self.seed, self._hand))
        self._deck = [action for action, _ in self._state.chance_outcomes()]
        deal.shuffle(self._deck)
        self._rng = random.Random(
            derive_seed("cards-opponent", self.game.name, self.seed, self._hand)
        )
        self._betting: list[list[list[str]]] = []
        self._last_contributions = (0, 0)
        self._last_action = CALL

    def _play_on(self) -> None:
        """Deal and play the opponent until the policy is to act or the match is over."""
        while True:
            state = self._state
            if state.is_terminal():
                self._end_hand()
                if self._hand + 1 >= self.hands:
                    self._done = True
                    return
                self._next_hand()
            elif state.is_chance_node():
                outcomes = {action for action, _ in state.chance_outcomes()}
                card = next((c for c in self._deck if c in outcomes), None)
                if card is None:
                    raise BenchmarkError(
                        f"{self.game.name}: the deck has no card OpenSpiel can deal"
                    )
                self._deck.remove(card)
                state.apply_action(card)
            elif state.current_player() == self._seat:
                return
            else:
                player = state.current_player()
                self._apply(choose(self.opponent, self.game, state, player, self._rng), "opponent")

    def _apply(self, action: int, actor: str) -> None:
        state = self._state
        view = self.game.view(state, state.current_player())
        while len(self._betting) <= view.round:
            self._betting.append([])
        self._betting[view.round].append([actor, ACTION_NAMES[action]])
        self._last_contributions = view.contributions
        self._last_action = action
        state.apply_action(action)

    def _end_hand(self) -> None:
        state = self._state
        seat, other = self._seat, 1 - self._seat
        result = round(state.returns()[seat])
        # A call ends a hand with the stakes matched; a fold leaves them as they were.
        c = self._last_contributions
        pot = c[0] + c[1] if self._last_action == FOLD else 2 * max(c)
        mine = self.game.view(state, seat)
        showdown = all(action != "fold" for round_ in self._betting for _, action in round_)
        summary: dict[str, Any] = {
            "hand": self._hand,
            "seat": seat,
            "my_cards": mine.private,
            "board": mine.board,
            "betting": _betting_string(self._betting),
            "actions": self._betting,
            "pot": pot,
            "result": result,
            "showdown": showdown,
            # Shown only when the hand went to a showdown, where both seats' cards are revealed.
            "opponent_cards": self.game.view(state, other).private if showdown else None,
        }
        if showdown and self.game.name == "holdem_limit":
            summary["my_hand"] = hand_category(mine.private + mine.board)
            summary["opponent_hand"] = hand_category(summary["opponent_cards"] + mine.board)
        self._finished.append(summary)
        self._history.append(summary)
        self._chips += result
        self._pending += result

    def _observation(self) -> dict[str, Any]:
        finished, self._finished = self._finished, []
        if self._done:
            return {
                "game": self.game.name,
                "hand": self.hands,
                "hands": self.hands,
                "done": True,
                "seat": None,
                "private_cards": [],
                "board": [],
                "round": None,
                "betting": [],
                "pot": 0,
                "to_call": 0,
                "my_contribution": 0,
                "opponent_contribution": 0,
                "legal_actions": [],
                "chips": self._chips,
                "finished_hands": finished,
            }
        seat = self._seat
        view = self.game.view(self._state, seat)
        mine, theirs = view.contributions[seat], view.contributions[1 - seat]
        return {
            "game": self.game.name,
            "hand": self._hand,
            "hands": self.hands,
            "done": False,
            "seat": seat,
            "private_cards": view.private,
            "board": view.board,
            "round": view.round,
            "betting": [[list(move) for move in round_] for round_ in self._betting],
            "pot": mine + theirs,
            "to_call": theirs - mine,
            "my_contribution": mine,
            "opponent_contribution": theirs,
            "legal_actions": list(self._state.legal_actions()),
            "chips": self._chips,
            "finished_hands": finished,
        }


def match_facts(hands: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts over finished hands' summaries: the Episode's domain fields."""

    def folded(hand: dict[str, Any], actor: str) -> bool:
        return any(move == [actor, "fold"] for round_ in hand["actions"] for move in round_)

    chips = sum(h["result"] for h in hands)
    return {
        "chips": chips,
        "won": chips > 0,
        "hands_played": len(hands),
        "hands_won": sum(1 for h in hands if h["result"] > 0),
        "hands_lost": sum(1 for h in hands if h["result"] < 0),
        "showdowns": sum(1 for h in hands if h["showdown"]),
        "my_folds": sum(1 for h in hands if folded(h, "me")),
        "opponent_folds": sum(1 for h in hands if folded(h, "opponent")),
    }


def _betting_string(betting: list[list[list[str]]]) -> str:
    """``"rc/rf"``: one letter per action (r raise, c call or check, f fold), rounds by ``/``."""
    letters = {name: ACTION_LETTERS[action] for action, name in ACTION_NAMES.items()}
    return "/".join("".join(letters[name] for _, name in round_) for round_ in betting)
