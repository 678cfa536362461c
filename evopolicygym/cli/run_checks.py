"""What `run` checks before anything is recorded (the chat Agent's endpoint, a new Run's
workspace), and how a config error names `run`'s options."""

from __future__ import annotations

import os
from pathlib import Path

from evopolicygym.cli.errors import CliError
from evopolicygym.cli.output import one_line
from evopolicygym.protocol import CLI_SHIM
from evopolicygym.run.skills import SKILLS_DIR
from evopolicygym.run.workspace import ANALYSIS_DIR, FEEDBACK_DIR, PROGRAM_DIR, TASK_JSON, TASK_MD

__all__ = ["OPTION_NAMES", "check_chat", "check_new_workspace"]

# RunConfig's field names as `run` spells them, for its errors (longest first).
OPTION_NAMES = (
    (
        "train, validation and assessment splits",
        "--train-split, --validation-split and --assessment-split",
    ),
    ("max_episodes_per_submission", "--max-episodes-per-submission"),
    ("validation episodes_per_candidate", "--validation-episodes"),
    ("validation max_candidates", "--max-candidates"),
    ("bulk_feedback_retention_bytes", "--retention-bytes"),
    ("feedback trace_steps", "--feedback-trace-steps"),
    ("feedback traces", "--feedback-traces"),
    ("record_trajectories", "--record-trajectories"),
    ("require_budget_exhaustion", "--finish-policy require_budget_exhaustion"),
    ("assessment episodes", "--assessment-episodes"),
    ("max_agent_attempts", "--max-agent-attempts"),
    ("episode_pool_size", "--pool-size"),
    ("max_submissions", "--max-submissions"),
    ("episode_timeout", "--episode-timeout"),
    ("agent_timeout", "--agent-timeout"),
    ("episode_budget", "--budget"),
    ("the pool size", "--pool-size"),
)


def check_chat(base_url: str | None, api_key_env: str | None) -> None:
    """The chat Agent's key variable (when named) is set and its endpoint answers, before
    anything is recorded: otherwise the Run would only end agent_failed."""
    if api_key_env and not os.environ.get(api_key_env):
        raise CliError(f"--api-key-env {api_key_env}: that environment variable is not set")
    if not base_url:
        return
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=10):
            pass
    except urllib.error.HTTPError:
        pass  # it answered (401 without a key, 404 where it lists no models): it is there
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(
            f"--base-url {base_url}: the chat endpoint does not answer ({one_line(str(reason))})"
        ) from exc


# What the Host writes in an Agent's workspace; a directory holding anything else is the user's.
_HOST_ENTRIES = frozenset(
    {
        PROGRAM_DIR,
        FEEDBACK_DIR,
        ANALYSIS_DIR,
        TASK_MD,
        TASK_JSON,
        SKILLS_DIR,
        CLI_SHIM,
        f".{CLI_SHIM}.new",
    }
)


def check_new_workspace(workspace_dir: str) -> None:
    """``--workspace DIR`` of a new Run: missing, empty, or an earlier Run's workspace; never a
    file, nor a directory of the user's own files, which the Host would write among."""
    path = Path(workspace_dir)
    if path.exists() and not path.is_dir():
        raise CliError(f"--workspace {workspace_dir}: not a directory")
    if path.is_dir():
        foreign = sorted(entry.name for entry in path.iterdir() if entry.name not in _HOST_ENTRIES)
        if foreign:
            shown = ", ".join(foreign[:3]) + (
                f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
            )
            raise CliError(
                f"--workspace {workspace_dir}: holds files of its own ({shown}); "
                "give a new or empty directory (or an earlier Run's workspace)"
            )
