"""The Session gateway: what the Agent's Session requests mean to the Run.

A request (already shape-checked by the ``SessionServer``, on whose thread this
runs) becomes a ``Submit``, ``Finish`` or ``Malformed`` command; what the decider
answers becomes the reply. The transcript up to a request is flushed before the
request's events, so the log shows what led to it first.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import msgspec

from evopolicygym.program import Program, ProgramError
from evopolicygym.run.decider import Evaluate, Finish, Malformed, Rejection, Submit, next_step
from evopolicygym.run.ledger import Ledger, Stopping, one_line
from evopolicygym.run.supervisor import AgentSupervisor
from evopolicygym.run.workspace import feedback_dir_name

__all__ = ["SessionGateway", "program_problem"]


class SessionGateway:
    """Handles the Agent's requests: ``handle`` is the ``SessionServer``'s handler."""

    def __init__(
        self,
        ledger: Ledger,
        supervisor: AgentSupervisor,
        evaluate: Callable[[Evaluate], dict[str, bytes]],
    ) -> None:
        self._ledger = ledger
        self._supervisor = supervisor
        self._evaluate = evaluate  # runs the accepted Submission; its feedback files

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._handle(request)
        except Stopping as exc:
            return {"ok": False, "error": {"code": "internal_error", "message": str(exc)}}
        except Exception as exc:
            # A storage fault met while serving the Agent stops the Run (the supervisor
            # watches ``fault``); the Agent learns only that the Host failed.
            if self._ledger.host_fault(exc) is None:
                raise
            return {
                "ok": False,
                "error": {
                    "code": "internal_error",
                    "message": "the Host failed; the Run is interrupted",
                },
            }

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        # What the Agent sends is recorded (a selector, a problem, a malformed frame's text):
        # secrets out first. The program files are its work and are stored as submitted.
        redactor = self._supervisor.redactor
        request = {
            k: v if k == "files" else redactor.value(_bounded(v)) for k, v in request.items()
        }
        op = request.get("op")
        if op == "submit":
            return self._submit(request)
        if op == "finish":
            self._supervisor.drain()
            self._supervisor.flush(force=True)  # what led to the finish precedes it in the log
            decision = self._ledger.apply(
                Finish(request_id=request["request_id"], candidates=list(request["candidates"]))
            )
            if isinstance(decision, Rejection):
                return {"ok": False, "error": decision.as_error()}
            return {
                "ok": True,
                "result": {"accepted": True, "candidates": list(request["candidates"])},
            }
        if op == "malformed":  # recorded like any rejection
            decision = self._ledger.apply(Malformed(message=str(request.get("message", ""))))
            assert isinstance(decision, Rejection)
            return {"ok": False, "error": decision.as_error()}
        return {"ok": False, "error": {"code": "invalid_request", "message": f"unknown op {op!r}"}}

    def _submit(self, request: dict[str, Any]) -> dict[str, Any]:
        ledger = self._ledger
        program, problem = _capture(request.get("files"), request.get("problem"))
        self._supervisor.drain()
        with ledger.lock:
            self._supervisor.flush(
                force=True
            )  # the transcript up to the request precedes its events
            if program is not None:
                ledger.store.blobs.put_program(program)
            decision = ledger.apply(
                Submit(
                    request_id=request["request_id"],
                    selector=request.get("episodes") or "",
                    program_digest=program.digest if program is not None else None,
                    problem=problem,
                    parent=request.get("parent"),
                )
            )
        if isinstance(decision, Rejection):
            return {"ok": False, "error": decision.as_error()}
        step = next_step(ledger.state)
        assert isinstance(step, Evaluate)
        files = self._evaluate(step)
        key = f"{feedback_dir_name(step.submission_id)}/feedback.json"
        result: dict[str, Any] = msgspec.json.decode(files[key])
        if result.get("status") == "failed":
            return {
                "ok": False,
                "error": {
                    "code": "evaluation_failed",
                    "message": f"the evaluation failed on the Host's side: {result.get('error')}",
                },
            }
        result["feedback_path"] = f"feedback/{key}"
        return {"ok": True, "result": result}


MAX_TEXT_CHARS = 4096  # of a problem or malformed-request text the Host records and answers
MAX_COMPILED_IN_PROCESS = 256 * 1024  # a larger policy.py is compiled in a child under limits
COMPILE_LIMITS = (1 << 30, 20)  # address space (bytes), CPU seconds of that child


def _bounded(value: Any) -> Any:
    """A text the Agent made (a problem, a malformed frame's complaint) cut to what the Host
    records and answers, with a marker (a selector is never this long: the protocol refuses
    one over ``MAX_SELECTOR_CHARS``)."""
    if not isinstance(value, str) or len(value) <= MAX_TEXT_CHARS:
        return value
    return f"{value[:MAX_TEXT_CHARS]} … [{len(value) - MAX_TEXT_CHARS} more characters cut]"


def _compiles(source: bytes) -> str | None:
    """Why ``source`` does not compile (None if it does). A large one is compiled in a child
    process with bounded memory and CPU: compiling 16 MiB of Python costs gigabytes."""
    if len(source) <= MAX_COMPILED_IN_PROCESS:
        try:
            compile(source, "policy.py", "exec", dont_inherit=True)
        except Exception as exc:  # SyntaxError, but also MemoryError/RecursionError on hostile code
            return one_line(exc)
        return None
    memory, cpu = COMPILE_LIMITS
    # The child limits itself before it reads a byte (no preexec_fn: the Host has threads).
    check = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
        f"resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))\n"
        "try:\n"
        "    compile(sys.stdin.buffer.read(), 'policy.py', 'exec', dont_inherit=True)\n"
        "except BaseException as exc:\n"
        "    print(str(exc) or type(exc).__name__); sys.exit(1)\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", check],
            input=source,
            capture_output=True,
            timeout=cpu * 2,
        )
    except subprocess.TimeoutExpired:
        return "compiling it took too long"
    if done.returncode == 0:
        return None
    said = done.stdout.decode("utf-8", "replace").strip()
    return (
        " ".join(said.split())[:2000]
        if said
        else f"compiling it exceeded its limits (exit {done.returncode})"
    )


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
    problem = program_problem(program)
    return (None, problem) if problem is not None else (program, None)


def program_problem(program: Program) -> str | None:
    """Why ``program`` cannot be submitted (no policy.py, one that does not compile), or None:
    the same check for the Agent's submissions and for a Run's initial program."""
    if "policy.py" not in program.paths():
        return "the program has no policy.py at its top level"
    problem = _compiles(program.read("policy.py"))
    if problem is not None:
        return f"policy.py does not compile: {problem}"
    return None
