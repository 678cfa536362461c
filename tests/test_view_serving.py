"""``evopolicy view`` as served: who may reach it, what every answer carries, the live stream.

In-process (Starlette's TestClient): the Host check without a token, the token by Bearer,
Basic or the cookie a ``?token=`` visit sets, the security headers on every answer. As a
subprocess (uvicorn on a free port): the server-sent events follow a Run recorded by another
process, a page listening to one Run hears of that Run only, the store's files are
byte-identical after browsing, and bad command lines are one-line errors.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.viewer import require_view

require_view()

from evopolicygym.records.location import open_store  # noqa: E402
from tests.support.cli import CLI, invoke, one_line_error  # noqa: E402
from tests.support.runlogs import standard_run, write_run  # noqa: E402
from tests.support.viewer import view_client  # noqa: E402

TOKEN = "s3cret-token-of-enough-length"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("view-serving") / "store"
    with open_store(root, create=True) as store:
        write_run(store, standard_run("alpha"))
    return root


def _headers_are_secure(headers: Any) -> None:
    csp = headers["content-security-policy"]
    assert "script-src 'self'" in csp and "'unsafe-inline'" not in csp.split("style-src")[0]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"


def test_every_answer_forbids_inline_script(store_dir: Path, tmp_path: Path) -> None:
    with view_client(store_dir, tmp_path) as client:
        for path, status in (
            ("/", 200),
            ("/static/view.css", 200),
            ("/static/view.js", 200),
            ("/runs/nothing-like-it", 404),
            ("/?sort=nonsense", 400),
            ("/no/such/page", 404),
        ):
            answer = client.get(path, headers={"accept": "text/html"})
            assert answer.status_code == status, path
            _headers_are_secure(answer.headers)
        page = client.get("/").text
        # No inline script or handler in the page itself: scripts come from /static only.
        assert re.findall(r"<script[^>]*>", page) == [
            '<script src="/static/view.js" defer>'
        ] or all("src=" in tag for tag in re.findall(r"<script[^>]*>", page))
        assert not re.search(r"\son[a-z]+=", page)


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "localhost", "[::1]:8765", "127.8.9.10"])
def test_without_a_token_this_machine_s_names_are_answered(
    store_dir: Path, tmp_path: Path, host: str
) -> None:
    with view_client(store_dir, tmp_path) as client:
        assert client.get("/", headers={"host": host}).status_code == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8765", "10.0.0.1", ""])
def test_without_a_token_other_host_names_are_refused(
    store_dir: Path, tmp_path: Path, host: str
) -> None:
    """A page elsewhere that rebinds its name to 127.0.0.1 still sends its own name."""
    with view_client(store_dir, tmp_path) as client:
        answer = client.get("/", headers={"host": host})
        assert answer.status_code == 403
        assert "alpha" not in answer.text
        _headers_are_secure(answer.headers)


def test_with_a_token_every_request_carries_it(store_dir: Path, tmp_path: Path) -> None:
    with view_client(store_dir, tmp_path, token=TOKEN) as client:
        refused = client.get("/")
        assert refused.status_code == 401 and "alpha" not in refused.text
        assert "Basic" in refused.headers["www-authenticate"]
        _headers_are_secure(refused.headers)
        assert client.get("/static/view.css").status_code == 401
        assert client.get("/live").status_code == 401
        bearer = client.get("/", headers={"authorization": f"Bearer {TOKEN}"})
        assert bearer.status_code == 200 and "alpha" in bearer.text
        basic = base64.b64encode(f"anyone:{TOKEN}".encode()).decode()
        assert client.get("/", headers={"authorization": f"Basic {basic}"}).status_code == 200
        wrong = client.get("/", headers={"authorization": f"Bearer {TOKEN}x"})
        assert wrong.status_code == 401
        assert client.get(f"/?token={TOKEN}x", follow_redirects=False).status_code == 401


def test_a_token_in_the_address_becomes_a_cookie_and_leaves_the_address(
    store_dir: Path, tmp_path: Path
) -> None:
    with view_client(store_dir, tmp_path, token=TOKEN) as client:
        login = client.get(f"/?sort=score&token={TOKEN}&page=1", follow_redirects=False)
        assert login.status_code == 303
        assert login.headers["location"] == "/?sort=score&page=1"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        # The client keeps the cookie: later requests need nothing else.
        assert client.get("/").status_code == 200
        client.cookies.clear()
        assert client.get("/").status_code == 401


# --------------------------------------------------------------------------- the server


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(("-shm", "-wal"))
    }


class Server:
    def __init__(self, store: Path, cache: Path, *extra: str) -> None:
        env = {**os.environ, "EVOPOLICY_VIEW_TOKEN": ""}
        env.pop("EVOPOLICY_VIEW_TOKEN")
        self.process = subprocess.Popen(
            [*CLI, "view", "--store", str(store), "--port", "0", "--cache", str(cache), *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/", line)
        if found is None:
            self.stop()
            pytest.fail(f"view did not start: {line!r} {self.process.stderr.read()}")  # type: ignore[union-attr]
        self.url = found.group(1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    root = tmp_path / "store"
    with open_store(root, create=True) as store:
        write_run(store, standard_run("alpha"))
    running = Server(root, tmp_path / "cache", "--poll", "0.1")
    try:
        yield running, root
    finally:
        running.stop()


def _listen(url: str, into: queue.Queue[dict[str, Any]], stop: threading.Event) -> None:
    import httpx

    try:
        with httpx.stream("GET", url, timeout=httpx.Timeout(60.0, connect=10.0)) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            for line in answer.iter_lines():
                if stop.is_set():
                    return
                if line.startswith("data: "):
                    into.put(json.loads(line[len("data: ") :]))
    except httpx.HTTPError:  # the server stopped at the test's end
        return


def _listener(url: str) -> tuple[queue.Queue[dict[str, Any]], threading.Event]:
    messages: queue.Queue[dict[str, Any]] = queue.Queue()
    stop = threading.Event()
    threading.Thread(target=_listen, args=(url, messages, stop), daemon=True).start()
    return messages, stop


def test_live_events_follow_runs_another_process_records(
    server: tuple[Server, Path],
) -> None:
    import httpx

    running, root = server
    first = httpx.get(f"{running.url}/")
    assert first.status_code == 200 and "alpha" in first.text and "beta" not in first.text
    everything, stop_all = _listener(f"{running.url}/live")
    alpha_only, stop_alpha = _listener(f"{running.url}/live?run=alpha")
    try:
        start = everything.get(timeout=20)["head"]
        assert alpha_only.get(timeout=20)["head"] == start
        with open_store(root) as writer:  # another writer: a new Run
            write_run(writer, standard_run("beta"))
            head = writer.events.head()
        moved = everything.get(timeout=20)["head"]
        assert moved == head > start
        with pytest.raises(queue.Empty):  # beta is not alpha: that listener hears nothing
            alpha_only.get(timeout=1.5)
        deadline = time.monotonic() + 20
        while "beta" not in httpx.get(f"{running.url}/").text:
            assert time.monotonic() < deadline, "the list never showed the new Run"
            time.sleep(0.2)
    finally:
        stop_all.set()
        stop_alpha.set()


def test_browsing_leaves_the_store_byte_identical(server: tuple[Server, Path]) -> None:
    import httpx

    running, root = server
    before = _files(root)
    for path in ("/", "/?sort=score", "/runs/alpha", "/experiments", "/static/plotly.min.js"):
        httpx.get(f"{running.url}{path}", timeout=30)
    running.stop()
    assert _files(root) == before
    assert not (root / "read-models.duckdb").exists()


def test_bad_command_lines_are_one_line_errors(tmp_path: Path, store_dir: Path) -> None:
    result = invoke("view", "--store", str(store_dir), "--host", "0.0.0.0")
    assert result.exit_code == 2
    assert "needs a token" in one_line_error(result) and "EVOPOLICY_VIEW_TOKEN" in result.stderr
    result = invoke("view", "--store", str(store_dir), "--token", "short")
    assert result.exit_code == 2 and "at least 16 characters" in one_line_error(result)
    result = invoke("view", "--store", str(tmp_path / "none"))
    assert result.exit_code != 0 and "no store at" in one_line_error(result)
    assert not (tmp_path / "none").exists()


def test_the_viewer_starts_without_pandas() -> None:
    """pandas (and NumPy) load when an experiment page needs them, not when the server starts:
    they were 1.2 s and 90 MiB of a start of 1.7 s and 124 MiB."""
    import subprocess
    import sys

    probe = (
        "import sys; from evopolicygym.view import app; app._routes(); "
        "print(sorted(m for m in ('pandas', 'numpy', 'plotly') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
