"""Blob store throughput: PostgreSQL (``PgBlobStore``) against the filesystem store, one run.

Prints, for each backend, seconds to put and to get (decoded and checked) a 26 MiB blob the
size of a budget-1M Run's pool (compressible text, then random bytes), and milliseconds per
put and get of 500 small blobs (2 KB, the size of a program file); then the PostgreSQL /
files ratio of each, and a 256 MiB blob (the largest a blob may be) put and read back.
PostgreSQL runs in a database of its own, dropped at the end.

Run: uv run python tests/perf/bench_pg_blobs.py [--postgres URL] [--no-largest]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout
from evopolicygym.records.blobs import FileBlobStore
from tests.support import pg


def timed(work: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    result = work()
    return time.perf_counter() - started, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", help="server URL to create the benchmark's database on")
    parser.add_argument("--no-largest", action="store_true", help="skip the 256 MiB blob")
    args = parser.parse_args()
    if args.postgres:
        os.environ[pg.SERVER_ENV] = args.postgres
    from evopolicygym.records.pgblobs import PgBlobStore

    url = pg.new_database()
    try:
        backends: dict[str, Any] = {
            "files": FileBlobStore(Path(tempfile.mkdtemp(prefix="bench-blobs-")) / "blobs"),
            "postgres": PgBlobStore(url, create=True),
        }
        lines = (b"episode %08d seed %020d index %d\n" % (i, i * 7919, i) for i in range(800_000))
        cases = {
            "26 MiB compressible": b"".join(lines)[: 26 * 2**20],
            "26 MiB random": os.urandom(26 * 2**20),
        }
        figures: dict[tuple[str, str], tuple[float, float]] = {}
        for case, data in cases.items():
            for name, store in backends.items():
                put_s, digest = timed(lambda store=store, data=data: store.put(data))
                get_s, back = timed(lambda store=store, digest=digest: store.get(digest))
                assert back == data
                figures[(case, name)] = (put_s, get_s)
                print(f"{case:22s} {name:9s} put {put_s:7.3f} s   get {get_s:7.3f} s")
        small = [os.urandom(2000) for _ in range(500)]
        for name, store in backends.items():
            put_s, digests = timed(lambda store=store: [store.put(item) for item in small])
            get_s, _ = timed(lambda store=store, digests=digests: [store.get(d) for d in digests])
            figures[("500 x 2 KB", name)] = (put_s / 500, get_s / 500)
            print(
                f"{'500 x 2 KB':22s} {name:9s} put {put_s / 0.5:7.2f} ms  "
                f"get {get_s / 0.5:7.2f} ms (each)"
            )
        for case in [*cases, "500 x 2 KB"]:
            (pp, pgt), (fp, fg) = figures[(case, "postgres")], figures[(case, "files")]
            print(f"{case:22s} postgres / files: put {pp / fp:5.2f}x   get {pgt / fg:5.2f}x")
        if not args.no_largest:
            largest = os.urandom(256 * 2**20 - 1)
            store = backends["postgres"]
            put_s, digest = timed(lambda: store.put(largest))
            get_s, back = timed(lambda: store.get(digest))
            print(
                f"256 MiB random         postgres  put {put_s:7.2f} s   get {get_s:7.2f} s   "
                f"intact {back == largest}"
            )
        backends["postgres"].close()
    finally:
        pg.drop_made()


if __name__ == "__main__":
    main()
