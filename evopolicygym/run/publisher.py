"""The Host's side of the Agent's workspace: where it is, laying it out, publishing feedback.

What the feedback shows of each Submission is the Run's recorded Feedback condition
(``RunConfig.feedback``), applied here and nowhere else, so the log stays whole.

Before each Agent attempt the workspace is rebuilt from the log (``workspace``'s
projection) with the task text and skills; after each evaluation ``feedback/`` is
brought up to date; a temporary workspace is removed once the Run has finished.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
from pathlib import Path

from evopolicygym.hostdirs import remove_tree
from evopolicygym.run.ledger import Ledger, RunError, one_line
from evopolicygym.run.skills import skill_of, write_skills
from evopolicygym.run.workspace import TraceCache, build_feedback, rebuild_workspace, sync_feedback
from evopolicygym.transcript import TOOL_SESSION_PROVIDERS, task_files

__all__ = ["Publisher"]

log = logging.getLogger(__name__)


class Publisher:
    """The workspace of one Run: ``workspace`` if given, else a temporary one remembered
    across attempts (so the Agent's unsubmitted edits survive a Host restart)."""

    def __init__(self, ledger: Ledger, workspace: Path | None = None) -> None:
        self._ledger = ledger
        self._given = workspace
        self._path: Path | None = None
        self._traces = TraceCache()  # Host traces rendered for the feedback, between publications

    @property
    def path(self) -> Path | None:
        """The workspace, once an attempt has prepared it."""
        return self._path

    def prepare(self) -> tuple[Path, str]:
        """The workspace, rebuilt from the log, and the task text (TASK.md) written into it."""
        ledger = self._ledger
        store, state, created = ledger.store, ledger.state, ledger.created
        if self._path is None:
            workspace = self._given or self._remembered()
            if workspace.resolve().is_relative_to(store.path.resolve()):
                raise RunError(
                    f"the workspace {workspace} is inside the store, which the Agent must not see"
                )
            self._path = workspace
            self._path.mkdir(parents=True, exist_ok=True)
        if state.agent_attempts == 0:
            # A new Run: nothing of whatever used this directory before is the Agent's.
            for part in ("program", "analysis"):
                path = self._path / part
                if path.is_symlink() or path.is_file():
                    path.unlink()
                elif path.exists():
                    remove_tree(path)
        skills = [
            skill_of(store.blobs.get_program(digest)) for digest in created.skill_program_digests
        ]
        task_md, task_json = task_files(
            created.benchmark_spec,
            state.cfg.to_dict(),
            [(s.name, s.description) for s in skills],
            session="tools" if created.agent.provider in TOOL_SESSION_PROVIDERS else "cli",
        )
        try:
            rebuild_workspace(
                self._path,
                ledger.events,
                store.blobs,
                state.cfg.bulk_feedback_retention_bytes,
                store.blobs.get_program(created.initial_program_digest),
                task_md,
                task_json,
                state.cfg.feedback,
                self._traces,
            )
            write_skills(self._path, skills)
        except OSError as exc:
            raise RunError(f"cannot prepare the workspace {self._path}: {one_line(exc)}") from exc
        return self._path, task_md

    def known_path(self) -> Path | None:
        """The workspace of this Run's attempts so far, without preparing it (None: none yet)."""
        if self._path is not None or self._given is not None:
            return self._path or self._given
        with contextlib.suppress(OSError, UnicodeDecodeError):
            earlier = Path(self._note().read_text().strip())
            if earlier.is_dir():
                return earlier
        return None

    def publish(self) -> dict[str, bytes]:
        """Bring ``feedback/`` up to date with the log; the feedback files."""
        ledger = self._ledger
        config = ledger.state.cfg
        files = build_feedback(
            ledger.events,
            ledger.store.blobs,
            config.bulk_feedback_retention_bytes,
            config.feedback,
            self._traces,
        )
        if self._path is not None:
            try:
                sync_feedback(self._path, files)
            except Exception:  # the Agent can wreck its own workspace; the record stands
                log.warning("could not publish feedback into %s", self._path, exc_info=True)
        return files

    def cleanup(self) -> None:
        """Remove a temporary workspace once the Run has finished, or once the Agent's part is
        over (Validation, Assessment): a resume never starts an Agent in it again."""
        state = self._ledger.state
        done = state.finished is not None or (
            state.created and not state.authority_open and state.agent_attempts > 0
        )
        if self._path is not None and self._given is None and done:
            shutil.rmtree(self._path, ignore_errors=True)
            self._note().unlink(missing_ok=True)

    def _remembered(self) -> Path:
        """The temporary workspace of an earlier attempt (with the Agent's unsubmitted edits),
        or a new one."""
        note = self._note()
        with contextlib.suppress(OSError, UnicodeDecodeError):
            earlier = Path(note.read_text().strip())
            if earlier.is_dir():
                return earlier
        fresh = Path(tempfile.mkdtemp(prefix=f"evopolicy-{self._ledger.run_id}-"))
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"{fresh}\n")
        return fresh

    def _note(self) -> Path:
        """Where the Host remembers a temporary workspace, beside the Run's lock (never in the log,
        which must not hold machine paths the Agent could learn from an export)."""
        return self._ledger.store.path / "runs" / f"{self._ledger.run_id}.workspace"
