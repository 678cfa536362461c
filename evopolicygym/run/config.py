"""RunConfig: every knob of a Run, validated, with defaults resolved once at creation.

The resolved config is stored in RunCreated, so a resumed or replayed Run never
depends on the defaults of the code that reads it.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = [
    "MAX_EPISODES",
    "MAX_TRACE_STEPS",
    "RULES",
    "AssessmentConfig",
    "FeedbackConfig",
    "RunConfig",
    "RunConfigError",
    "ValidationConfig",
]

# The largest Episode budget and pool a Run takes (the CLI's --budget and --pool-size say so).
MAX_EPISODES = 1_000_000

# The version of the Run's rules a new Run is created with (recorded in its config, so a
# Run is always replayed and resumed under the rules it was made under):
# 1: the Host nominates candidates when the Agent exits without finishing, a Program
#    submitted again on the same indices is refused (submit-time duplicate_submission),
#    Validation runs the candidates only.
# 2: candidates come only from an accepted finish unless host_nomination is asked for;
#    a repeated submission is a normal, charged one; Validation also runs the initial
#    Program as a reference, so a Run says whether it improved on it.
RULES = 2

# Steps the Host records of one Episode's trace (so the most a Feedback trace can show).
MAX_TRACE_STEPS = 10_000

FinishBudgetPolicy = Literal["allow_early", "require_budget_exhaustion"]
RecordTrajectories = Literal["none", "train", "all"]


class RunConfigError(ValueError):
    """A RunConfig value that cannot work; the message names the field."""


class ValidationConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    episodes_per_candidate: int = 16
    split: str = "validation"
    max_candidates: int = 3


class AssessmentConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    episodes: int = 32
    split: str = "assessment"
    # After the selected Program's Assessment, every other validated candidate is assessed
    # on the same Episodes (CandidateAssessed), for a study of whether Validation's choice
    # holds; the selection and the Run's assessment score stay the selected one's. Absent
    # in a config recorded before it: off.
    candidates: bool = False


class FeedbackConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What each Submission's Feedback shows the Agent: a condition a study can vary.

    Only the Agent's view changes (``feedback/`` and the submit reply); the log keeps every
    Episode, trace and artifact either way. The defaults are the Feedback of a Run recorded
    before this was a setting.
    """

    # "benchmark": the Benchmark's own artifacts as it published them (its trace of a few
    # Episodes among them). A number N or "all": instead of the Benchmark's bulk artifacts,
    # the Host's recorded trace of each of the Submission's first N (or all) Episodes, one
    # artifact per Episode; 0 shows no trace.
    traces: int | Literal["benchmark", "all"] = "benchmark"
    trace_steps: int | None = None  # steps of each Host trace shown; None: all recorded
    episodes: bool = True  # the per-Episode rows (status, return, steps, failure, output tail)
    content: bool = True  # the Benchmark's public content (its summaries, per-Episode details)

    @property
    def host_traces(self) -> bool:
        """Whether the Host's traces replace the Benchmark's bulk artifacts."""
        return self.traces != "benchmark"

    def trace_count(self, episodes: int) -> int:
        """How many of a Submission's ``episodes`` Episodes have their trace shown."""
        if self.traces == "all":
            return episodes
        return 0 if self.traces == "benchmark" else min(self.traces, episodes)


class RunConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    benchmark_params: dict[str, Any] = {}  # the Benchmark factory's parameters, to reload it
    episode_budget: int = 64
    episode_pool_size: int | None = None  # default: the budget
    max_submissions: int | None = None  # default: the budget
    max_episodes_per_submission: int | None = None  # default: the pool size
    finish_budget_policy: FinishBudgetPolicy = "allow_early"
    train_split: str = "train"
    validation: ValidationConfig = ValidationConfig()
    assessment: AssessmentConfig = AssessmentConfig()
    seed: int = 0  # Host-private: every Episode and policy seed follows from it
    episode_timeout: float = 30.0  # seconds of policy time per Episode
    agent_timeout: float = 3600.0  # wall-clock seconds for the Agent, per attempt
    max_agent_attempts: int = 3  # starts of the Agent, counting restarts on resume
    bulk_feedback_retention_bytes: int = 64 * 1024 * 1024
    jobs: int | None = None  # evaluation processes; None: one per CPU
    record_trajectories: RecordTrajectories = "train"
    # When the Agent exits without an accepted finish, the Host nominates its best
    # published Submissions as candidates (recorded as handoff "host"). Rules 2 only.
    host_nomination: bool = False
    feedback: FeedbackConfig = (
        FeedbackConfig()
    )  # absent in a config recorded before it: the default
    rules: int | None = None  # see RULES; None in a config recorded before rules were versioned

    @property
    def legacy(self) -> bool:
        """Whether the Run follows rules 1 (see RULES)."""
        return (self.rules or 1) < 2

    def resolved(self) -> RunConfig:
        """The config with every default filled in, after checking every value."""
        pool = self.episode_budget if self.episode_pool_size is None else self.episode_pool_size
        resolved = msgspec.structs.replace(
            self,
            rules=RULES if self.rules is None else self.rules,
            episode_pool_size=pool,
            max_submissions=self.episode_budget
            if self.max_submissions is None
            else self.max_submissions,
            max_episodes_per_submission=(
                pool
                if self.max_episodes_per_submission is None
                else self.max_episodes_per_submission
            ),
        )
        resolved._check()
        return resolved

    @property
    def pool_size(self) -> int:
        assert self.episode_pool_size is not None, "resolve the config first"
        return self.episode_pool_size

    @property
    def submission_limit(self) -> int:
        assert self.max_submissions is not None, "resolve the config first"
        return self.max_submissions

    @property
    def episode_limit(self) -> int:
        assert self.max_episodes_per_submission is not None, "resolve the config first"
        return self.max_episodes_per_submission

    def _check(self) -> None:
        def need(ok: bool, message: str) -> None:
            if not ok:
                raise RunConfigError(message)

        need(
            1 <= self.episode_budget <= MAX_EPISODES,
            f"episode_budget must be between 1 and {MAX_EPISODES:,}",
        )
        need(
            1 <= self.pool_size <= MAX_EPISODES,
            f"episode_pool_size must be between 1 and {MAX_EPISODES:,}",
        )
        need(self.submission_limit >= 1, "max_submissions must be at least 1")
        need(
            1 <= self.episode_limit <= self.pool_size,
            "max_episodes_per_submission must be between 1 and the pool size",
        )
        if self.finish_budget_policy == "require_budget_exhaustion":
            need(
                self.submission_limit * self.episode_limit >= self.episode_budget,
                "require_budget_exhaustion cannot be met: max_submissions x "
                "max_episodes_per_submission is less than episode_budget",
            )
        need(
            self.validation.episodes_per_candidate >= 1,
            "validation episodes_per_candidate must be >= 1",
        )
        need(
            1 <= self.validation.max_candidates <= 100,
            "validation max_candidates must be between 1 and 100",
        )
        need(self.assessment.episodes >= 1, "assessment episodes must be >= 1")
        need(0 < self.episode_timeout <= 86_400, "episode_timeout must be in (0, 86400] seconds")
        need(0 < self.agent_timeout <= 30 * 86_400, "agent_timeout must be in (0, 30 days]")
        need(1 <= self.max_agent_attempts <= 100, "max_agent_attempts must be between 1 and 100")
        need(self.bulk_feedback_retention_bytes >= 0, "bulk_feedback_retention_bytes must be >= 0")
        self._check_feedback(need)
        need(self.jobs is None or self.jobs >= 1, "jobs must be >= 1")
        need(0 <= self.seed < 2**63, "seed must be between 0 and 2**63 - 1")
        need(self.rules in (1, 2), "rules must be 1 or 2")
        need(not (self.host_nomination and self.legacy), "host_nomination needs rules 2")
        splits = {self.train_split, self.validation.split, self.assessment.split}
        need(len(splits) == 3, "train, validation and assessment splits must differ")

    def _check_feedback(self, need: Any) -> None:
        feedback = self.feedback
        if isinstance(feedback.traces, int):
            need(
                0 <= feedback.traces <= MAX_EPISODES,
                f"feedback traces must be between 0 and {MAX_EPISODES:,}, 'all' or 'benchmark'",
            )
        if feedback.trace_steps is not None:
            need(
                1 <= feedback.trace_steps <= MAX_TRACE_STEPS,
                f"feedback trace_steps must be between 1 and {MAX_TRACE_STEPS:,}",
            )
            need(
                feedback.host_traces,
                "feedback trace_steps needs feedback traces set to a number or 'all'",
            )
        need(
            feedback.traces in ("benchmark", 0) or self.record_trajectories != "none",
            "feedback traces need record_trajectories 'train' or 'all': "
            "the traces shown are the recorded ones",
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = msgspec.to_builtins(self)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as exc:
            raise RunConfigError(f"invalid run config: {exc}") from exc
