"""NetHack and MiniHack baseline: a rule bot that replans on the map every step.

It reads the glyphs (what each map cell is), blstats (position, hit points, hunger, turn,
condition), the message and the inventory, and looks actions up by the key NetHack receives
(the spec's ``keys``). Each step it takes the first rule that applies:

- answer the game's question (continue a multi-key command: eat, apply, zap, pray...);
- pray when hit points are low or it is weak from hunger (at most once per 1000 turns);
- eat food from its inventory when hungry (in MiniHack's Eat task, as soon as it has some);
- attack an adjacent monster; in MiniHack, zap a wand at a monster in line;
- cross lava: quaff a potion, put on a ring, wear boots, or zap/apply toward the lava;
- walk (breadth-first search) to the stairs down and go down; in MiniHack to an item not yet
  picked up (autopickup takes it), to a locked door to unlock it with a key it holds, or
  behind a boulder to push it into water;
- explore: walk to the nearest cell it has not stood on next to unexplored space;
- otherwise search for hidden passages, and as a last resort move at random.
"""

import random
from collections import deque

PET, INVIS, OBJ, CMAP, EXPLODE = 381, 762, 1906, 2359, 2446
BOULDER = OBJ + 447
STATUE = 5595
# NetHack 3.6's map symbols (offsets from CMAP).
DOORWAY, OPEN_DOORS, CLOSED_DOORS = 12, (13, 14), (15, 16)
ROOM, DARK, CORRIDORS, DOWN, POOL, ICE, LAVA, WATER = 19, 20, (21, 22), 24, 32, 33, 34, 41
WALKABLE = {12, 13, 14, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 33, 35, 36}
TRAPS = range(42, 65)
X, Y, HP, MAX_HP, DEPTH, TURN, HUNGER, DLEVEL, CONDITION = 0, 1, 10, 11, 12, 20, 21, 24, 25
LEVITATING = 1024
FOOD, WAND, POTION, RING, ARMOR, TOOL = 7, 11, 8, 4, 3, 6
ESC, MORE = 27, 13
DIRECTIONS = {
    (0, -1): "k",
    (1, 0): "l",
    (0, 1): "j",
    (-1, 0): "h",
    (1, -1): "u",
    (1, 1): "n",
    (-1, 1): "b",
    (-1, -1): "y",
}


class Bot:
    def __init__(self, keys, env_id, seed):
        self.index = {}
        for i, key in enumerate(keys):
            self.index.setdefault(int(key), i)
        self.full_game = env_id.startswith("NetHack")
        self.eat_task = "Eat" in env_id
        self.rng = random.Random(seed)
        self.queue = []  # keys still to send for the command under way
        self.level = None
        self.visited = set()
        self.stairs = set()  # where the stairs down are on this level (the hero hides them)
        self.searched = {}
        self.failed = {}  # cell -> step until which it is not a target (unreachable, peaceful)
        self.last_pray = -1000
        self.steps = 0
        self.last = None  # (position, target) of the last move
        self.used = set()  # inventory letters already quaffed / worn / put on
        self.failed_push = None  # the boulder the last move pushed
        self.moved = None  # (target cell, direction key) of the last move or attack

    def key(self, char):
        code = char if isinstance(char, int) else ord(char)
        return self.index.get(code)

    def send(self, *chars):
        """Send the first key now and queue the rest, if the action set has them all."""
        actions = [self.key(c) for c in chars]
        if any(a is None for a in actions):
            return None
        self.queue = actions[1:]
        return actions[0]

    def act(self, obs):
        self.steps += 1
        message = obs["message"]
        stats = obs["blstats"].tolist()
        answer = self.answer(message, obs["inventory"])
        self.moved = None
        if answer is not None:
            return answer
        if self.queue:
            if "?" in message or "[" in message or "direction" in message:
                return self.queue.pop(0)
            self.queue = []
        glyphs = obs["glyphs"].tolist()
        here = (stats[X], stats[Y])
        level = (stats[DLEVEL], stats[DEPTH])
        if level != self.level:
            self.level, self.visited, self.searched, self.failed = level, set(), {}, {}
            self.stairs = set()
        self.visited.add(here)
        if self.last is not None and self.last[0] == here and self.last[1] is not None:
            self.failed[self.last[1]] = self.steps + 40  # the move did nothing: avoid a while
            if self.failed_push is not None:
                self.failed[self.failed_push] = self.steps + 40
        self.failed_push = None
        self.last = None
        inventory = obs["inventory"]
        for rule in (self.survive, self.fight, self.use_items):
            action = rule(glyphs, stats, here, inventory)
            if action is not None:
                return action
        action = self.navigate(glyphs, stats, here, inventory)
        if action is not None:
            return action
        return self.wander(here)

    def answer(self, message, inventory):
        moved = self.moved
        if "This door is locked" in message and moved is not None:
            self.failed.pop(moved[0], None)
            for item in inventory:
                if item["class"] == TOOL and ("key" in item["text"] or "lock pick" in item["text"]):
                    action = self.send("a", item["letter"], moved[1])
                    if action is not None:
                        return action
            if self.key(4) is not None:
                return self.send(4, moved[1])  # kick it open
        if "Really attack" in message:
            if moved is not None:
                self.failed[moved[0]] = self.steps + 100  # a peaceful monster: leave it be
            return self.key(ESC) if self.key(ESC) is not None else self.key("n")
        if "eat it?" in message or "eat one?" in message:
            # Floor food: MiniHack's Eat task wants it; in the game it may be a bad corpse.
            return self.key("n" if self.full_game else "y")
        if "Unlock it?" in message:
            return self.key("y")
        if "Lock it?" in message or "Improvise?" in message:
            return self.key("n")
        if "Right or Left" in message:
            return self.key("r")
        if "--More--" in message:
            return self.key(MORE)
        if not self.full_game and ("You see here" in message or "objects here" in message):
            return self.key(",")  # MiniHack tasks with autopickup off
        return None

    def survive(self, glyphs, stats, here, inventory):
        turn = stats[TURN]
        low = stats[HP] < max(6, stats[MAX_HP] // 7)
        weak = stats[HUNGER] >= 3
        if (low or weak) and turn - self.last_pray > 1000 and turn > 200:
            action = self.send(240, "y")  # #pray, and yes, we are sure
            if action is not None:
                self.last_pray = turn
                return action
        food = [i for i in inventory if i["class"] == FOOD and "corpse" not in i["text"]]
        if food and (stats[HUNGER] >= 2 or self.eat_task):
            return self.send("e", food[0]["letter"])
        return None

    def fight(self, glyphs, stats, here, inventory):
        x, y = here
        for (dx, dy), key in DIRECTIONS.items():
            cell = (x + dx, y + dy)
            if self.failed.get(cell, 0) > self.steps or not inside(cell):
                continue
            glyph = glyphs[cell[1]][cell[0]]
            if glyph < PET or glyph == INVIS:
                if not self.diagonal_ok(glyphs, here, cell):
                    continue
                self.moved = (cell, key)
                return self.key(key)
        if self.full_game:
            return None
        wands = [i for i in inventory if i["class"] == WAND]
        if wands:
            for (dx, dy), key in DIRECTIONS.items():
                for k in range(1, 14):
                    cell = (x + dx * k, y + dy * k)
                    if not inside(cell):
                        break
                    glyph = glyphs[cell[1]][cell[0]]
                    if glyph < PET:
                        return self.send("z", wands[0]["letter"], key)
                    if not passable(glyph) and glyph - CMAP not in (LAVA, WATER, POOL):
                        break
        return None

    def use_items(self, glyphs, stats, here, inventory):
        """Cross lava (MiniHack LavaCross): levitate, or freeze the lava ahead."""
        if self.full_game or stats[CONDITION] & LEVITATING:
            return None
        lava = [
            (x, y) for y, row in enumerate(glyphs) for x, g in enumerate(row) if g - CMAP == LAVA
        ]
        if not lava:
            return None
        for item in inventory:
            letter, text, kind = item["letter"], item["text"], item["class"]
            if letter in self.used:
                continue
            if kind == POTION:
                self.used.add(letter)
                return self.send("q", letter)
            if kind == RING and "being worn" not in text and "hand)" not in text:
                self.used.add(letter)
                return self.send("P", letter)
            if kind == ARMOR and "boots" in text and "being worn" not in text:
                self.used.add(letter)
                return self.send("W", letter)
            if kind in (WAND, TOOL) and (kind == WAND or "horn" in text):
                nearest = min(lava, key=lambda c: abs(c[0] - here[0]) + abs(c[1] - here[1]))
                if nearest[1] == here[1] and abs(nearest[0] - here[0]) <= 6:
                    direction = DIRECTIONS[(1 if nearest[0] > here[0] else -1, 0)]
                    return self.send("z" if kind == WAND else "a", letter, direction)
        return None

    def navigate(self, glyphs, stats, here, inventory):
        levitating = bool(stats[CONDITION] & LEVITATING)
        cells = self.cells(glyphs, levitating)
        self.stairs.update(cells["stairs"])
        if here in self.stairs and self.full_game:
            return self.key(">")
        first, distance = self.bfs(glyphs, here, cells)

        def goto(cell):
            step = first.get(cell)
            if step is None or step == here:
                return None
            self.last = (here, step)
            key = DIRECTIONS[(step[0] - here[0], step[1] - here[1])]
            self.moved = (step, key)
            return self.key(key)

        def nearest(targets):
            found = [t for t in targets if t in first and self.failed.get(t, 0) <= self.steps]
            return min(found, key=lambda t: distance[t]) if found else None

        stairs = nearest(self.stairs)
        if stairs is not None:
            return goto(stairs)
        if not self.full_game:
            item = nearest([c for c in cells["items"] if c not in self.visited])
            if item is not None:
                return goto(item)
            action = self.doors_and_boulders(glyphs, here, cells, first, distance, inventory)
            if action is not None:
                return action
        door = nearest(cells["doors"])
        if door is not None:
            return goto(door)
        frontier = nearest(
            [c for c in cells["walk"] if c not in self.visited and near_unknown(glyphs, c)]
        )
        if frontier is not None:
            return goto(frontier)
        return self.search(here, first, distance, goto)

    def doors_and_boulders(self, glyphs, here, cells, first, distance, inventory):
        # Push a boulder along a straight free line into water (MiniHack River).
        best = None
        for boulder in cells["boulders"]:
            if self.failed.get(boulder, 0) > self.steps:
                continue
            for (dx, dy), key in DIRECTIONS.items():
                behind = (boulder[0] - dx, boulder[1] - dy)
                if behind != here and behind not in first:
                    continue
                for k in range(1, 20):
                    cell = (boulder[0] + dx * k, boulder[1] + dy * k)
                    if not inside(cell):
                        break
                    glyph = glyphs[cell[1]][cell[0]]
                    if glyph - CMAP in (WATER, POOL):
                        cost = (0 if behind == here else distance[behind]) + k
                        if best is None or cost < best[0]:
                            best = (cost, behind, key)
                        break
                    if not passable(glyph) or glyph == BOULDER:
                        break
        if best is not None:
            _, behind, key = best
            dx, dy = next(d for d, k in DIRECTIONS.items() if k == key)
            if behind == here:
                self.last = (here, (here[0] + 2 * dx, here[1] + 2 * dy))
                self.failed_push = (here[0] + dx, here[1] + dy)
                return self.key(key)
            step = first[behind]
            return self.key(DIRECTIONS[(step[0] - here[0], step[1] - here[1])])
        return None

    def search(self, here, first, distance, goto):
        if self.key("s") is None:
            return None
        if self.searched.get(here, 0) < 12:
            self.searched[here] = self.searched.get(here, 0) + 1
            return self.key("s")
        spots = [c for c in first if self.searched.get(c, 0) < 12 and c != here]
        if not spots:
            self.searched = {}
            return self.key("s")
        target = min(spots, key=lambda c: (distance[c] + 3 * self.searched.get(c, 0), c))
        return goto(target)

    def wander(self, here):
        keys = list(DIRECTIONS.values())
        return self.key(self.rng.choice(keys))

    def cells(self, glyphs, levitating):
        found = {"walk": [], "stairs": [], "items": [], "doors": [], "boulders": []}
        for y, row in enumerate(glyphs):
            for x, glyph in enumerate(row):
                symbol = glyph - CMAP
                if symbol == DOWN:
                    found["stairs"].append((x, y))
                elif symbol in CLOSED_DOORS:
                    found["doors"].append((x, y))
                elif glyph == BOULDER:
                    found["boulders"].append((x, y))
                elif OBJ <= glyph < CMAP:
                    found["items"].append((x, y))
                if passable(glyph) or (levitating and symbol in (LAVA, WATER, POOL)):
                    found["walk"].append((x, y))
        found["passable"] = set(found["walk"])
        return found

    def bfs(self, glyphs, start, cells):
        """First step and distance to every reachable cell (closed doors and monsters end a
        path: walking into them opens or attacks)."""
        passable_cells = cells["passable"]
        first = {start: start}
        distance = {start: 0}
        queue = deque([start])
        while queue:
            cell = queue.popleft()
            glyph = glyphs[cell[1]][cell[0]]
            if cell != start and (glyph < PET or glyph - CMAP in CLOSED_DOORS):
                continue
            for dx, dy in DIRECTIONS:
                nxt = (cell[0] + dx, cell[1] + dy)
                if nxt in first or not inside(nxt) or self.failed.get(nxt, 0) > self.steps:
                    continue
                g = glyphs[nxt[1]][nxt[0]]
                if nxt not in passable_cells and not (g - CMAP in CLOSED_DOORS and not (dx and dy)):
                    continue
                if dx and dy and not self.diagonal_ok(glyphs, cell, nxt):
                    continue
                first[nxt] = nxt if cell == start else first[cell]
                distance[nxt] = distance[cell] + 1
                queue.append(nxt)
        return first, distance

    @staticmethod
    def diagonal_ok(glyphs, a, b):
        if a[0] == b[0] or a[1] == b[1]:
            return True
        doors = OPEN_DOORS + CLOSED_DOORS
        return glyphs[a[1]][a[0]] - CMAP not in doors and glyphs[b[1]][b[0]] - CMAP not in doors


def inside(cell):
    return 0 <= cell[0] < 79 and 0 <= cell[1] < 21


def passable(glyph):
    if glyph < CMAP:
        return glyph != BOULDER and glyph < STATUE
    if glyph < EXPLODE:
        symbol = glyph - CMAP
        return symbol in WALKABLE
    return False


def near_unknown(glyphs, cell):
    for dx, dy in DIRECTIONS:
        x, y = cell[0] + dx, cell[1] + dy
        if inside((x, y)) and glyphs[y][x] == CMAP:
            return True
    return False


def make_policy(context):
    metadata = context.metadata
    return Bot(metadata.get("keys", []), str(metadata.get("env_id", "")), context.policy_seed)
