"""MiniGrid baseline: replan every step on the grid with breadth-first search.

The observation is the whole grid (one (type, color, state) triple per cell) plus the
agent's direction and the mission; with the partial view (the agent's own 7x7 cells) it
builds the map as it goes, counting its own steps, and where nothing it knows applies it
walks to look at the nearest cell it has not seen. Each step the policy picks one
subgoal, in this order: the goal square or the mission's object when it can be reached; a
locked door it holds the key to; a ball blocking a door (carried away and dropped where
it blocks nothing); a closed door; the key of a locked door; a box (opened: it may hold a
key). It then takes
the first action of the shortest turn-and-move path to face (or stand on) that subgoal.
It never plans which door to open first, so it opens doors it does not need and carries
keys it drops again: correct but slow, and lost when nothing it knows applies.
"""

import random
from collections import deque

LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE = 0, 1, 2, 3, 4, 5
EMPTY, WALL, FLOOR, DOOR, KEY, BALL, BOX, GOAL, LAVA, AGENT = 1, 2, 3, 4, 5, 6, 7, 8, 9, 10
OPEN, CLOSED, LOCKED = 0, 1, 2
VECTORS = ((1, 0), (0, 1), (-1, 0), (0, -1))  # direction 0 faces +x, then clockwise
COLORS = {"red": 0, "green": 1, "blue": 2, "purple": 3, "yellow": 4, "grey": 5}
TYPES = {"key": KEY, "ball": BALL, "box": BOX}


class Planner:
    def __init__(self, seed, partial=False):
        self.rng = random.Random(seed)
        self.partial = partial  # the agent's own 7x7 view: a map is built as it goes
        self.carrying = None  # (type, color) of what the agent holds, tracked from its actions
        self.last = None  # (action, front cell, what was there), in world coordinates
        self.doors = set()  # every door cell seen, in world coordinates
        self.known = {}  # partial view: world cell -> [type, color, state]
        self.position = (0, 0)  # partial view: where the agent is, counted from its start

    def act(self, observation):
        direction = int(observation["direction"])
        if self.partial:
            cells, agent, origin = self.mapped(observation["image"], direction)
        else:
            cells = observation["image"].tolist()  # cells[x][y] = [type, color, state]
            width, height = len(cells), len(cells[0])
            agent = next(
                (x, y) for x in range(width) for y in range(height) if cells[x][y][0] == AGENT
            )
            origin = (0, 0)
        width, height = len(cells), len(cells[0])
        # The agent hides the cell it stands on: in a doorway, that is an (open) door.
        for x in range(width):
            for y in range(height):
                if cells[x][y][0] == DOOR:
                    self.doors.add((x + origin[0], y + origin[1]))
        if (agent[0] + origin[0], agent[1] + origin[1]) in self.doors:
            cells[agent[0]][agent[1]] = [DOOR, 0, OPEN]
        self.track(cells, origin)
        target = mission_target(str(observation["mission"]))
        action = self.choose(cells, agent, direction, target)
        dx, dy = VECTORS[direction]
        front = (agent[0] + dx, agent[1] + dy)
        self.last = (
            action,
            (front[0] + origin[0], front[1] + origin[1]),
            cells[front[0]][front[1]],
        )
        return action

    def mapped(self, view, direction):
        """The map so far as a grid (unseen cells are walls to the planner), the agent's place
        in it and the grid's origin in world coordinates. The agent sees 7x7 cells ahead of
        it, itself at the bottom middle; a forward step moved it if the cell ahead was open."""
        if self.last is not None and self.last[0] == FORWARD and passable(self.last[2]):
            self.position = self.last[1]
        px, py = self.position
        fx, fy = VECTORS[direction]
        rx, ry = VECTORS[(direction + 1) % 4]
        size = len(view)
        middle = size // 2
        for i in range(size):
            for j in range(size):
                cell = view[i][j].tolist()
                if cell[0] == 0 or (i == middle and j == size - 1):
                    continue  # unseen, or the agent's own cell (it shows what is carried)
                ahead_by, right_by = size - 1 - j, i - middle
                self.known[
                    (px + ahead_by * fx + right_by * rx, py + ahead_by * fy + right_by * ry)
                ] = cell
        xs = [x for x, _ in self.known] + [px]
        ys = [y for _, y in self.known] + [py]
        # One unseen ring around the map, so no walk ever leaves it.
        left, top = min(xs) - 1, min(ys) - 1
        width, height = max(xs) - left + 2, max(ys) - top + 2
        cells = [[[0, 0, 0] for _ in range(height)] for _ in range(width)]
        for (x, y), cell in self.known.items():
            cells[x - left][y - top] = cell
        agent = (px - left, py - top)
        cells[agent[0]][agent[1]] = [AGENT, 0, direction]
        return cells, agent, (left, top)

    def track(self, cells, origin):
        """What the agent carries, from what its last pickup or drop did to the cell ahead."""
        if self.last is None:
            return
        action, (x, y), before = self.last
        now = cells[x - origin[0]][y - origin[1]]
        if action == PICKUP and before[0] in (KEY, BALL, BOX) and now[0] == EMPTY:
            self.carrying = before[:2]
        elif action == DROP and now[0] != EMPTY and self.carrying is not None:
            self.carrying = None

    def choose(self, cells, agent, direction, target):
        start = (agent[0], agent[1], direction)
        locked = {c[1] for col in cells for c in col if c[0] == DOOR and c[2] == LOCKED}
        carried = self.carrying

        def at(kind, color=None, state=None):
            def test(cell):
                return (
                    cell[0] == kind
                    and (color is None or cell[1] == color)
                    and (state is None or cell[2] == state)
                )

            return test

        # The goal square: stand on it.
        if target is None:
            step = search(cells, start, lambda x, y, d: cells[x][y][0] == GOAL, stand=True)
            if step is not None:
                return step
        else:
            step = self.fetch(cells, start, at(*target))
            if step is not None:
                return step
        # Something carried that opens nothing: put it down where it blocks no door.
        if carried is not None and not (carried[0] == KEY and carried[1] in locked):
            return self.drop(cells, start)
        if carried is not None and carried[0] == KEY:
            step = facing(cells, start, at(DOOR, carried[1], LOCKED), TOGGLE)
            if step is not None:
                return step
        step = self.fetch(cells, start, lambda cell, x=None, y=None: False, blocking=True)
        if step is not None:
            return step
        step = facing(cells, start, at(DOOR, state=CLOSED), TOGGLE)
        if step is not None:
            return step
        if not (carried is not None and carried[0] == KEY):
            for color in sorted(locked):
                step = self.fetch(cells, start, at(KEY, color))
                if step is not None:
                    return step
        step = facing(cells, start, at(BOX), TOGGLE)
        if step is not None:
            return step
        # Nothing known applies: look at the nearest cell not seen yet.
        step = search(
            cells, start, lambda x, y, d: cells[ahead(x, y, d)[0]][ahead(x, y, d)[1]][0] == 0
        )
        if step is not None and step != "here":
            return step
        return self.rng.choice((LEFT, RIGHT, FORWARD, FORWARD))

    def fetch(self, cells, start, wanted, blocking=False):
        """Pick up the nearest reachable object that ``wanted`` accepts (or, with
        ``blocking``, a ball in front of a door), putting down what is carried first."""

        def accept(x, y):
            cell = cells[x][y]
            if blocking:
                return cell[0] == BALL and next_to_door(cells, x, y)
            return wanted(cell)

        def reach(x, y, d):
            return accept(*ahead(x, y, d))

        found = search(cells, start, reach)
        if found is None:
            return None
        if self.carrying is not None:
            return self.drop(cells, start, reach)
        return found if found != "here" else PICKUP

    def drop(self, cells, start, keep=None):
        """Go and put down what is carried: where it blocks no door and walls nothing in
        and, with ``keep``, where the object wanted next stays in reach once it lies there;
        in rooms too small for that, anywhere that keeps the wanted object in reach."""
        room = reachable(cells, start[:2])

        def spot(strict):
            def test(x, y, d):
                fx, fy = ahead(x, y, d)
                if cells[fx][fy][0] != EMPTY or (strict and next_to_door(cells, fx, fy)):
                    return False
                before, cells[fx][fy] = cells[fx][fy], [WALL, 0, 0]
                try:
                    if strict and reachable(cells, (x, y)) != room - 1:
                        return False
                    return keep is None or search(cells, (x, y, d), keep) is not None
                finally:
                    cells[fx][fy] = before

            return test

        for strict in (True, False):
            step = search(cells, start, spot(strict))
            if step is not None:
                return DROP if step == "here" else step
        return self.rng.choice((LEFT, RIGHT))


def facing(cells, start, wanted, action):
    step = search(cells, start, lambda x, y, d: wanted(cells[ahead(x, y, d)[0]][ahead(x, y, d)[1]]))
    if step is None:
        return None
    return action if step == "here" else step


def mission_target(mission):
    """(type, color) of the object a 'pick up the <color> <type>' mission names, else None."""
    words = mission.split()
    if len(words) >= 2 and "pick" in words and words[-1] in TYPES and words[-2] in COLORS:
        return TYPES[words[-1]], COLORS[words[-2]]
    return None


def ahead(x, y, d):
    dx, dy = VECTORS[d]
    return x + dx, y + dy


def passable(cell):
    kind = cell[0]
    return kind in (EMPTY, FLOOR, GOAL, AGENT) or (kind == DOOR and cell[2] == OPEN)


def next_to_door(cells, x, y):
    for dx, dy in VECTORS:
        nx, ny = x + dx, y + dy
        if 0 <= nx < len(cells) and 0 <= ny < len(cells[0]) and cells[nx][ny][0] == DOOR:
            return True
    return False


def reachable(cells, start):
    """How many cells the agent can walk to from ``start``."""
    seen = {start}
    queue = deque([start])
    while queue:
        x, y = queue.popleft()
        for dx, dy in VECTORS:
            nxt = (x + dx, y + dy)
            if nxt not in seen and passable(cells[nxt[0]][nxt[1]]):
                seen.add(nxt)
                queue.append(nxt)
    return len(seen)


def search(cells, start, done, stand=False):
    """The first action of a shortest path from ``start`` (x, y, direction) to a state where
    ``done`` holds; "here" when it already holds (for ``stand``: the agent is on the goal,
    which never happens, since reaching it ends the Episode); None when no state does."""
    if done(*start):
        return "here"
    width, height = len(cells), len(cells[0])
    first = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        x, y, d = state
        nx, ny = ahead(x, y, d)
        moves = [((x, y, (d - 1) % 4), LEFT), ((x, y, (d + 1) % 4), RIGHT)]
        if 0 <= nx < width and 0 <= ny < height and passable(cells[nx][ny]):
            moves.append(((nx, ny, d), FORWARD))
        for nxt, action in moves:
            if nxt in first:
                continue
            first[nxt] = first[state] if first[state] is not None else action
            if done(*nxt):
                return first[nxt]
            queue.append(nxt)
    return None


def make_policy(context):
    partial = context.environment_parameters.get("view") == "partial"
    return Planner(context.policy_seed, partial)
