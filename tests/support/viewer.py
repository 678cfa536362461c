"""The viewer in tests: its app over a store, driven in-process by Starlette's TestClient.

``view_client`` opens the store to read only, as ``evopolicy view`` does, and returns a
client whose requests name 127.0.0.1 (the viewer answers only this machine's names when it
has no token). Use it as a context manager: the app's lifespan (the watcher that follows the
log) runs inside the ``with``. Call ``require_view()`` first: without the view extra the test
skips, saying how to install it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.requires import require_extra

__all__ = ["require_view", "view_client"]


def require_view() -> None:
    require_extra("view", "starlette", "uvicorn", "jinja2", "httpx")


def view_client(
    store_dir: Path | str, cache_dir: Path, *, token: str | None = None, poll_s: float = 0.05
) -> Any:
    """A TestClient of the viewer of ``store_dir`` (its index in ``cache_dir``)."""
    require_view()
    from starlette.testclient import TestClient

    from evopolicygym.records.location import open_store
    from evopolicygym.redaction import Redactor
    from evopolicygym.view import create_app

    store = open_store(store_dir, reader=True)
    app = create_app(store, redact=Redactor().text, cache_dir=cache_dir, token=token, poll_s=poll_s)
    client = TestClient(app, base_url="http://127.0.0.1")
    client.store = store  # closed by the caller when done, if it wants to
    return client
