"""A daemon killed while embedding resumes where it stopped: the queue's
state is the store (chunks without a vector), so nothing is lost or redone.
Real daemon processes, the real bundled model, SIGKILL."""

from __future__ import annotations

import shutil
import signal
import time
from pathlib import Path

import apsw

from autodoc_client import call_socket

CORPUS = Path(__file__).parents[1] / "corpora" / "kb"


def vectors(store: Path) -> int:
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return db.execute("SELECT COUNT(*) FROM vectors").fetchone()[0]
    finally:
        db.close()


def wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_killed_daemon_resumes_embedding(short_tmp, daemon_factory):
    kb = short_tmp / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True)
    store, sock, log = short_tmp / "s" / "a.db", short_tmp / "d.sock", short_tmp / "log"
    d = daemon_factory(short_tmp, store=store, sock=sock, log=log, timeout=30)
    try:
        call_socket(sock, "workspace.add", {"name": "kb", "root": str(kb)}, timeout=30)
        call_socket(sock, "workspace.index", {"workspace": "kb"}, timeout=60)
        total = call_socket(sock, "workspace.status", {"workspace": "kb"}, timeout=30)["chunks"]
        some = wait_for(lambda: vectors(store) > 0 and vectors(store), 120, "the first vectors")
        assert some < total  # killed part-way
    finally:
        d.stop(timeout=10, sig=signal.SIGKILL)
    before = vectors(store)
    d.start()  # again: the same store, socket and log
    try:
        status = wait_for(
            lambda: (
                (s := call_socket(sock, "workspace.status", {"workspace": "kb"}, timeout=30))["embedding"]["state"]
                == "ready"
                and s
            ),
            300,
            "the fill to complete",
        )
        assert status["embedding"]["pending"] == 0 and vectors(store) >= before
        meter = call_socket(sock, "server.info", {}, timeout=30)["models"]["embedding"][0]["meter"]
        # the second daemon embedded only what the first had not written
        distinct = len(set(_hashes(store)))
        assert meter["texts"] == distinct - before
        ans = call_socket(
            sock, "search.query", ["kb", "what happens when the writer crashes", {"mode": "semantic"}], timeout=30
        )
        assert ans["semantic"] == "ready" and ans["hits"]
    finally:
        call_socket(sock, "server.shutdown", {}, timeout=30)
        d.wait(timeout=60)


def _hashes(store: Path) -> list[str]:
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return [r[0] for r in db.execute("SELECT DISTINCT text_hash FROM chunks")]
    finally:
        db.close()
