"""TextWorld games generated locally from a seed, and cached by what they are made from.

A game is made by one of TextWorld's challenge generators (``tw-coin_collector``,
``tw-treasure_hunter``, ``tw-cooking``) and compiled with the Inform 7 compiler bundled in
the TextWorld wheel: nothing is downloaded. The cache is content-addressed: a game's
directory is named by a digest of (TextWorld's version, the challenge, its options, the
seed), so a second use of the same game is a lookup, and two versions never share a game.
The directory is ``EVOPOLICY_TEXTWORLD_CACHE`` or, by default, ``evopolicygym/textworld``
under the user's cache directory (``XDG_CACHE_HOME``, else ``~/.cache``).

Generation runs in a child interpreter with a fixed ``PYTHONHASHSEED``: TextWorld's cooking
generator iterates over sets while writing the game, so its output depends on the hash seed;
pinned, the same inputs give the same bytes in any process. The compiler stamps the day into
the story file's header (its serial number); that is overwritten with zeros, so the bytes do
not depend on the day either. A game is written into a temporary directory beside its final
place and renamed there in one step: concurrent Episodes that make the same game race
harmlessly (the first rename wins; the others drop their copy).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

__all__ = [
    "CACHE_ENV",
    "CHALLENGES",
    "GAME_FILE",
    "GameFiles",
    "cache_dir",
    "cache_key",
    "ensure_game",
    "textworld_version",
]

CACHE_ENV = "EVOPOLICY_TEXTWORLD_CACHE"
CHALLENGES = ("tw-coin_collector", "tw-treasure_hunter", "tw-cooking")
GAME_FILE = "game.z8"
GAME_JSON = "game.json"
_FORMAT = 1  # bump when what is stored for a key changes
_SERIAL = slice(0x12, 0x18)  # the Z-machine header's six-character serial number (a date)
_GENERATION_TIMEOUT_S = 600.0


class GameFiles:
    """A game in the cache: its story file, its description (TextWorld's game.json) and
    whether this call generated it (False: it was already there)."""

    def __init__(self, directory: Path, generated: bool, seconds: float) -> None:
        self.directory = directory
        self.story = directory / GAME_FILE
        self.description = directory / GAME_JSON
        self.generated = generated
        self.seconds = seconds


def textworld_version() -> str:
    return version("textworld")


def cache_dir() -> Path:
    """Where games are kept: ``EVOPOLICY_TEXTWORLD_CACHE``, else the user's cache directory."""
    given = os.environ.get(CACHE_ENV)
    if given:
        return Path(given).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evopolicygym" / "textworld"


def cache_key(challenge: str, options: dict[str, Any], seed: int) -> str:
    """The hex digest naming a game: TextWorld's version, the challenge, options and seed."""
    material = {
        "format": _FORMAT,
        "textworld": textworld_version(),
        "challenge": challenge,
        "options": options,
        "seed": seed,
    }
    raw = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(b"evopolicygym:textworld-game:v1\x00" + raw).hexdigest()


def ensure_game(
    challenge: str, options: dict[str, Any], seed: int, root: Path | None = None
) -> GameFiles:
    """The cached game for (challenge, options, seed), generated first if it is missing."""
    if challenge not in CHALLENGES:
        raise ValueError(f"unknown TextWorld challenge {challenge!r}")
    root = cache_dir() if root is None else root
    final = root / cache_key(challenge, options, seed)
    if (final / GAME_FILE).is_file() and (final / GAME_JSON).is_file():
        return GameFiles(final, False, 0.0)
    started = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".making-", dir=root))
    try:
        _generate(challenge, options, seed, work)
        try:
            os.rename(work, final)
        except OSError:
            # Another process put the same game there first (a non-empty directory cannot be
            # renamed over): use theirs, which has the same content.
            if not (final / GAME_FILE).is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return GameFiles(final, True, time.monotonic() - started)


def _generate(challenge: str, options: dict[str, Any], seed: int, out: Path) -> None:
    arguments = json.dumps({"challenge": challenge, "options": options, "seed": seed})
    done = subprocess.run(
        [sys.executable, "-m", "evopolicygym_textworld.games", arguments, str(out)],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        capture_output=True,
        text=True,
        timeout=_GENERATION_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0 or not (out / GAME_FILE).is_file():
        tail = (done.stderr or done.stdout)[-2000:]
        raise RuntimeError(f"TextWorld could not generate {challenge} seed {seed}: {tail}")


def _make(challenge: str, options: dict[str, Any], seed: int, out: Path) -> None:
    """In the child interpreter: make and compile the game into ``out``."""
    import textworld
    import textworld.challenges
    from textworld.generator import compile_game

    make = textworld.challenges.CHALLENGES[challenge][1]
    game_options = textworld.GameOptions()
    game_options.seeds = seed
    game_options.path = str(out / GAME_FILE)
    game_options.file_ext = ".z8"
    game_options.force_recompile = True
    game = make(dict(options), game_options)
    compile_game(game, game_options)
    story = out / GAME_FILE
    data = bytearray(story.read_bytes())
    data[_SERIAL] = b"000000"
    story.write_bytes(bytes(data))
    for extra in out.iterdir():
        if extra.name not in (GAME_FILE, GAME_JSON):
            extra.unlink()  # the Inform 7 source the compiler was given


if __name__ == "__main__":
    given = json.loads(sys.argv[1])
    _make(given["challenge"], given["options"], int(given["seed"]), Path(sys.argv[2]))
