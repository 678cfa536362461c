"""The Session gateway: what the Agent's Session requests mean to the Run.

A request (already shape-checked by the ``SessionServer``, on whose thread this
runs) becomes a ``Submit``, ``Finish`` or ``Malformed`` command; what the decider
answers becomes the reply. The transcript up to a request is flushed before the
request's events, so the log shows what led to it first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from evopolicygym.program import Program, ProgramError
from evopolicygym.run.decider import Evaluate, Finish, Malformed, Rejection, Submit, next_step
from evopolicygym.run.ledger import Ledger, one_line
from evopolicygym.run.supervisor import AgentSupervisor
from evopolicygym.run.workspace import feedback_dir_name

__all__ = ["SessionGateway"]


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
        # What the Agent sends is recorded (a selector, a problem, a malformed frame's text):
        # secrets out first. The program files are its work and are stored as submitted.
        redactor = self._supervisor.redactor
        request = {k: v if k == "files" else redactor.value(v) for k, v in request.items()}
        op = request.get("op")
        if op == "submit":
            return self._submit(request)
        if op == "finish":
            self._supervisor.drain()
            self._supervisor.flush(force=True)  # what led to the finish precedes it in the log
            decision = self._ledger.apply(Finish(request_id=request["request_id"], candidates=list(request["candidates"])))
            if isinstance(decision, Rejection):
                return {"ok": False, "error": decision.as_error()}
            return {"ok": True, "result": {"accepted": True, "candidates": list(request["candidates"])}}
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
            self._supervisor.flush(force=True)  # the transcript up to the request precedes its events
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
                "error": {"code": "evaluation_failed", "message": f"the evaluation failed on the Host's side: {result.get('error')}"},
            }
        result["feedback_path"] = f"feedback/{key}"
        return {"ok": True, "result": result}


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
        return None, f"policy.py does not compile: {one_line(exc)}"
    return program, None
