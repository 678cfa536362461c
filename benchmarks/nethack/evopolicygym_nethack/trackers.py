"""The domain Feedback of NetHack and MiniHack Episodes: why an Episode ended and what the
hero did (score, depth, turns, cause of death, the last messages and screens)."""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium
import numpy as np

from evopolicygym.benchmark import EpisodeEnd, EpisodeTracker, StepResult

__all__ = ["MiniHackTracker", "NetHackTracker", "end_status"]

# NLE's StepStatus.
ABORTED, RUNNING, DEATH, TASK_SUCCESSFUL = -1, 0, 1, 2
# NetHack's end.c, in ``how_done`` order.
HOW_DONE = (
    "died",
    "choked",
    "poisoned",
    "starved",
    "drowned",
    "burned",
    "dissolved",
    "crushed",
    "stoned",
    "slimed",
    "genocided",
    "panicked",
    "tricked",
    "quit",
    "escaped",
    "ascended",
)
SCREENS = 3  # terminal screens kept for the Feedback's replay
MESSAGES = 5
SCORE, HP, MAX_HP, DEPTH, XL, TURN, HUNGER = 9, 10, 11, 12, 18, 20, 21
HUNGER_STATES = ("satiated", "not hungry", "hungry", "weak", "fainting", "fainted", "starved")


def end_status(end: EpisodeEnd) -> int:
    """NLE's StepStatus of the last step (RUNNING before any)."""
    status = end.info.get("end_status", RUNNING)
    return int(status) if status is not None else RUNNING


def _screen(tty: np.ndarray[Any, Any]) -> str:
    return "\n".join(bytes(row).decode("latin-1").rstrip() for row in tty).rstrip()


class MiniHackTracker(EpisodeTracker):
    """Goal reached, died, steps and the final message of a MiniHack Episode."""

    def __init__(self) -> None:
        self.message = ""

    def on_step(
        self,
        env: gymnasium.Env[Any, Any],
        t: int,
        action: Any,
        result: StepResult,
        info: dict[str, Any],
    ) -> None:
        message = result.observation["message"]
        if message:
            self.message = message

    def termination(self, end: EpisodeEnd) -> str:
        status = end_status(end)
        if status == TASK_SUCCESSFUL:
            return "reached_goal"
        if status == DEATH:
            return "died"
        if end.truncated or status == ABORTED:
            return "truncated"
        return "terminated" if end.terminated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        return {
            "goal_reached": end_status(end) == TASK_SUCCESSFUL,
            "died": end_status(end) == DEATH,
            "steps": end.steps,
            "final_message": self.message[:200],
        }


class NetHackTracker(EpisodeTracker):
    """Score, depth, turns, experience level, hunger and cause of death of a NetHack game,
    its last messages and a replay of its last terminal screens (24 lines each)."""

    def __init__(self) -> None:
        self.blstats: np.ndarray[Any, Any] | None = None
        self.max_depth = 1
        self.messages: deque[str] = deque(maxlen=MESSAGES)
        self.screens: deque[np.ndarray[Any, Any]] = deque(maxlen=SCREENS)

    def _see(self, observation: dict[str, Any]) -> None:
        blstats = observation["blstats"]
        # The screens after the game ends (tombstone, scores) zero the bottom lines.
        if int(blstats[MAX_HP]) > 0:
            self.blstats = blstats.copy()
            self.max_depth = max(self.max_depth, int(blstats[DEPTH]))
        message = observation["message"]
        if message and (not self.messages or self.messages[-1] != message):
            self.messages.append(message[:160])
        self.screens.append(observation["tty_chars"].copy())

    def on_reset(
        self, env: gymnasium.Env[Any, Any], observation: Any, info: dict[str, Any]
    ) -> None:
        self._see(observation)

    def on_step(
        self,
        env: gymnasium.Env[Any, Any],
        t: int,
        action: Any,
        result: StepResult,
        info: dict[str, Any],
    ) -> None:
        self._see(result.observation)

    def termination(self, end: EpisodeEnd) -> str:
        status = end_status(end)
        if status == DEATH:
            return "died"
        if end.truncated or status == ABORTED:
            return "truncated"
        return "terminated" if end.terminated else "stopped"

    def summary(self, env: gymnasium.Env[Any, Any], end: EpisodeEnd) -> dict[str, Any]:
        stats = self.blstats
        died = end_status(end) == DEATH
        cause = None
        if died:
            how = int(env.unwrapped.nethack.how_done())  # type: ignore[attr-defined]
            cause = HOW_DONE[how] if 0 <= how < len(HOW_DONE) else f"how_done {how}"
            killer = self._killer()
            if killer:
                cause = f"{cause}: {killer}"
        fields: dict[str, Any] = {
            "score": None if stats is None else int(stats[SCORE]),
            "depth": None if stats is None else int(stats[DEPTH]),
            "max_depth": self.max_depth,
            "turns": None if stats is None else int(stats[TURN]),
            "experience_level": None if stats is None else int(stats[XL]),
            "hitpoints": None if stats is None else int(stats[HP]),
            "hunger": None if stats is None else HUNGER_STATES[min(int(stats[HUNGER]), 6)],
            "died": died,
            "cause_of_death": cause,
            "last_messages": list(self.messages),
            "last_screens": [_screen(s) for s in self.screens],
        }
        return fields

    def _killer(self) -> str | None:
        """The account of the death on the final screens (the tombstone, or the score list's
        line "... killed by a jackal on level 3"), else the last message that tells it."""
        for screen in reversed(self.screens):
            lines = [bytes(row).decode("latin-1").strip() for row in screen]
            for i, line in enumerate(lines):
                if "killed by" in line or "Agent-" in line:
                    rest = " ".join(x for x in lines[i : i + 3] if x)
                    start = rest.find("Agent-")
                    text = rest[rest.find(" ", start) + 1 :] if start >= 0 else rest
                    return " ".join(text.split())[:120]
        for message in reversed(self.messages):
            if "die" in message or "killed" in message:
                return message[:120]
        return None
