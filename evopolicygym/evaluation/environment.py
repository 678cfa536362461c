"""The environment variables a policy process sees: nothing of the Host's."""

from __future__ import annotations

__all__ = ["POLICY_ENVIRONMENT", "PROGRAM_MOUNT", "SCRATCH_MOUNT"]

PROGRAM_MOUNT = "/program"
SCRATCH_MOUNT = "/scratch"

POLICY_ENVIRONMENT = {
    "HOME": SCRATCH_MOUNT,
    "TMPDIR": SCRATCH_MOUNT,
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    # One BLAS thread: a forked child keeps only the forking thread, and a policy
    # gets one core anyway.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
