"""``sft`` and ``distill``: the Agent's conversations, whole or cut at each assistant turn.

One row is one Agent attempt's conversation (a Run resumed with a fresh Agent
has one per attempt; most Runs have one): the Host's task as the system
message, a user turn, then the Agent's assistant turns with their tool calls
and the tool results, in ``messages`` with the ``tools`` it called. With
``--per-turn`` a row is instead a ``prompt`` (everything before one assistant
turn) and a ``completion`` (that turn). ``distill`` is the same rows kept to a
teacher (``--teacher``) with the teacher's identity and token usage.

Beside the conversation: the Run's labels (``handoff``, ``improved``, ``success``),
the task (``task_id``, ``benchmark_params``) and its difficulty (``reference_score``,
the initial program's Validation score), ``trainer_step`` (a training Run's trainer
step, null for other Runs), the ``tools`` the Agent was offered
(``tools_inferred`` where they are told by its calls instead), and ``submissions``:
the per-Submission outcome labels (``outcomes.Outcome``) of the attempt's Submissions,
each with the ``turn`` that asked for it; a ``--per-turn`` row carries those of its
own turn (null for a turn that made none).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from datasets import Features, Json, List, Value

from evopolicygym.transcript import Message
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.chat import AGENT, MESSAGES, agent_value, conversation, tools_offered
from evopolicygym_exporters.history import RunHistory, trainer_step
from evopolicygym_exporters.outcomes import lineage_of
from evopolicygym_exporters.tasks import CATALOG, catalog_of, task_id

__all__ = ["SUBMISSION_OUTCOME", "DistillExporter", "SftExporter"]

# One model response (an assistant turn): the model that gave it and its tokens, where the
# Agent's record tells them (per response for the built-in agents and where a CLI's session
# record was read; else as the CLI's stream gives them, possibly a total on a turn's last).
RESPONSE = {
    "turn": Value("int32"),
    "model": Value("string"),
    "input_tokens": Value("int64"),
    "cached_tokens": Value("int64"),
    "cache_write_tokens": Value("int64"),
    "output_tokens": Value("int64"),
    "reasoning_tokens": Value("int64"),
}

# One Submission's outcome labels (see ``outcomes.Outcome``), joinable to the turn that made it.
SUBMISSION_OUTCOME = {
    "submission_id": Value("int32"),
    "turn": Value("int32"),
    "program_digest": Value("string"),
    "status": Value("string"),
    "score": Value("float64"),
    "failures": Value("int32"),
    "budget_spent": Value("int64"),
    "budget_used": Value("int64"),
    "parent_submission_id": Value("int32"),
    "parent_digest": Value("string"),
    "parent_basis": Value("string"),
    "matched_indices": List(Value("int32")),
    "matched_score": Value("float64"),
    "parent_matched_score": Value("float64"),
    "matched_delta": Value("float64"),
    "matched_better": Value("bool"),
}
_OUTCOME = {
    "run_id": Value("string"),
    "attempt": Value("int32"),
    "task_id": Value("string"),
    "benchmark_id": Value("string"),
    "benchmark_params": Json(),
    "environment_digest": Value("string"),
    "score_direction": Value("string"),
    "agent": AGENT,
    "trainer_step": Value("int64"),
    "num_submissions": Value("int32"),
    "best_train_score": Value("float64"),
    "final_score": Value("float64"),
    "reference_score": Value("float64"),
    "task_catalog": CATALOG,
    "handoff": Value("string"),
    "improved": Value("bool"),
    "success": Value("bool"),
    "terminal_reason": Value("string"),
}
_USAGE = {
    "input_tokens": Value("int64"),
    "output_tokens": Value("int64"),
    "cached_tokens": Value("int64"),
}

# An error the Agent's CLI reported in this attempt (an API error, a failed login): never
# a turn of ``messages``, listed here instead.
AGENT_ERROR = {"kind": Value("string"), "status": Value("int64"), "message": Value("string")}


class SftExporter(Exporter):
    name: ClassVar[str] = "sft"
    summary: ClassVar[str] = (
        "one Agent conversation of a Run (`messages`, `tools`) with the Run's outcome and labels "
        "and its Submissions' outcomes by turn"
    )
    task_categories: ClassVar[tuple[str, ...]] = ("text-generation",)
    batch_rows: ClassVar[int] = 64
    version: ClassVar[int] = 3  # 3: trainer_step

    def training_columns(self) -> tuple[str, ...]:
        return ("prompt", "completion", "tools") if self.options.per_turn else ("messages", "tools")

    def features(self) -> Features:
        chat = (
            {"prompt": MESSAGES, "completion": MESSAGES, "turn": Value("int32")}
            if self.options.per_turn
            else {"messages": MESSAGES}
        )
        return Features(
            {
                **_OUTCOME,
                **chat,
                "tools": Json(),
                "tools_inferred": Value("bool"),
                "agent_errors": List(AGENT_ERROR),
                "responses": List(RESPONSE),
                "submissions": List(SUBMISSION_OUTCOME),
                **self.extra_features(),
                "redacted": Value("bool"),
            }
        )

    def extra_features(self) -> dict[str, Any]:
        return {}

    def settings(self) -> dict[str, Any]:
        return {"per_turn": self.options.per_turn, "success_only": self.options.success_only}

    def admits(self, run: RunHistory) -> bool:
        return run.success or not self.options.success_only

    def extra(self, run: RunHistory, transcript: list[Message]) -> dict[str, Any]:
        return {}

    def rows(self, run: RunHistory) -> Iterator[Row]:
        if not self.admits(run):
            return
        group = self.group(run)
        outcome = {
            "run_id": run.run_id,
            "task_id": task_id(run),
            "benchmark_id": run.created.benchmark_id,
            "benchmark_params": run.created.config.get("benchmark_params", {}),
            "environment_digest": run.created.environment_digest,
            "score_direction": run.direction,
            "agent": agent_value(run.created.agent),
            "trainer_step": trainer_step(run.created.agent),
            "num_submissions": len(run.submissions),
            "best_train_score": run.best_train_score,
            "final_score": run.final_score,
            "reference_score": run.reference_score,
            "task_catalog": catalog_of(run),
            "handoff": run.handoff,
            "improved": run.improved,
            "success": run.success,
            "terminal_reason": run.finished.reason,
        }
        lineage = lineage_of(run, self.program)
        for attempt in sorted(run.transcripts):
            transcript = run.transcripts[attempt]
            if not any(m.role == "assistant" for m in transcript):
                continue  # an Agent that never answered teaches nothing
            messages = conversation(transcript)
            tools, inferred = tools_offered(
                run.created.agent, run.offered_tools.get(attempt), messages
            )
            by_turn = lineage.by_turn(attempt)
            responses = [
                _response(turn, m)
                for turn, m in enumerate(m for m in transcript if m.role == "assistant")
            ]
            base = {
                **outcome,
                "attempt": attempt,
                "tools": tools,
                "tools_inferred": inferred,
                "agent_errors": [
                    {
                        "kind": m.error.kind if m.error else "error",
                        "status": m.error.status if m.error else None,
                        "message": m.content,
                    }
                    for m in run.agent_errors.get(attempt, ())
                ],
                **self.extra(run, transcript),
            }
            if not self.options.per_turn:
                made = [o.labels() for o in lineage.outcomes.values() if o.attempt == attempt]
                yield (
                    group,
                    {**base, "messages": messages, "submissions": made, "responses": responses},
                )
                continue
            turn = 0
            for i, message in enumerate(messages):
                if message["role"] != "assistant":
                    continue
                labels = [o.labels() for o in by_turn.get(turn, ())] or None
                row = {
                    **base,
                    "prompt": messages[:i],
                    "completion": [message],
                    "turn": turn,
                    "submissions": labels,
                    "responses": responses[turn : turn + 1],
                }
                turn += 1
                yield group, row
        self.forget()


def _response(turn: int, message: Message) -> dict[str, Any]:
    usage = message.usage
    return {
        "turn": turn,
        "model": message.model,
        "input_tokens": usage.input_tokens if usage else None,
        "cached_tokens": usage.cached_tokens if usage else None,
        "cache_write_tokens": usage.cache_write_tokens if usage else None,
        "output_tokens": usage.output_tokens if usage else None,
        "reasoning_tokens": usage.reasoning_tokens if usage else None,
    }


class DistillExporter(SftExporter):
    name: ClassVar[str] = "distill"
    summary: ClassVar[str] = (
        "one teacher conversation (the `sft` shape) with the teacher's identity and token usage"
    )

    def extra_features(self) -> dict[str, Any]:
        return {"teacher": AGENT, "teacher_usage": _USAGE}

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "teacher": sorted(self.options.teacher)}

    def admits(self, run: RunHistory) -> bool:
        agent = run.created.agent
        teachers = set(self.options.teacher)
        if teachers and not {agent.name, agent.provider, agent.model} & teachers:
            return False
        return super().admits(run)

    def extra(self, run: RunHistory, transcript: list[Message]) -> dict[str, Any]:
        usage = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0}
        for message in transcript:
            if message.usage is not None:
                usage["input_tokens"] += message.usage.input_tokens
                usage["output_tokens"] += message.usage.output_tokens
                usage["cached_tokens"] += message.usage.cached_tokens
        return {"teacher": agent_value(run.created.agent), "teacher_usage": usage}
