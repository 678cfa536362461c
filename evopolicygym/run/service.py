"""The Run service: the I/O around the decider.

``create_run`` plans and records a new Run; ``RunHost.drive`` folds its stream and
carries it to the end: start the Agent and serve its Session, evaluate
submissions, publish the workspace, validate, assess, conclude. Every change is
``decide`` → append (with the expected stream version and event ids derived from
the stream position, so a retried append is a no-op) → ``evolve``. Resuming is
the same call on a stream that already has events.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from evopolicygym.agents.process import AgentProcess
from evopolicygym.agents.providers import PROVIDERS, AgentError, launch_for
from evopolicygym.agents.redact import Redactor, is_credential_name
from evopolicygym.agents.streams import PARSERS
from evopolicygym.benchmark import Benchmark, EpisodeRecord
from evopolicygym.evaluation import EvaluationConfig, EvaluationResult, Evaluator
from evopolicygym.hostdirs import remove_tree
from evopolicygym.namespaces import containment_disabled
from evopolicygym.program import Program, ProgramError
from evopolicygym.protocol import CLI_ENV, SESSION_ENV, WORKSPACE_ENV
from evopolicygym.records.events import (
    ArtifactRef,
    EpisodeCompleted,
    EpisodeOutcome,
    Event,
    RunCreated,
    new_event,
)
from evopolicygym.records.location import Store
from evopolicygym.records.traces import encode_trace, plain_hook
from evopolicygym.registry import baseline_dir, load_benchmark
from evopolicygym.run.config import RunConfig
from evopolicygym.run.decider import (
    AgentExit,
    Assess,
    Command,
    CompleteAssessment,
    CompleteEvaluation,
    Conclude,
    Create,
    Evaluate,
    FailAssessment,
    FailEvaluation,
    FailValidation,
    Finish,
    Interrupt,
    Malformed,
    RecordCandidate,
    RecordMessages,
    Rejection,
    Resume,
    RunState,
    Select,
    StartAgent,
    StartAssessment,
    StartValidation,
    StopAgent,
    Submit,
    Validate,
    decide,
    fold,
    next_step,
)
from evopolicygym.run.liveness import RunBusy, host_alive, run_lock
from evopolicygym.run.pool import derive_run_seeds, plan_pool, planned, planned_split
from evopolicygym.run.session import SessionServer
from evopolicygym.run.skills import Skill, skill_of, write_skills
from evopolicygym.run.workspace import (
    build_feedback,
    feedback_dir_name,
    rebuild_workspace,
    sync_feedback,
)
from evopolicygym.transcript import AgentIdentity, Message, task_files

__all__ = ["RunBusy", "RunError", "RunHost", "create_run", "host_alive", "load_run", "stream_id"]

log = logging.getLogger(__name__)

STREAM_PREFIX = "run-"
FLUSH_EVERY_S = 2.0  # transcript chunks reach the log at least this often
FLUSH_MESSAGES = 64
STOP_GRACE_S = 30.0  # how long an Agent may linger after its session closed
MAX_TRACE_STEPS = 10_000  # per recorded Episode


class RunError(Exception):
    """A Run that cannot be created or carried on; the message says why."""


def stream_id(run_id: str) -> str:
    return STREAM_PREFIX + run_id


def _new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:6]


def _event_id(run_id: str, version: int) -> str:
    # The n-th event of a Run always has the same id: re-appending it after a lost
    # acknowledgement is recognised as the same event.
    return hashlib.sha256(f"evopolicygym:run-event:{run_id}:{version}".encode()).hexdigest()[:32]


# --------------------------------------------------------------------------- creation


def _public_spec(benchmark: Benchmark) -> dict[str, Any]:
    spec: dict[str, Any] = msgspec.to_builtins(benchmark.spec)
    return spec


def create_run(
    store: Store,
    benchmark_ref: str,
    config: RunConfig,
    agent: AgentIdentity,
    *,
    program: Program | None = None,
    run_id: str | None = None,
    skills: Sequence[Skill] = (),
) -> str:
    """Plan and record a new Run; return its id. Nothing is recorded if anything is wrong."""
    names = [skill.name for skill in skills]
    if len(set(names)) != len(names):
        raise RunError(f"two skills share a name: {', '.join(sorted(n for n in names if names.count(n) > 1))}")
    config = config.resolved()
    benchmark = load_benchmark(benchmark_ref, config.benchmark_params or None)
    splits = set(benchmark.splits)
    for split in (config.train_split, config.validation.split, config.assessment.split):
        if split not in splits:
            raise RunError(f"{benchmark.spec.id} has no split {split!r} (it has {', '.join(benchmark.splits)})")
    if program is None:
        directory = baseline_dir(benchmark)
        if directory is None:
            raise RunError(f"{benchmark.spec.id} has no baseline program: give one with --program DIR")
        program = Program.from_directory(directory)
    if "policy.py" not in program.paths():
        raise RunError("the initial program has no policy.py at its top level")
    seeds = derive_run_seeds(config.seed)
    pool = plan_pool(benchmark, config, seeds)
    run_id = run_id or _new_run_id()
    store.blobs.put_program(program)  # before the event that names it
    for skill in skills:
        store.blobs.put_program(skill.program)
    decision = decide(
        RunState(),
        Create(
            run_id=run_id,
            config=config,
            benchmark_id=benchmark_ref,
            benchmark_spec=_public_spec(benchmark),
            environment_digest=benchmark.spec.environment_digest,
            initial_program_digest=program.digest,
            agent=agent,
            pool=pool,
            seeds=seeds,
            skill_program_digests=[skill.program.digest for skill in skills],
        ),
    )
    assert not isinstance(decision, Rejection), decision
    store.events.append(stream_id(run_id), [new_event(decision[0], _event_id(run_id, 1))], 0)
    return run_id


def load_run(store: Store, run_id: str) -> tuple[RunState, list[Event]]:
    """Fold the Run's stream: its state and its typed events."""
    events = [envelope.event() for envelope in store.events.read_stream(stream_id(run_id))]
    if not events:
        raise RunError(f"no run {run_id!r} in the store at {store.path}")
    return fold(events), events


# --------------------------------------------------------------------------- the Host


OnChange = Callable[[RunState, list[Event]], None]


class RunHost:
    """Carries one Run forward from whatever its log says."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        *,
        workspace: Path | None = None,
        on_change: OnChange | None = None,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.stream = stream_id(run_id)
        self._workspace_arg = workspace
        self._on_change = on_change
        self._lock = threading.RLock()
        self._state = RunState()
        self._events: list[Event] = []
        self._evaluator: Evaluator | None = None
        self._benchmark: Benchmark | None = None
        self._workspace: Path | None = None
        self._pending_messages: list[Message] = []
        self._redactor = Redactor()
        self._agent: AgentProcess | None = None
        self._raw_offset = 0  # of the running Agent's stdout, recorded with the last chunk
        self._raw_held = b""  # read but not yet recorded: an unfinished line or secret block
        self._agent_done = False
        self._last_flush = 0.0

    # ------------------------------------------------------------------ state and log

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def events(self) -> list[Event]:
        """The Run's events as folded so far."""
        return list(self._events)

    @property
    def workspace(self) -> Path | None:
        return self._workspace

    def _apply(self, command: Command) -> list[Event] | Rejection:
        """Decide ``command``; append what it yields (a rejection's event too); evolve."""
        with self._lock:
            decision = decide(self._state, command)
            if isinstance(decision, Rejection):
                if decision.event is not None:
                    self._append([decision.event])
                return decision
            self._append(decision)
            return decision

    def _must(self, command: Command) -> list[Event]:
        decision = self._apply(command)
        if isinstance(decision, Rejection):
            raise RunError(f"internal: {type(command).__name__} refused: {decision.message}")
        return decision

    def _append(self, events: list[Event]) -> None:
        version = self._state.version
        batch = [new_event(event, _event_id(self.run_id, version + i + 1)) for i, event in enumerate(events)]
        # Contention waits inside SQLite (its busy timeout); a version conflict means another
        # Host, which the run lock rules out, so it is an error, not something to retry.
        self.store.events.append(self.stream, batch, version)
        state = fold(events, self._state)
        self._state = state
        self._events.extend(events)
        if self._on_change is not None:
            with contextlib.suppress(Exception):  # a view must never stop a Run
                self._on_change(state, events)

    # ------------------------------------------------------------------ driving

    def drive(self) -> RunState:
        """Carry the Run to its end (or until interrupted) and return its final state."""
        with run_lock(self.store, self.run_id):
            self._state, self._events = load_run(self.store, self.run_id)
            if self._state.finished is not None:
                return self._state
            created = self._created()
            self._benchmark = self._load_benchmark(created)
            if self._state.version > 1:  # someone carried it before: record the gap
                if not self._state.interrupted:
                    self._must(Interrupt(reason="the Host stopped without finishing the Run",
                                         last_position=self.store.events.head()))
                self._must(Resume())
            self._evaluator = Evaluator()
            try:
                self._loop()
            except KeyboardInterrupt:
                with contextlib.suppress(Exception):
                    self._apply(Interrupt(reason="interrupted by a signal", last_position=self.store.events.head()))
                raise
            finally:
                self._evaluator.close()
                self._cleanup_workspace()
            return self._state

    def _created(self) -> RunCreated:
        first = self._events[0]
        assert isinstance(first, RunCreated)
        return first

    def _load_benchmark(self, created: RunCreated) -> Benchmark:
        config = self._state.cfg
        try:
            benchmark = load_benchmark(created.benchmark_id, config.benchmark_params or None)
        except Exception as exc:
            raise RunError(f"cannot load benchmark {created.benchmark_id!r} for run {self.run_id}: {exc}") from exc
        if benchmark.spec.environment_digest != created.environment_digest:
            raise RunError(
                f"benchmark {created.benchmark_id} has changed since run {self.run_id} was created "
                f"(environment digest {benchmark.spec.environment_digest}, recorded {created.environment_digest})"
            )
        return benchmark

    def _loop(self) -> None:
        while True:
            step = next_step(self._state)
            match step:
                case Conclude():
                    if self._state.finished is None:
                        self._must(Conclude())
                    return
                case Evaluate():
                    self._evaluate_submission(step)
                case StartAgent():
                    self._run_agent()
                case StopAgent():
                    # Only reachable on resume with an Agent recorded as running; Resume records
                    # its exit, so this is a bug if it happens.
                    raise RunError("internal: an Agent is recorded as running with no process")
                case Validate():
                    self._validate(step)
                case Assess():
                    self._assess(step)
                case _:
                    raise RunError(f"internal: unexpected step {step!r}")

    # ------------------------------------------------------------------ evaluation

    def _eval_config(self, split: str, count: int) -> EvaluationConfig:
        config = self._state.cfg
        recorded = config.record_trajectories == "all" or (
            config.record_trajectories == "train" and split == config.train_split
        )
        # Whole Episodes for offline RL (bounded: a trace is held in memory until stored).
        assert self._benchmark is not None
        trace = min(self._benchmark.spec.max_episode_steps, MAX_TRACE_STEPS) if recorded else 0
        return EvaluationConfig(
            split=split,
            episodes=count,
            jobs=config.jobs,
            episode_timeout=config.episode_timeout,
            trace_steps=trace,
        )

    def _evaluate_submission(self, step: Evaluate) -> dict[str, bytes]:
        """Evaluate the pending Submission, record the outcome, publish; the feedback files."""
        assert self._evaluator is not None and self._benchmark is not None
        config = self._state.cfg
        indices = list(step.indices)
        try:
            program = self.store.blobs.get_program(step.program_digest)
            result = self._evaluator.evaluate(
                program,
                self._benchmark,
                self._eval_config(config.train_split, len(indices)),
                episodes=planned(list(self._state.pool), indices),
            )
            outcome = self._completed(step.submission_id, indices, result)
        except Exception as exc:  # any fault but the policy's own is the Host's: recorded, never a crash
            log.warning("evaluation of Submission %s failed", step.submission_id, exc_info=True)
            self._must(FailEvaluation(submission_id=step.submission_id, error=_one_line(exc)))
            return self._publish()
        self._must(outcome)
        return self._publish()

    def _completed(self, submission_id: int, indices: list[int], result: EvaluationResult) -> CompleteEvaluation:
        """The command recording ``result``, its traces and artifacts stored first as blobs."""
        episodes = [
            EpisodeCompleted(
                submission_id=submission_id,
                index=index,
                status=summary.status,
                total_reward=summary.total_reward,
                steps=summary.steps,
                failure=summary.failure,
                duration_s=summary.duration_s,
                output_tail=record.stderr_tail,
                trace_blob=self._trace_blob(record),
            )
            for index, summary, record in zip(indices, result.episodes, result.records, strict=True)
        ]
        artifacts = [
            ArtifactRef(
                name=a.name,
                media_type=a.media_type,
                retention=a.retention,
                blob=self.store.blobs.put(a.data),
                size=len(a.data),
            )
            for a in result.feedback.artifacts
        ]
        return CompleteEvaluation(
            submission_id=submission_id,
            episodes=episodes,
            score=float(result.feedback.score),
            failures=result.failures,
            content=_jsonable(result.feedback.content),
            artifacts=artifacts,
        )

    def _trace_blob(self, record: EpisodeRecord) -> str | None:
        if not record.trace:
            return None
        try:
            data = encode_trace(record.initial_observation, record.trace)
        except (TypeError, ValueError, msgspec.EncodeError):
            return None
        return self.store.blobs.put(data)

    def _held_out(self, program_digest: str, split: str, seed: int, count: int) -> EvaluationResult:
        assert self._evaluator is not None and self._benchmark is not None
        program = self.store.blobs.get_program(program_digest)
        return self._evaluator.evaluate(
            program,
            self._benchmark,
            self._eval_config(split, count),
            episodes=planned_split(self._benchmark, split, seed, count),
        )

    def _validate(self, step: Validate) -> None:
        state = self._state
        validation = state.cfg.validation
        if not validation.enabled:
            self._must(Select())
            return
        if state.validation_candidates is None:
            self._must(StartValidation())
        done = {r.submission_id for r in self._state.validated}
        for candidate in self._state.validation_candidates or ():
            if candidate in done:
                continue
            submission = self._state.submission(candidate)
            assert submission is not None
            try:
                result = self._held_out(
                    submission.program_digest, validation.split, self._state.seeds["validation"],
                    validation.episodes_per_candidate,
                )
            except Exception as exc:
                log.warning("validation of Submission %s failed", candidate, exc_info=True)
                self._must(FailValidation(error=_one_line(exc)))
                return
            self._must(
                RecordCandidate(
                    submission_id=candidate,
                    score=float(result.feedback.score),
                    failures=result.failures,
                    episodes=_outcomes(result),
                )
            )

    def _assess(self, step: Assess) -> None:
        if not self._state.assessment_started:
            self._must(StartAssessment())
        assessment = self._state.cfg.assessment
        submission = self._state.submission(step.submission_id)
        assert submission is not None
        try:
            result = self._held_out(
                submission.program_digest, assessment.split, self._state.seeds["assessment"], assessment.episodes
            )
        except Exception as exc:
            log.warning("assessment failed", exc_info=True)
            self._must(FailAssessment(error=_one_line(exc)))
            return
        self._must(
            CompleteAssessment(
                score=float(result.feedback.score),
                failures=result.failures,
                episodes=_outcomes(result),
                content=_jsonable(result.feedback.content),
            )
        )

    # ------------------------------------------------------------------ workspace

    def _prepare_workspace(self) -> tuple[Path, str]:
        """The workspace, rebuilt from the log, and the task text (TASK.md) written into it."""
        created = self._created()
        if self._workspace is None:
            workspace = self._workspace_arg or self._remembered_workspace()
            if workspace.resolve().is_relative_to(self.store.path.resolve()):
                raise RunError(f"the workspace {workspace} is inside the store, which the Agent must not see")
            self._workspace = workspace
            self._workspace.mkdir(parents=True, exist_ok=True)
        if self._state.agent_attempts == 0:
            # A new Run: nothing of whatever used this directory before is the Agent's.
            for part in ("program", "analysis"):
                path = self._workspace / part
                if path.is_symlink() or path.is_file():
                    path.unlink()
                elif path.exists():
                    remove_tree(path)
        skills = [
            skill_of(self.store.blobs.get_program(digest)) for digest in created.skill_program_digests
        ]
        task_md, task_json = task_files(
            created.benchmark_spec, self._state.cfg.to_dict(), [(s.name, s.description) for s in skills]
        )
        try:
            rebuild_workspace(
                self._workspace,
                self._events,
                self.store.blobs,
                self._state.cfg.bulk_feedback_retention_bytes,
                self.store.blobs.get_program(created.initial_program_digest),
                task_md,
                task_json,
            )
            write_skills(self._workspace, skills)
        except OSError as exc:
            raise RunError(f"cannot prepare the workspace {self._workspace}: {_one_line(exc)}") from exc
        return self._workspace, task_md

    def _remembered_workspace(self) -> Path:
        """The temporary workspace of an earlier attempt (with the Agent's unsubmitted edits),
        or a new one."""
        note = self._workspace_note()
        with contextlib.suppress(OSError, UnicodeDecodeError):
            earlier = Path(note.read_text().strip())
            if earlier.is_dir():
                return earlier
        fresh = Path(tempfile.mkdtemp(prefix=f"evopolicy-{self.run_id}-"))
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"{fresh}\n")
        return fresh

    def _feedback_files(self) -> dict[str, bytes]:
        return build_feedback(self._events, self.store.blobs, self._state.cfg.bulk_feedback_retention_bytes)

    def _publish(self) -> dict[str, bytes]:
        files = self._feedback_files()
        if self._workspace is not None:
            try:
                sync_feedback(self._workspace, files)
            except Exception:  # the Agent can wreck its own workspace; the record stands
                log.warning("could not publish feedback into %s", self._workspace, exc_info=True)
        return files

    def _workspace_note(self) -> Path:
        """Where the Host remembers a temporary workspace, beside the Run's lock (never in the log,
        which must not hold machine paths the Agent could learn from an export)."""
        return self.store.path / "runs" / f"{self.run_id}.workspace"

    def _cleanup_workspace(self) -> None:
        if self._workspace is not None and self._workspace_arg is None and self._state.finished is not None:
            shutil.rmtree(self._workspace, ignore_errors=True)
            self._workspace_note().unlink(missing_ok=True)

    # ------------------------------------------------------------------ the Agent

    def _run_agent(self) -> None:
        created = self._created()
        workspace, task_md = self._prepare_workspace()
        try:
            launch = launch_for(created.agent, task_md)  # the CLI providers take it as their prompt
        except AgentError as exc:  # say, the command is gone from PATH since the Run began
            self._must(StartAgent(command=[], pid=None))
            self._must(AgentExit(exit_code=None, signal=None, reason=f"start_failed: {_one_line(exc)}"))
            return
        self._redactor = _redactor_for(created.agent)
        with SessionServer(self._handle) as server:
            env = dict(launch.env)
            env[SESSION_ENV] = server.path
            env[WORKSPACE_ENV] = str(workspace)
            env.setdefault(CLI_ENV, msgspec.json.encode([sys.executable, "-m", "evopolicygym.cli"]).decode())
            with self._lock:
                self._raw_held = b""
                # The task opens every attempt's transcript; nothing is flushed before StartAgent.
                self._pending_messages = [Message(role="system", content=task_md, at=time.time_ns())]
                try:
                    agent = AgentProcess(
                        self._jailed(launch.argv),
                        cwd=str(workspace),
                        env=env,
                        on_message=self._queue_message,
                        parser=PARSERS[launch.stream](),
                    )
                except OSError as exc:
                    self._pending_messages = []
                    self._must(StartAgent(command=self._redactor.value(launch.argv), pid=None))
                    self._must(AgentExit(exit_code=None, signal=None, reason=f"start_failed: {_one_line(exc)}"))
                    return
                self._must(StartAgent(command=self._redactor.value(launch.argv), pid=agent.pid))
                self._agent, self._raw_offset = agent, 0
                self._last_flush = time.monotonic()
            reason = self._supervise(agent)
            agent.reap()  # its leftovers die with it; its stdout is read to the end
        with self._lock:
            self._agent_done = True
        self._flush_messages(force=True)
        with self._lock:
            self._agent, self._agent_done = None, False
        stdout, stderr = agent.outputs()
        status = agent.status(reason)
        self._must(
            AgentExit(
                exit_code=status.exit_code,
                signal=status.signal,
                reason=status.reason,
                stdout_blob=self.store.blobs.put(self._redactor.bytes(stdout)),
                stderr_blob=self.store.blobs.put(self._redactor.bytes(stderr)),
            )
        )

    def _jailed(self, argv: list[str]) -> list[str]:
        """``argv`` run where the store is hidden and the Host's /proc is out of sight."""
        store = str(self.store.path.resolve())
        jail = [sys.executable, "-m", "evopolicygym.agents.jail", "--hide", store]
        if containment_disabled():  # the same override as for policies
            jail.append("--uncontained")
        return [*jail, "--", *argv]

    def _supervise(self, agent: AgentProcess) -> str:
        """Wait for the Agent; stop it on timeout or once its session has closed."""
        config = self._state.cfg
        deadline = agent.started + config.agent_timeout
        closed_at: float | None = None
        try:
            while True:
                if agent.wait(0.25) is not None:
                    return "exited"
                self._flush_messages()
                now = time.monotonic()
                if now >= deadline:
                    agent.stop()
                    return "timeout"
                if not self._state.authority_open:
                    closed_at = closed_at or now
                    if now - closed_at >= STOP_GRACE_S:
                        agent.stop()
                        return "stopped"
        except BaseException:
            agent.stop(grace=1.0)
            raise

    def _queue_message(self, message: Message) -> None:
        redacted = self._redactor.message(message)  # before anything of it is recorded
        with self._lock:
            self._pending_messages.append(redacted)

    def _flush_messages(self, force: bool = False) -> None:
        with self._lock:
            if not self._pending_messages:
                return
            due = (
                force
                or len(self._pending_messages) >= FLUSH_MESSAGES
                or time.monotonic() - self._last_flush >= FLUSH_EVERY_S
            )
            if not due:
                return
            messages, self._pending_messages = self._pending_messages, []
            self._last_flush = time.monotonic()
            raw_blob = None
            if self._agent is not None:  # the raw stream since the last chunk, kept with it
                fresh = self._agent.stdout_since(self._raw_offset)
                self._raw_offset += len(fresh)
                raw, self._raw_held = _whole_lines(self._raw_held + fresh, final=self._agent_done)
                raw_blob = self.store.blobs.put(self._redactor.bytes(raw)) if raw else None
            self._must(RecordMessages(messages=messages, raw_blob=raw_blob))

    # ------------------------------------------------------------------ the Session

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        # What the Agent sends is recorded (a selector, a problem, a malformed frame's text):
        # secrets out first. The program files are its work and are stored as submitted.
        request = {k: v if k == "files" else self._redactor.value(v) for k, v in request.items()}
        op = request.get("op")
        if op == "submit":
            return self._handle_submit(request)
        if op == "finish":
            self._flush_messages(force=True)  # what led to the finish precedes it in the log
            decision = self._apply(Finish(request_id=request["request_id"], candidates=list(request["candidates"])))
            if isinstance(decision, Rejection):
                return {"ok": False, "error": decision.as_error()}
            return {"ok": True, "result": {"accepted": True, "candidates": list(request["candidates"])}}
        if op == "malformed":  # recorded like any rejection
            decision = self._apply(Malformed(message=str(request.get("message", ""))))
            assert isinstance(decision, Rejection)
            return {"ok": False, "error": decision.as_error()}
        return {"ok": False, "error": {"code": "invalid_request", "message": f"unknown op {op!r}"}}

    def _handle_submit(self, request: dict[str, Any]) -> dict[str, Any]:
        program, problem = _capture(request.get("files"), request.get("problem"))
        with self._lock:
            self._flush_messages(force=True)  # the transcript up to the request precedes its events
            if program is not None:
                self.store.blobs.put_program(program)
            decision = self._apply(
                Submit(
                    request_id=request["request_id"],
                    selector=request.get("episodes") or "",
                    program_digest=program.digest if program is not None else None,
                    problem=problem,
                )
            )
        if isinstance(decision, Rejection):
            return {"ok": False, "error": decision.as_error()}
        step = next_step(self._state)
        assert isinstance(step, Evaluate)
        files = self._evaluate_submission(step)
        key = f"{feedback_dir_name(step.submission_id)}/feedback.json"
        result: dict[str, Any] = msgspec.json.decode(files[key])
        if result.get("status") == "failed":
            return {
                "ok": False,
                "error": {"code": "evaluation_failed", "message": f"the evaluation failed on the Host's side: {result.get('error')}"},
            }
        result["feedback_path"] = f"feedback/{key}"
        return {"ok": True, "result": result}


# --------------------------------------------------------------------------- helpers


def _capture(files: Any, problem: Any) -> tuple[Program | None, str | None]:
    """The submitted Program, or why it cannot be one (a program_invalid rejection)."""
    if problem:
        return None, str(problem)
    if not isinstance(files, dict):
        return None, "no program files were sent"
    try:
        program = Program.from_files(files)
    except ProgramError as exc:
        return None, str(exc)
    if "policy.py" not in program.paths():
        return None, "the program has no policy.py at its top level"
    try:
        compile(program.read("policy.py"), "policy.py", "exec", dont_inherit=True)
    except Exception as exc:  # SyntaxError, but also MemoryError/RecursionError on hostile code
        return None, f"policy.py does not compile: {_one_line(exc)}"
    return program, None


def _outcomes(result: EvaluationResult) -> list[EpisodeOutcome]:
    return [
        EpisodeOutcome(index=e.index, status=e.status, total_reward=e.total_reward, steps=e.steps, failure=e.failure)
        for e in result.episodes
    ]


def _jsonable(content: dict[str, Any]) -> dict[str, Any]:
    """Feedback content as plain JSON values (a Benchmark may hand back numpy scalars)."""
    data: dict[str, Any] = msgspec.json.decode(msgspec.json.encode(content, enc_hook=plain_hook))
    return data


_PEM_BEGIN = re.compile(rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = re.compile(rb"-----END [A-Z0-9 ]*PRIVATE KEY-----")


def _whole_lines(data: bytes, *, final: bool) -> tuple[bytes, bytes]:
    """(what may be recorded now, what to hold): whole lines only, and nothing from an
    unclosed private-key block on, so redaction never sees a secret cut in two."""
    if final:
        return data, b""
    cut = data.rfind(b"\n") + 1
    begins = list(_PEM_BEGIN.finditer(data, 0, cut))
    if begins and not _PEM_END.search(data, begins[-1].end(), cut):
        cut = data.rfind(b"\n", 0, begins[-1].start()) + 1
    return data[:cut], data[cut:]


def _redactor_for(agent: AgentIdentity) -> Redactor:
    """Secrets the Agent's transcript and output may hold: the values of its provider's
    credential variables (and those it was given), and every known secret pattern."""
    provider = PROVIDERS.get(agent.provider)
    names = [name for name in (provider.env if provider else ()) if is_credential_name(name)]
    names += [str(name) for name in agent.options.get("env", [])]  # given on purpose: all kept out
    if agent.options.get("api_key_env"):
        names.append(str(agent.options["api_key_env"]))
    return Redactor.from_environment(names)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:2000]
