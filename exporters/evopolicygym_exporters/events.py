"""``events``: the flat analytics table, one row per event of the exported Runs.

Common facts are scalar columns (position, Run, type, time, Submission, score,
budget, code, reason …) so DuckDB or pandas can group without parsing; the
rest of each payload is the ``payload`` JSON column. What the Host keeps
private is removed from the payload first: the Episode pool and every seed,
the Run seed, held-out Episodes' results (the selected program's and the initial
program's scores stay), the Assessment's public content and the text of Validation
and Assessment failures; any other text (an error, a reason) is scrubbed of the Run's
private seeds and scenarios. The Validation results of candidates that were not
selected are not exported at all, nor the Assessments of candidates that were not
selected (``CandidateAssessed``): held-out evidence trains nobody. Every text passes
the redactor (transcripts, program output), and ``redacted`` says where one was replaced.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any, ClassVar

from datasets import Features, Json, Value

from evopolicygym.records.private import PrivateValues
from evopolicygym_exporters.base import Exporter, Row
from evopolicygym_exporters.chat import PRIVATE_OPTIONS
from evopolicygym_exporters.history import RunHistory

__all__ = ["PRIVATE_FIELDS", "EventsExporter", "public_payload"]

# Per event type, the payload fields never exported.
PRIVATE_FIELDS: dict[str, tuple[str, ...]] = {
    "RunCreated": ("pool", "pool_blob", "seeds"),
    "AgentStarted": ("command",),  # the command line, jail and store path included
    "ValidationStarted": ("seed",),
    "AssessmentStarted": ("seed",),
    # Held-out Episodes: their scores stay, their per-Episode results and texts do not.
    "CandidateValidated": ("episodes",),
    "ReferenceValidated": ("episodes",),
    "AssessmentCompleted": ("content", "episodes"),
    "ValidationFailed": ("error",),
    "AssessmentFailed": ("error",),
}
_SCALARS = {
    "submission_id": Value("int64"),
    "index": Value("int64"),
    "attempt": Value("int64"),
    "score": Value("float64"),
    "failures": Value("int64"),
    "status": Value("string"),
    "total_reward": Value("float64"),
    "steps": Value("int64"),
    "budget_used": Value("int64"),
    "budget_left": Value("int64"),
    "code": Value("string"),
    "reason": Value("string"),
    "program_digest": Value("string"),
}


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _scalar(value: Any, dtype: str) -> Any:
    """``value`` if it has the column's type (a payload field of another shape is left out)."""
    if isinstance(value, bool):
        return None
    if dtype == "int64":
        return value if isinstance(value, int) else None
    if dtype == "float64":
        return float(value) if isinstance(value, int | float) else None
    return value if isinstance(value, str) else None


def public_payload(
    event_type: str, payload: dict[str, Any], private: PrivateValues
) -> dict[str, Any]:
    """The payload without its Host-private fields, every string scrubbed of private values."""
    hidden = PRIVATE_FIELDS.get(event_type, ())
    public = {k: v for k, v in payload.items() if k not in hidden}
    if event_type == "RunCreated" and isinstance(public.get("config"), dict):
        public["config"] = {k: v for k, v in public["config"].items() if k != "seed"}
    if event_type == "RunCreated" and isinstance(public.get("agent"), dict):
        agent = public["agent"]
        options = agent.get("options") if isinstance(agent.get("options"), dict) else {}
        public["agent"] = {
            **agent,
            "options": {k: v for k, v in options.items() if k not in PRIVATE_OPTIONS},
        }
    return _scrubbed(public, private)


def _scrubbed(value: Any, private: PrivateValues) -> Any:
    """Free text (an error, a reason, a policy's output) can quote a seed or a scenario."""
    if isinstance(value, str):
        return private.scrub(value)
    if isinstance(value, dict):
        return {k: _scrubbed(v, private) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrubbed(v, private) for v in value]
    return value


class EventsExporter(Exporter):
    name: ClassVar[str] = "events"
    summary: ClassVar[str] = "one event of a Run, with flat scalar columns and its public payload"
    task_categories: ClassVar[tuple[str, ...]] = ("tabular-classification",)
    batch_rows: ClassVar[int] = 4096

    def features(self) -> Features:
        return Features(
            {
                "position": Value("int64"),
                "run_id": Value("string"),
                "stream_version": Value("int64"),
                "event_id": Value("string"),
                "type": Value("string"),
                "schema_version": Value("int32"),
                "recorded_at": Value("timestamp[us, tz=UTC]"),
                **_SCALARS,
                "payload": Json(),
                "redacted": Value("bool"),
            }
        )

    def rows(self, run: RunHistory) -> Iterator[Row]:
        private = PrivateValues.of(run.created, self.store.blobs)
        group = self.group(run)
        for envelope in self.store.events.read_stream(run.stream_id, 0):
            if envelope.position > run.last_position:
                break  # appended since the history was read: the next export's
            payload = envelope.data()
            if (
                envelope.type == "CandidateValidated"
                and payload.get("submission_id") != run.finished.final_submission_id
            ):
                continue  # a candidate not selected: its held-out score stays with the Host
            if envelope.type == "CandidateAssessed":
                # Always a candidate not selected (the selected one's is AssessmentCompleted).
                continue
            row: dict[str, Any] = {
                "position": envelope.position,
                "run_id": run.run_id,
                "stream_version": envelope.stream_version,
                "event_id": envelope.event_id,
                "type": envelope.type,
                "schema_version": envelope.schema_version,
                "recorded_at": _EPOCH + dt.timedelta(microseconds=envelope.recorded_at // 1000),
            }
            for name, feature in _SCALARS.items():
                row[name] = _scalar(payload.get(name), feature.dtype)
                if isinstance(row[name], str):
                    row[name] = private.scrub(row[name])
            row["payload"] = public_payload(envelope.type, payload, private)
            yield group, row
