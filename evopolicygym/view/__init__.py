"""``evopolicy view``: a live local web viewer of a store, read-only.

``create_app`` returns the ASGI app (Starlette) over a store opened with
``open_store(..., reader=True)``: the Runs of the store (filtered, sorted, paged from an
index of its own outside the store), each Run (status and budget live, Submissions, the
evolution tree, plots, programs and diffs, Feedback with videos, the Agent's conversation,
Validation and Assessment, the event log), experiments and a comparison of two Runs. Pages
update by themselves while other processes record. Everything a Run holds is shown as
text; no page runs inline script.

Needs the ``view`` extra (Starlette, uvicorn, Jinja2).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "RunIndex": "evopolicygym.view.index",
    "create_app": "evopolicygym.view.app",
    "default_cache_dir": "evopolicygym.view.index",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == __name__:  # a submodule, as `from package import submodule` names it
        value = importlib.import_module(f"{module}.{name}")
    else:
        value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
