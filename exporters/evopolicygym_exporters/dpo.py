"""``dpo``: two Programs of one Run compared on the same Episodes, as a preference pair.

Only matched evidence makes a pair: two published Submissions evaluated on the
same pool indices, whose train scores differ by more than zero and at least
``--dpo-min-margin``. The ``prompt`` is the conversation up to the decision
that produced the earlier of the two: the task, and everything the Agent had
seen when the result of its previous submission came back (just the task for
a first submission). ``chosen`` and ``rejected`` are one assistant turn each:
the edit from the program in the workspace at that point (the previous
Submission's, or the initial program) to the better and the worse Program, as
``write_file`` tool calls (and a ``bash`` removal for dropped files). Pairs per Run are
capped, widest margins first.

Every pair is matched evidence (``matched``: always true, the two ran on the same
``indices``), and a pair of the same two programs is one row for the split: it never
straddles splits, whichever Runs or prompts it came from.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from itertools import combinations
from typing import Any, ClassVar

from datasets import Features, Json, List, Value

from evopolicygym.program import Program
from evopolicygym.transcript import Message
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.chat import (
    AGENT,
    MESSAGES,
    agent_value,
    conversation,
    plain,
    tool_call,
    tools_offered,
)
from evopolicygym_exporters.history import RunHistory, SubmissionHistory

__all__ = ["DpoExporter", "decision_context", "edit_turn"]


def decision_context(
    run: RunHistory, submission: SubmissionHistory
) -> tuple[list[dict[str, Any]], str]:
    """The conversation before ``submission`` was decided on, and the program it started from."""
    same_attempt = [
        s
        for s in run.submissions
        if s.attempt == submission.attempt and s.submission_id < submission.submission_id
    ]
    transcript = run.transcripts.get(submission.attempt) or [
        Message(role="system", content=run.task_text or "")
    ]
    messages = conversation(transcript)
    opening = next((i for i, m in enumerate(messages) if m["role"] == "user"), len(messages) - 1)
    end = opening + 1  # the task and the first user turn
    base = run.created.initial_program_digest
    if same_attempt:
        previous = same_attempt[-1]
        base = previous.program_digest
        # ``conversation`` may have inserted one message (the user turn) before the transcript's.
        shift = len(messages) - len(transcript)
        for i in range(previous.transcript_mark + shift, len(messages)):
            if messages[i]["role"] in ("tool", "user"):  # the answer to that submission
                end = i + 1
                break
        else:
            end = len(messages)
    elif any(s.submission_id < submission.submission_id for s in run.submissions):
        # Submitted by an earlier attempt: this attempt's Agent started from that program.
        base = max(
            (s for s in run.submissions if s.submission_id < submission.submission_id),
            key=lambda s: s.submission_id,
        ).program_digest
    while end > opening + 1 and messages[end - 1]["role"] == "assistant":
        end -= 1  # a prompt ends where the Agent is to act
    return messages[:end], base


def edit_turn(base: Program, program: Program) -> list[dict[str, Any]] | None:
    """One assistant turn turning ``base`` into ``program``: ``write_file`` for each file
    added or changed, one ``bash`` removal for files it drops. None if a file is binary."""
    old, new = dict(base.files), dict(program.files)
    changed = [(p, d) for p, d in program.files if old.get(p) != d]
    removed = sorted(old.keys() - new.keys())
    if not changed and not removed:
        changed = list(program.files)  # the same program: written out as it is
    calls: list[dict[str, Any]] = []
    for path, data in changed:
        try:
            content = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        arguments = {"path": f"program/{path}", "content": content}
        calls.append(tool_call(f"edit_{len(calls)}", "write_file", arguments))
    if removed:
        command = shlex.join(["rm", "-f", *(f"program/{p}" for p in removed)])
        calls.append(tool_call(f"edit_{len(calls)}", "bash", {"command": command}))
    message = plain("assistant", "")
    message["tool_calls"] = calls
    return [message]


class DpoExporter(Exporter):
    name: ClassVar[str] = "dpo"
    summary: ClassVar[str] = (
        "two Programs of one Run compared on the same Episodes: "
        "`prompt`, `chosen`, `rejected`, margin"
    )
    task_categories: ClassVar[tuple[str, ...]] = ("text-generation",)
    batch_rows: ClassVar[int] = 128

    def training_columns(self) -> tuple[str, ...]:
        return ("prompt", "chosen", "rejected", "tools")

    def settings(self) -> dict[str, Any]:
        return {"min_margin": self.options.dpo_min_margin, "max_pairs": self.options.dpo_max_pairs}

    def identity(self, row: dict[str, Any]) -> str | None:
        # The same two programs, whichever was chosen: one preference, one split.
        return "\0".join(sorted((row["chosen_program_digest"], row["rejected_program_digest"])))

    def features(self) -> Features:
        return Features(
            {
                "run_id": Value("string"),
                "benchmark_id": Value("string"),
                "agent": AGENT,
                "prompt": MESSAGES,
                "chosen": MESSAGES,
                "rejected": MESSAGES,
                "tools": Json(),
                "chosen_submission_id": Value("int32"),
                "rejected_submission_id": Value("int32"),
                "chosen_program_digest": Value("string"),
                "rejected_program_digest": Value("string"),
                "chosen_score": Value("float64"),
                "rejected_score": Value("float64"),
                "margin": Value("float64"),
                "indices": List(Value("int32")),
                "matched": Value("bool"),
                "score_direction": Value("string"),
                "redacted": Value("bool"),
            }
        )

    def _pairs(self, run: RunHistory) -> list[tuple[float, SubmissionHistory, SubmissionHistory]]:
        groups: dict[tuple[int, ...], list[SubmissionHistory]] = {}
        for submission in run.published:
            groups.setdefault(tuple(submission.indices), []).append(submission)
        pairs = []
        for group in groups.values():
            for a, b in combinations(group, 2):
                assert a.score is not None and b.score is not None
                margin = abs(a.score - b.score)
                if margin <= 0 or margin < self.options.dpo_min_margin:
                    continue
                if a.program_digest == b.program_digest:
                    continue  # one program, two scores: noise, not a preference
                pairs.append((margin, a, b))
        pairs.sort(key=lambda p: (-p[0], p[1].submission_id, p[2].submission_id))
        return pairs[: self.options.dpo_max_pairs]

    def rows(self, run: RunHistory) -> Iterator[Row]:
        group = self.group(run)
        for margin, a, b in self._pairs(run):
            assert a.score is not None and b.score is not None
            chosen, rejected = (a, b) if run.better(a.score, b.score) else (b, a)
            prompt, base_digest = decision_context(run, a)  # a is the earlier of the two
            base = self.program(base_digest)
            chosen_turn = edit_turn(base, self.program(chosen.program_digest))
            rejected_turn = edit_turn(base, self.program(rejected.program_digest))
            if chosen_turn is None or rejected_turn is None:
                continue
            row = {
                "run_id": run.run_id,
                "benchmark_id": run.created.benchmark_id,
                "agent": agent_value(run.created.agent),
                "prompt": prompt,
                "chosen": chosen_turn,
                "rejected": rejected_turn,
                "tools": tools_offered(
                    run.created.agent,
                    run.offered_tools.get(a.attempt),
                    [*prompt, *chosen_turn, *rejected_turn],
                )[0],
                "chosen_submission_id": chosen.submission_id,
                "rejected_submission_id": rejected.submission_id,
                "chosen_program_digest": chosen.program_digest,
                "rejected_program_digest": rejected.program_digest,
                "chosen_score": chosen.score,
                "rejected_score": rejected.score,
                "margin": margin,
                "indices": a.indices,
                "matched": True,
                "score_direction": run.direction,
            }
            yield group, row
        self.forget()
