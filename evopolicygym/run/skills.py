"""Skills: explicit, immutable directories of guidance given to the Agent.

A skill is a directory with a ``SKILL.md`` that names it (YAML front matter
``name:`` and ``description:``, or a first ``# heading``). It is captured as a
Program (content-addressed, bounded, no symlinks), stored in the blobs with its
digest recorded in RunCreated, and copied read-only into ``workspace/skills/<name>/``
at every Agent start; the task tells the Agent to read them first.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import msgspec

from evopolicygym.hostdirs import remove_tree
from evopolicygym.program import Program

__all__ = ["SKILLS_DIR", "Skill", "SkillError", "load_skill", "skill_of", "write_skills"]

SKILLS_DIR = "skills"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class SkillError(ValueError):
    """A skill directory that cannot be used; the message says why."""


class Skill(msgspec.Struct, frozen=True):
    name: str
    description: str
    program: Program


def skill_of(program: Program, where: str = "skill") -> Skill:
    """The skill a captured directory is: its name and description from SKILL.md."""
    try:
        text = program.read("SKILL.md").decode("utf-8")
    except KeyError:
        raise SkillError(f"{where}: no SKILL.md at its top level") from None
    except UnicodeDecodeError:
        raise SkillError(f"{where}: SKILL.md is not UTF-8 text") from None
    name, description = "", ""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # front matter: the simple `key: value` lines
        for line in lines[1:]:
            if line.strip() == "---":
                break
            key, sep, value = line.partition(":")
            if sep and key.strip() in ("name", "description"):
                value = value.strip().strip("'\"")
                name, description = (value, description) if key.strip() == "name" else (name, value)
    if not name:
        heading = next((line[2:].strip() for line in lines if line.startswith("# ")), "")
        name = heading.lower().replace(" ", "-")
    if not _NAME.fullmatch(name):
        raise SkillError(
            f"{where}: SKILL.md must name the skill (front matter `name: my-skill`, letters, "
            f"digits, '.', '_' or '-'), got {name!r}"
        )
    return Skill(name=name, description=" ".join(description.split())[:300], program=program)


def load_skill(directory: str | os.PathLike[str]) -> Skill:
    """Capture a skill directory (refused: a missing SKILL.md or name, symlinks, too big)."""
    path = Path(directory)
    if not path.is_dir():
        raise SkillError(f"skill {path} is not a directory")
    return skill_of(Program.from_directory(path), f"skill {path}")


def write_skills(workspace: Path, skills: list[Skill]) -> None:
    """``workspace/skills/<name>/``, read-only, exactly the skills' files (rewritten each time).
    Without skills nothing is touched: a ``skills/`` of the user's own stays."""
    if not skills:
        return
    root = workspace / SKILLS_DIR
    if root.is_symlink() or root.is_file():
        root.unlink()
    elif root.exists():
        remove_tree(root)
    root.mkdir()
    for skill in skills:
        directory = root / skill.name
        skill.program.write_to(directory)
        for path in sorted(directory.rglob("*"), reverse=True):
            # Write bits off; execute bits (directories, scripts) as they were.
            path.chmod(stat.S_IMODE(path.stat().st_mode) & ~0o222)
        directory.chmod(0o555)
    root.chmod(0o555)
