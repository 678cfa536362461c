"""A process holding a store open keeps every append it acknowledged, whatever else it opens.

SQLite's locks on a file are POSIX advisory (fcntl) locks, which are the process's, not the
descriptor's: closing any descriptor of the file drops them all. SQLite keeps its own
descriptors of a file together within a process for that reason, but a plain ``open()`` and
``close()`` of ``events.db`` (a header check, say) slips past it. The process's connection
then holds no lock as far as other processes can tell, and the next one to close the store
takes it for the last: it checkpoints and deletes the write-ahead log the holder is still
appending to, and the holder's later commits go to a deleted file.

Here with real processes: a holder (a Host) keeps its store open and opens a second store
object on the same directory, as the CLI's readers do; another process reads the store,
appends and closes it (checkpointing); the holder appends again; every append acknowledged
must then be in the log as a fresh process reads it, while the holder lives and after it is
killed, and ``verify_store`` must pass. The blob pack (``blobs/pack.db``) is held the same way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from evopolicygym.records.location import open_store

ROOT = Path(__file__).resolve().parents[1]

# A Host's part: the store held open; one command a line on stdin, one answer a line on stdout.
HOLDER = textwrap.dedent(
    """
    import json, sys
    from evopolicygym.records.events import EpisodeCompleted, new_event
    from evopolicygym.records.location import open_store
    from evopolicygym.records.store import ANY_VERSION

    root = sys.argv[1]
    store = open_store(root)
    for line in sys.stdin:
        command, _, name = line.strip().partition(" ")
        if command == "append":
            done = EpisodeCompleted(
                submission_id=0, index=0, status="ok", total_reward=1.0, steps=1
            )
            event = new_event(done, name)
            answer = {"positions": store.events.append("held", [event], ANY_VERSION)}
        elif command == "put":
            answer = {"digest": store.blobs.put(name.encode() * 10)}
        elif command == "second":  # a second store object on the same directory, read and closed
            with open_store(root) as other:
                answer = {"head": other.events.head(), "blobs": len(list(other.blobs.digests()))}
        else:
            raise SystemExit(f"unknown command {command!r}")
        print(json.dumps(answer), flush=True)
    """
)

# Another process: open the store, read it, append, close it (closing checkpoints the log).
OTHER = textwrap.dedent(
    """
    import sys
    from evopolicygym.records.events import EpisodeCompleted, new_event
    from evopolicygym.records.location import open_store
    from evopolicygym.records.store import ANY_VERSION

    with open_store(sys.argv[1]) as store:
        store.events.read_all()
        list(store.blobs.digests())
        done = EpisodeCompleted(submission_id=0, index=0, status="ok", total_reward=1.0, steps=1)
        event = new_event(done, sys.argv[2])
        store.events.append("other", [event], ANY_VERSION)
        store.blobs.put(sys.argv[2].encode() * 10)
    """
)

# A fresh reader: every event id in the log, which of the named blobs read back, and verify.
READER = textwrap.dedent(
    """
    import json, sys
    from evopolicygym.records.blobcodec import BlobError
    from evopolicygym.records.location import open_store
    from evopolicygym.records.verify import verify_store

    with open_store(sys.argv[1]) as store:
        ids = [e.event_id for e in store.events.read_all(0, 100_000)]
        blobs = []
        for digest in sys.argv[2:]:
            try:
                store.blobs.get(digest)
                blobs.append(digest)
            except BlobError:
                pass
        report = verify_store(store)
        problems = [str(p) for p in report.problems]
    print(json.dumps({"ids": ids, "blobs": blobs, "problems": problems}))
    """
)


def _python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return done


class _Holder:
    def __init__(self, root: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )

    def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            self.process.kill()
            _, err = self.process.communicate(timeout=60)
            raise AssertionError(f"the holder died at {command!r}: {err}")
        return json.loads(line)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)  # a Host killed: no close, no checkpoint
        self.process.communicate(timeout=60)


def test_appends_after_a_second_store_in_the_same_process_survive(tmp_path: Path) -> None:
    root = tmp_path / "store"
    open_store(root, create=True).close()
    holder = _Holder(root)
    try:
        acknowledged = []
        digests = []
        assert holder.ask("append held-1")["positions"]
        acknowledged.append("held-1")
        digests.append(holder.ask("put blob-1")["digest"])

        holder.ask("second")  # opens and closes events.db and pack.db beside the held ones
        assert holder.ask("append held-2")["positions"]
        acknowledged.append("held-2")
        digests.append(holder.ask("put blob-2")["digest"])

        _python(OTHER, str(root), "other-1")  # reads, appends, closes: checkpoints
        acknowledged.append("other-1")
        digests.append(holder.ask("put other-1")["digest"])  # the same bytes: already stored

        assert holder.ask("append held-3")["positions"]
        acknowledged.append("held-3")
        digests.append(holder.ask("put blob-3")["digest"])

        while_held = json.loads(_python(READER, str(root), *digests).stdout)
        assert sorted(while_held["ids"]) == sorted(acknowledged), "an acknowledged append is lost"
        assert while_held["blobs"] == digests, "an acknowledged blob is lost"
        assert while_held["problems"] == []
    finally:
        holder.kill()

    after = json.loads(_python(READER, str(root), *digests).stdout)
    assert sorted(after["ids"]) == sorted(acknowledged), "an acknowledged append is lost"
    assert after["blobs"] == digests, "an acknowledged blob is lost"
    assert after["problems"] == []
