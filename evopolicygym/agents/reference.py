"""The reference agent: an offline agent (no network, no LLM) that evolves a policy program.

It talks to the Host only the way any agent does: it reads ``task.json``, the program and
the feedback files in its workspace, and runs ``evopolicy session submit`` and
``evopolicy session finish``. Its search (``reference_search``) is a (1+1) evolution
strategy over programs: candidates from synthesis and parametric edits, each evaluated on
the same matched Episodes and kept only when it beats the best; what is left of the budget
re-evaluates the best on fresh Episodes; then it finishes with its best programs on matched
evidence (every Submission it knows of, an earlier start's too), best first.

Run as ``python -m evopolicygym.agents.reference [--seed N] [--episodes-per-submission N]``
with ``EVOPOLICY_SESSION``, ``EVOPOLICY_WORKSPACE`` and ``EVOPOLICY_CLI`` set by the Host.
Its transcript goes to stdout, one ``Message`` per line; diagnostics go to stderr.

This module is the agent in its workspace: its recorded tools (``SessionAgent``), its
life from reading the task to the finish (``run_agent``), and the command line. The
budget plan is in ``reference_budget``, the session commands in ``session_client`` and
the transcript in ``transcript_writer``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from evopolicygym.agents import edits
from evopolicygym.agents.reference_budget import Task
from evopolicygym.agents.reference_search import (
    MAX_IDLE_REJECTIONS,
    PROBE_SAMPLES,
    STOPPING_CODES,
    Evolution,
    Outcome,
    evolve,
    files_digest,
    format_score,
)
from evopolicygym.agents.session_client import (
    Published,
    RankedProgram,
    Rejected,
    SessionClient,
    SessionUnavailable,
    cli_from_env,
    handoff,
    rank_programs,
)
from evopolicygym.agents.text import json_object
from evopolicygym.agents.transcript_writer import TranscriptWriter
from evopolicygym.protocol import WORKSPACE_ENV, format_selector

__all__ = ["SessionAgent", "main", "run_agent"]


class SessionAgent:
    """Workspace files and session commands, every use recorded in the transcript."""

    def __init__(
        self, workspace: Path, cli: Sequence[str], transcript: TranscriptWriter, seed: int
    ) -> None:
        self.workspace = workspace
        # Session commands run through the recorded bash tool, shown as `evopolicy session …`.
        self.session = SessionClient(cli, workspace, run=self.bash)
        self.transcript = transcript
        self.seed = seed
        self.dirs: dict[str, str] = {}  # program digest -> its directory, relative
        self.published: list[Published] = []
        # An earlier start's published evaluations, by (program digest, indices): the same
        # program on the same Episodes is not submitted (and charged) again.
        self.earlier: dict[tuple[str, tuple[int, ...]], Outcome] = {}
        self.budget_left: int | None = None
        self.maximize = True
        self.names = 0
        self.probe_written = False
        self.initial_files: dict[str, str] = {}

    # ----------------------------------------------------------------- tools

    def read_file(self, rel: str) -> str | None:
        path = self.workspace / rel
        box: list[str | None] = [None]

        def run() -> str:
            try:
                text = path.read_text()
            except (OSError, UnicodeDecodeError) as exc:
                return (
                    f"error: cannot read {rel}: {exc.strerror if isinstance(exc, OSError) else exc}"
                )
            box[0] = text
            return text

        self.transcript.tool("read_file", {"path": rel}, run)
        return box[0]

    def write_file(self, rel: str, content: str) -> None:
        def run() -> str:
            path = self.workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            return f"wrote {len(content.encode('utf-8'))} bytes to {rel}"

        self.transcript.tool("write_file", {"path": rel, "content": content}, run)

    def bash(
        self, shown: list[str], argv: list[str], timeout: float | None = None
    ) -> tuple[int, str, str]:
        """Run ``argv`` in the workspace; the transcript shows ``shown`` as the command."""
        box: list[tuple[int, str, str]] = [(127, "", "")]

        def run() -> str:
            try:
                done = subprocess.run(
                    argv,
                    cwd=self.workspace,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    stdin=subprocess.DEVNULL,
                )
                box[0] = (done.returncode, done.stdout, done.stderr)
            except (OSError, subprocess.TimeoutExpired) as exc:
                box[0] = (127, "", f"error: {exc}\n")
            code, out, err = box[0]
            parts = [text.rstrip("\n") for text in (out, err) if text.strip()]
            parts.append(f"[exit code {code}]")
            return "\n".join(parts)

        self.transcript.tool("bash", {"command": shlex.join(shown)}, run)
        return box[0]

    # ----------------------------------------------------------------- reading

    def read_task(self) -> Task:
        text = self.read_file("task.json")
        if text is None:
            raise RuntimeError("task.json is missing")
        task = Task.from_dict(json.loads(text))
        self.maximize = task.maximize
        return task

    def read_program(self) -> dict[str, str]:
        root = self.workspace / "program"
        rels = sorted(
            str(p.relative_to(root).as_posix())
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )
        if "policy.py" in rels:  # read the policy first: it is what matters
            rels.remove("policy.py")
            rels.insert(0, "policy.py")
        files: dict[str, str] = {}
        for rel in rels:
            text = self.read_file(f"program/{rel}")
            if text is not None:
                files[rel] = text
        self.initial_files = dict(files)
        self.dirs[files_digest(files)] = "program"
        return files

    def read_history(self) -> tuple[int | None, int, int | None]:
        """What an earlier start of this agent already spent and learnt: (budget left,
        submissions, Episodes per matched evaluation)."""
        feedback = self.workspace / "feedback"
        entries = (
            sorted(p.name for p in feedback.glob("submission-*") if p.is_dir())
            if feedback.is_dir()
            else []
        )
        if not entries:
            return None, 0, None
        self.transcript.say(
            f"feedback/ already holds {len(entries)} submission(s) from an earlier start: "
            "I read them to know the budget left and what was already evaluated, so the same "
            "program is not submitted on the same Episodes again and the finish weighs them too."
        )
        first: tuple[int, ...] | None = None
        for name in entries:
            published = self.record(json_object(self.read_file(f"feedback/{name}/feedback.json")))
            if published is not None and published.indices is not None:
                first = first or published.indices
                if published.digest is not None:
                    self.earlier.setdefault(
                        (published.digest, published.indices),
                        Outcome(
                            published.score,
                            published.failures,
                            published.submission_id,
                            charged=False,
                        ),
                    )
        latest = json_object(self.read_file("feedback/latest.json")) or {}
        left = latest.get("budget_left")
        self.budget_left = left if isinstance(left, int) else None
        # The first submission was the baseline on the matched Episodes: keep them matched.
        k = len(first) if first is not None and first == tuple(range(len(first))) else None
        return self.budget_left, len(entries), k

    def record(
        self, data: Mapping[str, Any] | None, indices: Sequence[int] | None = None
    ) -> Published | None:
        """Note a published Submission from its feedback (or the submit reply)."""
        if (
            data is None
            or data.get("status", "published") != "published"
            or not isinstance(data.get("submission_id"), int)
        ):
            return None
        score, failures = data.get("score"), data.get("failures")
        digest, listed = data.get("program_digest"), data.get("indices")
        if isinstance(listed, list) and all(isinstance(i, int) for i in listed):
            indices = listed
        published = Published(
            data["submission_id"],
            float(score) if isinstance(score, int | float) else None,
            failures if isinstance(failures, int) else 0,
            digest if isinstance(digest, str) else None,
            tuple(indices) if indices is not None else None,
        )
        self.published.append(published)
        return published

    # ----------------------------------------------------------------- probing

    def probe(self, files: Mapping[str, str]) -> edits.ProbeResult | None:
        rel = self.dirs.get(files_digest(files)) or self.write_candidate(files)
        if not self.probe_written:
            self.transcript.say(
                "A small script to see what a program does on sampled observations:"
            )
            self.write_file("analysis/probe.py", edits.PROBE_SCRIPT)
            self.probe_written = True
        args = [rel, "task.json", "--samples", str(PROBE_SAMPLES), "--seed", str(self.seed)]
        code, out, _err = self.bash(
            ["python", "analysis/probe.py", *args],
            [sys.executable, "analysis/probe.py", *args],
            timeout=120,
        )
        if code != 0:
            return None
        try:
            data = json.loads(out)
            return edits.ProbeResult(
                data["observations"], data["actions"], int(data["errors"]), out, True
            )
        except (ValueError, KeyError, TypeError):
            return None

    # ----------------------------------------------------------------- submitting

    def write_candidate(self, files: Mapping[str, str]) -> str:
        digest = files_digest(files)
        if digest in self.dirs:
            return self.dirs[digest]
        self.names += 1
        rel = f"analysis/candidates/c{self.names:03d}"
        while (self.workspace / rel).exists():  # an earlier start of the agent used it
            self.names += 1
            rel = f"analysis/candidates/c{self.names:03d}"
        for path, text in files.items():
            self.write_file(f"{rel}/{path}", text)
        self.dirs[digest] = rel
        return rel

    def evaluate(
        self,
        files: Mapping[str, str],
        indices: Sequence[int],
        *,
        reuse: bool = True,
        parent: int | None = None,
    ) -> Outcome:
        """Submit ``files`` on ``indices`` (``parent``: the Submission they were edited from,
        0 the initial program); with ``reuse``, what an earlier start published for the same
        program on the same Episodes is taken instead of submitting it again."""
        digest = files_digest(files)
        known = self.earlier.pop((digest, tuple(indices)), None) if reuse else None
        if known is not None:
            self.transcript.say(
                f"This program already ran on Episodes {format_selector(indices)} before the "
                f"restart (Submission {known.submission_id}): I take that result rather than "
                "pay for the same Episodes again."
            )
            return replace(known, budget_left=self.budget_left)
        rel = self.write_candidate(files)
        reply = self.session.submit(rel, format_selector(indices), parent).accepted()
        sid = reply.get("submission_id")
        data = None
        if isinstance(sid, int):
            data = json_object(self.read_file(f"feedback/submission-{sid:04d}/feedback.json"))
        if data is None or data.get("submission_id") != sid:
            data = json_object(self.read_file("feedback/latest.json"))
        if data is None or data.get("submission_id") != sid:
            print(
                "reference agent: feedback files unreadable, using the command's reply",
                file=sys.stderr,
            )
            data = {"program_digest": digest, **reply}
        score = data.get("score")
        left = data.get("budget_left")
        if isinstance(left, int):
            self.budget_left = left
        self.record(data, indices)
        return Outcome(
            score=float(score)
            if isinstance(score, int | float) and data.get("status") != "failed"
            else None,
            failures=int(data.get("failures") or 0),
            submission_id=sid if isinstance(sid, int) else None,
            budget_left=left if isinstance(left, int) else None,
            returns=tuple(float(e.get("total_reward", 0.0)) for e in data.get("episodes") or []),
        )

    def finish(self, ids: Sequence[int]) -> tuple[int, str]:
        result = self.session.finish(ids)
        rejected = result.rejection
        return result.code, rejected.code if rejected is not None else ""

    def ranked(self, task: Task | None, evolution: Evolution | None) -> list[RankedProgram]:
        """Every program published (an earlier start's too), best first on matched evidence:
        the search's matched Episodes, or the ones most programs ran on."""
        return rank_programs(
            self.published,
            self.maximize,
            matched=evolution.plan.matched_indices if evolution else None,
            failure_score=task.failure_score if task else None,
        )


def _spend_remainder(
    agent: SessionAgent, task: Task, files: Mapping[str, str], left: int, k: int
) -> int:
    """Under require_budget_exhaustion: spend ``left`` Episodes on the best program."""
    cap = max(1, min(task.max_episodes_per_submission, task.episode_pool_size))
    start = k
    for _ in range(MAX_IDLE_REJECTIONS):
        if left <= 0:
            break
        size = min(cap, left)
        if start + size > task.episode_pool_size:
            start = 0
        indices = list(range(start, start + size))
        try:
            outcome = agent.evaluate(files, indices, reuse=False)
        except Rejected as exc:
            agent.transcript.say(f"That was rejected too ({exc.code}).")
            if exc.code in STOPPING_CODES:
                break
            start = (start + 1) % max(1, task.episode_pool_size - size + 1)
            continue
        left = outcome.budget_left if outcome.budget_left is not None else left - size
        start = (start + size) % task.episode_pool_size
    return left


def run_agent(
    workspace: Path, cli: Sequence[str], seed: int, episodes: int | None, out: IO[bytes]
) -> int:
    """The agent's whole life in ``workspace``: read, evolve, finish. Always returns 0: an
    unexpected problem ends the search, and the agent finishes with what it has."""
    transcript = TranscriptWriter(out)
    agent = SessionAgent(workspace, cli, transcript, seed)
    evolution: Evolution | None = None
    task: Task | None = None
    transcript.say(
        "Plan: read task.json and the current program; evaluate the program as a baseline on a "
        "fixed, matched set of Episodes; then alternate synthesis edits (replace the rule with a "
        "template fitted to the current best's behaviour) and parametric edits (Gaussian steps on "
        "its numeric constants, with an adaptive step size), keeping a candidate only when it "
        "beats the best on the matched Episodes; spend what is left re-checking the best on fresh "
        "Episodes; finish with the top candidates, best first."
    )
    try:
        task = agent.read_task()
        budget_left, used, matched_size = agent.read_history()
        files = agent.read_program()
        if "policy.py" not in files:
            transcript.say("program/ has no readable policy.py; candidates start from templates.")
        evolution = evolve(
            task,
            files,
            agent.evaluate,
            seed=seed,
            episodes_per_evaluation=episodes or matched_size,
            probe_fn=agent.probe,
            say=transcript.say,
            budget_left=budget_left,
            submissions_used=used,
        )
    except SessionUnavailable as exc:
        print(f"reference agent: session unavailable: {exc}", file=sys.stderr)
        transcript.say(f"The session command failed ({exc}); I finish with what I have.")
    except Exception:
        traceback.print_exc(file=sys.stderr)
        transcript.say("Something unexpected went wrong; I finish with what I have.")
    try:
        _finish(agent, task, evolution)
    except Exception:
        traceback.print_exc(file=sys.stderr)
    transcript.flush()
    return 0


def _finish(agent: SessionAgent, task: Task | None, evolution: Evolution | None) -> None:
    transcript = agent.transcript
    if evolution is not None and evolution.stopped == "session_closed":
        transcript.say("The session is closed: there is nothing left to do.")
        return
    ranked = agent.ranked(task, evolution)
    named = handoff(ranked, task.max_candidates if task else 1)
    ids = [r.submission_id for r in named]
    if not ids:
        transcript.say("No submission was published, so there is nothing to finish with.")
        return
    transcript.say(_handoff_text(named, ranked, evolution))
    for _ in range(4):
        code, reason = agent.finish(ids)
        if code != 1:
            return
        if reason == "candidate_limit" and len(ids) > 1:
            ids = ids[: len(ids) - 1]
        elif reason in ("unknown_submission", "invalid_request") and len(ids) > 1:
            ids = ids[:1]
        elif reason == "budget_remaining" and task is not None:
            latest = json_object(agent.read_file("feedback/latest.json")) or {}
            left = latest.get("budget_left")
            if not isinstance(left, int) or left <= 0:
                break
            best = evolution.best if evolution else None
            files = best.files if best is not None else agent.initial_files
            k = evolution.plan.episodes_per_evaluation if evolution else 0
            transcript.say(
                f"The Run wants the whole budget spent before finishing: {left} Episodes go to "
                "re-evaluating the best program on more Episodes."
            )
            _spend_remainder(agent, task, files, left, k)
        else:
            break
        transcript.say(f"The finish was rejected ({reason}); trying again.")
    transcript.say("The Run did not accept a finish; I stop here.")


def _handoff_text(
    named: Sequence[RankedProgram], ranked: Sequence[RankedProgram], evolution: Evolution | None
) -> str:
    """Why these Submissions, in this order: each one's evidence."""
    candidates = {c.digest: c for c in evolution.candidates} if evolution else {}
    lines = []
    for r in named:
        where = "on the matched Episodes" if r.matched else "on its own Episodes (unmatched)"
        line = f"- Submission {r.submission_id}: {format_score(r.score)} {where}"
        candidate = candidates.get(r.digest or "")
        if candidate is not None:
            line += f", {candidate.label} ({candidate.edit}: {candidate.note})" + "".join(
                f"; {format_score(o.score)} on fresh Episodes {format_selector(i)}"
                for i, o in candidate.confirmations
            )
        else:
            line += ", from an earlier start"
        lines.append(line)
    text = (
        f"Finishing with Submission(s) {', '.join(str(r.submission_id) for r in named)}, best "
        "first on matched evidence (the same Episodes for every program compared):\n"
        + "\n".join(lines)
    )
    left_out = sum(r.worst for r in ranked) if not named[0].worst else 0
    if left_out:
        text += (
            f"\n{left_out} program(s) scored no better than a failed Episode would; "
            "they are left out."
        )
    baseline = evolution.baseline if evolution else None
    if baseline is not None and baseline.outcome is not None:
        text += (
            f"\nThe baseline scored {format_score(baseline.outcome.score)} on the matched Episodes."
        )
    return text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evopolicygym.agents.reference", description=__doc__
    )
    parser.add_argument("--seed", type=int, default=0, help="the agent's own random seed")
    parser.add_argument(
        "--episodes-per-submission", type=int, default=None, help="Episodes per matched evaluation"
    )
    args = parser.parse_args(argv)
    workspace = Path(os.environ.get(WORKSPACE_ENV) or os.getcwd())
    cli = cli_from_env("reference agent")
    episodes = args.episodes_per_submission if (args.episodes_per_submission or 0) > 0 else None
    return run_agent(workspace, cli, args.seed, episodes, sys.stdout.buffer)


if __name__ == "__main__":
    sys.exit(main())
