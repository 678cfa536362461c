"""FrozenLake baseline: a fixed action per cell, chosen by a one-step lookahead.

Each cell's distance to the goal G is its shortest walk around the holes. On
slippery ice a move goes the intended way or to either side, each with
probability 1/3; for every cell the rule picks the action whose possible
landing cells are, on average, closest to the goal, counting a hole as very
far. It looks only one step ahead, so it takes risks a planner would avoid.
"""

from collections import deque

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3
MOVES = {LEFT: (0, -1), DOWN: (1, 0), RIGHT: (0, 1), UP: (-1, 0)}
SIDEWAYS = {LEFT: (DOWN, UP), DOWN: (LEFT, RIGHT), RIGHT: (DOWN, UP), UP: (LEFT, RIGHT)}
FAR = 100
MAPS = {
    "4x4": ["SFFF", "FHFH", "FFFH", "HFFG"],
    "8x8": [
        "SFFFFFFF",
        "FFFFFFFF",
        "FFFHFFFF",
        "FFFFFHFF",
        "FFFHFFFF",
        "FHHFFFHF",
        "FHFFHFHF",
        "FFFHFFFG",
    ],
}


def cell_table(rows, slippery):
    n_rows, n_cols = len(rows), len(rows[0])

    def move(r, c, action):
        dr, dc = MOVES[action]
        return min(max(r + dr, 0), n_rows - 1), min(max(c + dc, 0), n_cols - 1)

    goal = next((r, c) for r in range(n_rows) for c in range(n_cols) if rows[r][c] == "G")
    distance = {goal: 0}
    queue = deque([goal])
    while queue:
        r, c = queue.popleft()
        for action in MOVES:
            cell = move(r, c, action)
            if cell not in distance and rows[cell[0]][cell[1]] != "H":
                distance[cell] = distance[(r, c)] + 1
                queue.append(cell)

    table = []
    for r in range(n_rows):
        for c in range(n_cols):

            def expected(action, r=r, c=c):
                outcomes = (action, *SIDEWAYS[action]) if slippery else (action,)
                return sum(distance.get(move(r, c, m), FAR) for m in outcomes) / len(outcomes)

            table.append(min((DOWN, RIGHT, LEFT, UP), key=expected))
    return table


class CellTable:
    def __init__(self, rows, slippery):
        self.table = cell_table(rows, slippery)

    def act(self, observation):
        return self.table[int(observation)]


def make_policy(context):
    parameters = context.environment_parameters
    rows = context.metadata.get("map") or MAPS[parameters.get("map_name", "4x4")]
    return CellTable(rows, parameters.get("is_slippery", True))
