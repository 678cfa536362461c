"""Crafter baseline: a rule bot that maps what it sees and climbs the tech tree.

It keeps a map of every cell it has seen, in coordinates relative to where it started: the
player acts before any creature moves, so a move succeeds exactly when the cell ahead shows
grass, sand or path and no creature, and the bot knows where it stands without being told.
Each step it picks the first rule that applies:

1. asleep: wait; a zombie or skeleton next to it: face it and strike;
2. low energy: block the cell ahead with stone if it can, and sleep;
3. thirsty: walk to the nearest water and drink; hungry: hunt the nearest cow;
4. the tech tree, in order: wood, a table (placed where it is, or the nearest one known),
   wood pickaxe and sword, stone, a stone placed, stone pickaxe and sword, coal, a furnace
   beside a table, iron, iron pickaxe and sword, diamonds; saplings from grass and planted;
5. explore: walk to the nearest seen cell that borders unseen ones.

Walking plans shortest paths over the mapped cells and never onto lava. It is stdlib-only.
"""

import random
from collections import deque

NOOP, DO, SLEEP = 0, 5, 6
PLACE_STONE, PLACE_TABLE, PLACE_FURNACE, PLACE_PLANT = 7, 8, 9, 10
MAKE = {
    "wood_pickaxe": 11,
    "stone_pickaxe": 12,
    "iron_pickaxe": 13,
    "wood_sword": 14,
    "stone_sword": 15,
    "iron_sword": 16,
}
# Semantic ids (the Benchmark's metadata.semantic_ids).
NONE, WATER, GRASS, STONE, PATH, SAND, TREE, LAVA = 0, 1, 2, 3, 4, 5, 6, 7
COAL, IRON, DIAMOND, TABLE, FURNACE = 8, 9, 10, 11, 12
PLAYER, COW, ZOMBIE, SKELETON, ARROW, PLANT = 13, 14, 15, 16, 17, 18
WALKABLE = (GRASS, SAND, PATH)
DIRECTIONS = ((-1, 0), (1, 0), (0, -1), (0, 1))  # left, right, up, down: move action 1 + i
TABLE_WOOD, FURNACE_STONE = 2, 4  # what placing them uses (Crafter's data.yaml)
CENTER_ROW, CENTER_COL = 3, 4  # the player's cell in the 7 x 9 view
NEAR_TABLE = 12  # farther than this (in steps) from every known table: place a new one
MAX_SEARCH = 6000
NIGHT = 0.45  # daylight under which zombies multiply: time to hide
SOLID = (WATER, STONE, TREE, LAVA, COAL, IRON, DIAMOND, TABLE, FURNACE)  # zombies cannot pass
DIGGABLE = (STONE, PATH, GRASS, SAND)
CRAFTS = (  # (tool, what making it uses, whether it needs a furnace too), in order
    ("wood_pickaxe", {"wood": 1}, False),
    ("wood_sword", {"wood": 1}, False),
    ("stone_pickaxe", {"wood": 1, "stone": 1}, False),
    ("stone_sword", {"wood": 1, "stone": 1}, False),
    ("iron_pickaxe", {"wood": 1, "coal": 1, "iron": 1}, True),
    ("iron_sword", {"wood": 1, "coal": 1, "iron": 1}, True),
)


class Bot:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.pos = (0, 0)
        self.cells = {}  # (x, y) -> material id last seen
        self.creatures = {}  # (x, y) -> creature id, as seen this step
        self.route = []  # the exploration path being followed
        self.placed_stone = False
        self.planted = 0
        self.steps = 0
        self.cows = {}  # where cows were seen last, and when (its step count)
        self.facing = (0, 1)
        self.digs = False  # it has a pickaxe: walks may go through stone
        self.shelter = None  # (entrance, direction) of the dead end it digs to spend the night
        self.sealed = False

    # --- what it sees -------------------------------------------------------------------
    def look(self, view):
        px, py = self.pos
        self.creatures = {}
        self.steps += 1
        for at, seen in list(self.cows.items()):
            if self.steps - seen > 60 or self.distance(at) <= 1:
                del self.cows[at]  # cows wander: an old sighting, or one not here now
        for r, row in enumerate(view):
            for c, cell in enumerate(row):
                at = (px + c - CENTER_COL, py + r - CENTER_ROW)
                if cell == NONE:
                    self.cells[at] = LAVA  # outside the world: never walk there
                elif cell <= FURNACE:
                    self.cells[at] = cell
                elif cell != PLAYER:
                    self.creatures[at] = cell
                    if cell == COW:
                        self.cows[at] = self.steps
                    if cell in (PLANT,):
                        self.cells[at] = GRASS
                    else:
                        self.cells.setdefault(at, GRASS)

    def free(self, at):
        return self.cells.get(at) in WALKABLE and at not in self.creatures

    # --- acting -------------------------------------------------------------------------
    def act(self, obs):
        self.look(obs["view"].tolist())
        if obs["sleeping"] and obs["energy"] < 9:
            return NOOP  # the game keeps it asleep whatever it asks
        self.facing = DIRECTIONS[obs["facing"]]
        self.digs = obs["inventory"]["wood_pickaxe"] > 0
        action = self.choose(obs)
        if 1 <= action <= 4:
            dx, dy = DIRECTIONS[action - 1]
            target = (self.pos[0] + dx, self.pos[1] + dy)
            if self.free(target):
                self.pos = target
        return action

    def choose(self, obs):
        inv = obs["inventory"]
        facing = DIRECTIONS[obs["facing"]]
        front = (self.pos[0] + facing[0], self.pos[1] + facing[1])
        foe = self.adjacent((ZOMBIE, SKELETON))
        if foe is not None:
            return self.strike(foe, front)
        night = obs["daylight"] < NIGHT
        fed = min(obs["food"], obs["drink"]) > 3  # else eating and drinking come first
        starving = min(obs["food"], obs["drink"]) <= 1  # leave even a shelter at night
        hurt = obs["health"] <= 4
        if self.sealed and (starving or not self.inside() or not self.intact()):
            self.shelter, self.sealed = None, False
        if self.sealed or (
            fed
            and (
                self.shelter is not None
                or (inv["wood_pickaxe"] and (night or hurt or obs["energy"] < 3))
            )
        ):
            step = self.hide(obs, inv, facing)
            if step is not None:
                return step
        if obs["energy"] < 3 and fed:
            return SLEEP
        if obs["drink"] < 5:
            step = self.toward_material((WATER,), front)
            if step is not None:
                return step
        if obs["food"] < 6:
            cow = self.adjacent((COW,))
            if cow is not None:
                return self.strike(cow, front)
            step = self.toward_cells(list(self.cows), front)
            if step is not None:
                return step
            if obs["food"] < 4:  # cows live on grass: look for more of it
                path = self.search(lambda at: self.cells.get(at) == GRASS and self.unseen(at))
                if path:
                    return self.move_to(path[0])
        step = self.progress(obs, inv, front)
        if step is not None:
            return step
        if obs["drink"] < 9:
            step = self.toward_material((WATER,), front)
            if step is not None:
                return step
        return self.explore()

    def progress(self, obs, inv, front):
        """The next step up the tech tree, or None when there is nothing to do here."""
        wanted = [
            (name, uses, furnace)
            for name, uses, furnace in CRAFTS
            if inv[name] == 0 and all(inv[k] >= v for k, v in uses.items())
        ]
        basic = [name for name, _uses, furnace in wanted if not furnace]
        iron = [name for name, _uses, furnace in wanted if furnace]
        if basic:
            if self.near(TABLE):
                return MAKE[basic[0]]
            step = self.site((TABLE,), front, inv)
            if step is not None:
                return step
        if iron:
            if self.near(TABLE) and self.near(FURNACE):
                return MAKE[iron[0]]
            step = self.site((TABLE, FURNACE), front, inv)
            if step is not None:
                return step
        if inv["sapling"] > 0 and self.cells.get(front) == GRASS and front not in self.creatures:
            self.planted += 1
            return PLACE_PLANT
        if inv["stone"] > 0 and not self.placed_stone and self.free(front):
            self.placed_stone = True
            return PLACE_STONE
        targets = self.wanted_materials(inv)
        if targets:
            step = self.toward_material(targets, front)
            if step is not None:
                return step
        grass_ahead = self.cells.get(front) == GRASS and front not in self.creatures
        if grass_ahead and inv["sapling"] == 0 and self.planted < 2:
            return DO  # saplings come from grass, one time in ten
        return None

    def wanted_materials(self, inv):
        wanted = []
        tools = ("wood_pickaxe", "wood_sword", "stone_pickaxe", "stone_sword")
        wood_need = TABLE_WOOD + sum(1 for t in tools if inv[t] == 0) + 2
        if inv["wood"] < min(9, wood_need):
            wanted.append(TREE)
        if inv["wood_pickaxe"]:
            if inv["stone"] < (FURNACE_STONE + 2 if self.known(FURNACE) is None else 3):
                wanted.append(STONE)
            if inv["coal"] < 2:
                wanted.append(COAL)
        if inv["stone_pickaxe"] and inv["iron"] < 2:
            wanted.append(IRON)
        if inv["iron_pickaxe"]:
            wanted.append(DIAMOND)
        return tuple(wanted)

    def site(self, materials, front, inv):
        """Toward a cell next to every one of ``materials`` (a table, a furnace), or making
        the missing one here when none is near; None when it cannot."""
        path = self.search(lambda at: all(self.near(m, at) for m in materials), NEAR_TABLE)
        if path:
            return self.move_to(path[0])
        if not self.near(TABLE):
            if inv["wood"] >= TABLE_WOOD:
                return self.place(PLACE_TABLE, front)
            return None
        if FURNACE in materials and inv["stone"] >= FURNACE_STONE:
            return self.place(PLACE_FURNACE, front)
        return None

    def place(self, action, front):
        if self.free(front):
            return action
        # Only a move faces a free cell: step into one, then the cell ahead is likely free.
        options = [i for i, d in enumerate(DIRECTIONS) if self.free(self.step_to(d))]
        return 1 + (self.rng.choice(options) if options else self.rng.randrange(4))

    # --- the night ----------------------------------------------------------------------
    def hide(self, obs, inv, facing):
        """Dig a dead end two cells deep (its sides solid), step back into its first cell and
        wall up the entrance with stone; sleep there until morning, then dig out. None when
        there is no such place near (or it is morning)."""
        night = obs["daylight"] < NIGHT
        if self.shelter is None:
            self.shelter = self.find_shelter(inv)
            self.sealed = False
            if self.shelter is None:
                return None
        entrance, (dx, dy) = self.shelter
        first = (entrance[0] + dx, entrance[1] + dy)
        second = (first[0] + dx, first[1] + dy)
        if self.sealed:
            if night or obs["energy"] < 9 or obs["health"] < 7:
                return SLEEP if obs["energy"] < 9 else NOOP
            self.shelter = None  # morning: dig out through the entrance
            self.sealed = False
            if self.pos != first:
                return None
            return DO if facing == (-dx, -dy) else self.move_to(entrance)
        if not night and obs["energy"] >= 3 and obs["health"] > 4:
            self.shelter = None
            return None
        ahead = (self.pos[0] + facing[0], self.pos[1] + facing[1])
        if self.pos == first and facing == (-dx, -dy) and self.cells.get(second) in WALKABLE:
            if self.free(entrance) and inv["stone"] > 0:
                self.sealed = True
                return PLACE_STONE
            self.shelter = None
            return None
        if self.pos in (entrance, first):
            nxt = (self.pos[0] + dx, self.pos[1] + dy)
            if self.cells.get(nxt) == STONE:
                return DO if ahead == nxt else self.move_to(nxt)  # turns toward the stone
            if self.free(nxt):
                return self.move_to(nxt)
            self.shelter = None
            return None
        if self.pos == second:
            return self.move_to(first) if self.free(first) else None
        path = self.search(lambda at: at == entrance, 30)
        if path:
            return self.move_to(path[0])
        self.shelter = None
        return None

    def inside(self):
        """Standing in the first cell of the shelter, as when it was walled up."""
        if self.shelter is None:
            return False
        (x, y), (dx, dy) = self.shelter
        return self.pos == (x + dx, y + dy)

    def intact(self):
        """Every cell around the shelter's two cells is still solid (the entrance too)."""
        (x, y), d = self.shelter
        return self.walled((x, y), d) and self.cells.get((x, y)) in SOLID

    def walled(self, entrance, d):
        first = (entrance[0] + d[0], entrance[1] + d[1])
        second = (first[0] + d[0], first[1] + d[1])
        end = (second[0] + d[0], second[1] + d[1])
        sides = [(c[0] + d[1], c[1] + d[0]) for c in (first, second)]
        sides += [(c[0] - d[1], c[1] - d[0]) for c in (first, second)]
        return all(self.cells.get(c) in SOLID for c in (*sides, end))

    def find_shelter(self, inv):
        """(entrance, direction) of the nearest place to dig a dead end: two cells of stone
        or open ground in a row, solid on both sides and at the far end."""

        def fits(at):
            if not self.free(at) and at != self.pos:
                return None
            for d in DIRECTIONS:
                first = (at[0] + d[0], at[1] + d[1])
                second = (first[0] + d[0], first[1] + d[1])
                cells = (self.cells.get(first), self.cells.get(second))
                if not all(c in DIGGABLE for c in cells) or first in self.creatures:
                    continue
                if STONE not in cells and inv["stone"] == 0:
                    continue  # nothing to wall the entrance with
                if self.walled(at, d):
                    return d
            return None

        if fits(self.pos):
            return self.pos, fits(self.pos)
        path = self.search(lambda at: fits(at) is not None, 30)
        if not path:
            return None
        return path[-1], fits(path[-1])

    # --- where things are ---------------------------------------------------------------
    def adjacent(self, kinds):
        for i, (dx, dy) in enumerate(DIRECTIONS):
            if self.creatures.get((self.pos[0] + dx, self.pos[1] + dy)) in kinds:
                return i
        return None

    def strike(self, direction, front):
        dx, dy = DIRECTIONS[direction]
        if front == (self.pos[0] + dx, self.pos[1] + dy):
            return DO
        return 1 + direction  # the cell is taken: this only turns to face it

    def near(self, material, at=None):
        px, py = self.pos if at is None else at
        return any(
            self.cells.get((px + dx, py + dy)) == material for dx in (-1, 0, 1) for dy in (-1, 0, 1)
        )

    def known(self, material):
        found = [at for at, m in self.cells.items() if m == material]
        return min(found, key=self.distance) if found else None

    def distance(self, at):
        return abs(at[0] - self.pos[0]) + abs(at[1] - self.pos[1])

    # --- walking ------------------------------------------------------------------------
    def toward_material(self, materials, front):
        goals = [at for at, m in self.cells.items() if m in materials]
        return self.toward_cells(goals, front)

    def toward_cells(self, goals, front):
        """The action facing the nearest goal cell from a neighbour of it: a move on the
        way, a turn toward it, or DO when it is ahead. None when none can be reached."""
        if not goals:
            return None
        goals = set(goals)
        if front in goals:
            return DO
        for i, (dx, dy) in enumerate(DIRECTIONS):
            at = (self.pos[0] + dx, self.pos[1] + dy)
            if at in goals and not self.free(at):
                return 1 + i  # blocked: turns to face it
        path = self.search(lambda at: any(n in goals for n in self.neighbours(at)))
        if path:
            return self.move_to(path[0])
        return None

    def neighbours(self, at):
        return [(at[0] + dx, at[1] + dy) for dx, dy in DIRECTIONS]

    def search(self, done, limit=None):
        """The shortest walk (cells after this one) to a cell where ``done`` holds, at most
        ``limit`` steps long."""
        start = self.pos
        came = {start: None}
        queue = deque([(start, 0)])
        while queue and len(came) < MAX_SEARCH:
            at, steps = queue.popleft()
            if limit is not None and steps > limit:
                return None
            if at != start and done(at):
                path = []
                while at != start:
                    path.append(at)
                    at = came[at]
                return path[::-1]
            for n in self.neighbours(at):
                if n not in came and (self.free(n) or (self.digs and self.cells.get(n) == STONE)):
                    came[n] = at
                    queue.append((n, steps + 1))
        return None

    def move_to(self, at):
        """A step to the neighbouring cell ``at``; stone on the way is mined first (a move
        toward it only turns to face it)."""
        dx, dy = at[0] - self.pos[0], at[1] - self.pos[1]
        if self.cells.get(at) == STONE and self.facing == (dx, dy):
            return DO
        return 1 + DIRECTIONS.index((dx, dy))

    def explore(self):
        while self.route and self.route[0] == self.pos:
            self.route.pop(0)
        if (
            self.route
            and self.distance(self.route[0]) == 1
            and (self.free(self.route[0]) or self.cells.get(self.route[0]) == STONE)
        ):
            return self.move_to(self.route[0])
        path = self.search(self.unseen)
        if path:
            self.route = path
            return self.move_to(path[0])
        self.route = []
        options = [i for i, d in enumerate(DIRECTIONS) if self.free(self.step_to(d))]
        return 1 + (self.rng.choice(options) if options else self.rng.randrange(4))

    def unseen(self, at):
        return any(n not in self.cells for n in self.neighbours(at))

    def step_to(self, direction):
        return (self.pos[0] + direction[0], self.pos[1] + direction[1])


def make_policy(context):
    return Bot(context.policy_seed)
