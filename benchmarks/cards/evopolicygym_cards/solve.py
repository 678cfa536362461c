"""Regenerates ``leduc_equilibrium.json``, the ``equilibrium`` opponent's strategy: CFR+ over
heads-up Leduc poker (OpenSpiel's solver, deterministic), its average policy per information
state, rounded to 4 decimals. Run ``python -m evopolicygym_cards.solve`` (about 5 s)."""

from __future__ import annotations

import json

import pyspiel

from evopolicygym_cards.opponents import EQUILIBRIUM_FILE

ITERATIONS = 300


def solve(iterations: int = ITERATIONS) -> tuple[dict[str, list[float]], float]:
    game = pyspiel.load_game("leduc_poker")
    solver = pyspiel.CFRPlusSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    policy = solver.average_policy()
    table: dict[str, list[float]] = {}

    def walk(state: object) -> None:
        if state.is_terminal():  # type: ignore[attr-defined]
            return
        if state.is_chance_node():  # type: ignore[attr-defined]
            for action, _ in state.chance_outcomes():  # type: ignore[attr-defined]
                walk(state.child(action))  # type: ignore[attr-defined]
            return
        player = state.current_player()  # type: ignore[attr-defined]
        key = state.information_state_string(player)  # type: ignore[attr-defined]
        if key not in table:
            probabilities = [0.0, 0.0, 0.0]
            for action, p in policy.get_state_policy(state):
                probabilities[action] = round(p, 4)
            table[key] = probabilities
        for action in state.legal_actions():  # type: ignore[attr-defined]
            walk(state.child(action))  # type: ignore[attr-defined]

    walk(game.new_initial_state())
    return table, pyspiel.exploitability(game, policy)


def main() -> None:
    table, exploitability = solve()
    EQUILIBRIUM_FILE.write_text(json.dumps(table, sort_keys=True, separators=(",", ":")) + "\n")
    print(f"{len(table)} information states, exploitability {exploitability:.4f}")


if __name__ == "__main__":
    main()
