"""One Episode of a TextWorld game: the policy types commands, the game answers in text.

The game is generated (or found in the cache) at ``reset()`` from the Episode's seed and the
profile's challenge options, then played by TextWorld's own interpreter. A step's reward is
the points the command earned over the game's maximum, so an Episode's return is the share of
the points it scored, from 0 to 1. The game ends itself when it is won or lost; the
Environment cuts it at the profile's step limit (``truncated``).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from evopolicygym.benchmark import BenchmarkError, StepResult
from evopolicygym_textworld.games import ensure_game

__all__ = ["TextWorldEnvironment", "clean_text", "normalise_command"]

LAST_OBSERVATIONS = 3  # texts kept for an Episode's summary
OBSERVATION_CHARS = 600  # of each of them
INADMISSIBLE_KEPT = 20  # distinct inadmissible commands named in the summary
TEXT_CHARS = 4000  # an observation's text fields are cut to this (the intro is the longest)

_ROOM = re.compile(r"-= (.+?) =-")
# The title banner is lines drawn with these characters only.
_BANNER_LINE = re.compile(r"^[\s_|\\/$<>]*$")


def clean_text(text: str | None) -> str:
    """The game's text without its ASCII-art title and the status line after its prompt."""
    if not text:
        return ""
    lines = text.replace("\r", "").split("\n")
    # The interpreter ends every answer with the prompt '>' and the status bar on one line.
    while lines and (not lines[-1].strip() or lines[-1].lstrip().startswith(">")):
        lines.pop()
    start = 0
    if any("$$" in line for line in lines[:40]):
        while start < len(lines) and _BANNER_LINE.match(lines[start]):
            start += 1
    cleaned = "\n".join(line.rstrip() for line in lines[start:]).strip()
    cleaned = re.sub(r"\n{3,}", "\n\n", cleaned)
    return cleaned[:TEXT_CHARS]


def normalise_command(command: str) -> str:
    return " ".join(command.lower().split())


class TextWorldEnvironment:
    """A game of ``challenge`` with ``options``, made from ``seed``; at most ``max_steps``
    commands; the admissible commands shown to the policy when ``admissible``."""

    def __init__(
        self,
        challenge: str,
        options: dict[str, Any],
        seed: int,
        *,
        max_steps: int,
        admissible: bool,
        cache: Path | None = None,
    ) -> None:
        self.challenge = challenge
        self.options = dict(options)
        self.seed = seed
        self.max_steps = max_steps
        self.admissible = admissible
        self.cache = cache
        self.generation_s = 0.0
        self.generated = False
        self._env: Any = None
        self._closed = False
        self._reset_state()

    def _reset_state(self) -> None:
        self._score = 0
        self._max_score = 1
        self._moves = 0
        self._won = False
        self._lost = False
        self._done = False
        self._legal: list[str] = []
        self._inadmissible: list[str] = []
        self._inadmissible_count = 0
        self._texts: list[str] = []
        self._rooms: set[str] = set()

    # --- the Environment protocol ---------------------------------------------------------

    def reset(self) -> dict[str, Any]:
        if self._closed:
            raise BenchmarkError("reset() after close()")
        import textworld  # heavy: only where an Episode is played

        files = ensure_game(self.challenge, self.options, self.seed, self.cache)
        self.generated, self.generation_s = files.generated, files.seconds
        if self._env is not None:
            self._env.close()
        infos = textworld.EnvInfos(
            admissible_commands=True,
            description=True,
            inventory=True,
            objective=True,
            score=True,
            max_score=True,
            won=True,
            lost=True,
        )
        with warnings.catch_warnings():
            # Jericho warns that it has no per-game tables for a generated game; TextWorld
            # tracks score and moves itself.
            warnings.filterwarnings("ignore", message=".*is not fully supported")
            self._env = textworld.start(str(files.story), request_infos=infos)
        self._reset_state()
        state = self._env.reset()
        self._max_score = max(1, int(state["max_score"] or 1))
        return self._observe(state)

    def step(self, action: str) -> StepResult:
        if self._closed or self._env is None:
            raise BenchmarkError("step() before reset() or after close()")
        if self._done:
            raise BenchmarkError("step() after the game ended")
        command = normalise_command(action)
        if command not in self._legal:
            self._inadmissible_count += 1
            if command not in self._inadmissible and len(self._inadmissible) < INADMISSIBLE_KEPT:
                self._inadmissible.append(command)
        previous = self._score
        state, _, done = self._env.step(command)
        self._moves += 1
        observation = self._observe(state)
        reward = (self._score - previous) / self._max_score
        terminated = bool(done or self._won or self._lost)
        truncated = not terminated and self._moves >= self.max_steps
        self._done = terminated or truncated
        return StepResult(observation, float(reward), terminated, truncated)

    def close(self) -> None:
        self._closed = True
        if self._env is not None:
            self._env.close()
            self._env = None

    def summary(self) -> dict[str, Any]:
        """Why the Episode ended (won, lost, truncated at the step limit, or stopped by the
        policy's failure), the points, the commands the game did not offer, the last texts."""
        if self._won:
            termination = "won"
        elif self._lost:
            termination = "lost"
        elif self._moves >= self.max_steps:
            termination = "truncated"
        else:
            termination = "stopped"
        return {
            "termination": termination,
            "won": self._won,
            "lost": self._lost,
            "points": self._score,
            "max_points": self._max_score,
            "moves": self._moves,
            "rooms_seen": len(self._rooms),
            "inadmissible_commands": self._inadmissible_count,
            "inadmissible": list(self._inadmissible),
            "last_observations": [t[-OBSERVATION_CHARS:] for t in self._texts],
        }

    # --- observations ---------------------------------------------------------------------

    def _observe(self, state: Any) -> dict[str, Any]:
        self._score = int(state["score"] or 0)
        self._won = bool(state["won"])
        self._lost = bool(state["lost"])
        self._legal = [normalise_command(c) for c in state["admissible_commands"] or ()]
        text = clean_text(state.feedback)
        description = clean_text(state["description"])
        self._rooms.update(_ROOM.findall(description))
        self._texts = [*self._texts, text][-LAST_OBSERVATIONS:]
        observation: dict[str, Any] = {
            "text": text,
            "description": description,
            "inventory": clean_text(state["inventory"]),
            "objective": clean_text(state["objective"]),
            "score": self._score,
            "max_score": self._max_score,
            "moves": self._moves,
        }
        if self.admissible:
            observation["admissible_commands"] = list(self._legal)
        return observation
