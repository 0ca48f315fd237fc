"""An index job's files parsed and chunked in worker processes (index/prepare.py) give the store an
inline job gives it: every table, the documents' ids and the report alike, with the word-count
estimate and with the bundled model's tokenizer (which crosses into the workers by its path). A
worker killed mid-job (SIGKILL: a real fault, not a double) costs no file.

Real parts: the foam-docs corpus from ../shared/data/corpora read in place, real spawned workers,
a real store. MIN_FILES is lowered so its 86 files take the worker path (the constant, not a stub).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from autodoc.config import Settings
from autodoc.index import prepare
from autodoc.service import Service

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.reliability import differences, dump, problems

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora" / "foam-docs"
NO_MODEL = {"embedding": {"provider": "none"}}
ONNX = {"embedding": {"provider": "onnx"}}

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"no corpus at {CORPUS}")


def index(tmp_path: Path, name: str, config: dict, readers: str, monkeypatch, kill: bool = False):
    """Index the corpus into a new store; (dump, ids in order, report, most workers seen at once)."""
    monkeypatch.setenv("AUTODOC_READERS", readers)
    monkeypatch.setattr(prepare, "MIN_FILES", 10)
    store = tmp_path / name / "autodoc.db"
    seen = [0]

    def progress(done: int, total: int, path: str) -> None:
        kids = [p for p in multiprocessing.active_children() if p.is_alive()]
        seen[0] = max(seen[0], len(kids))
        if kill and kids and done > 5:
            os.kill(kids[0].pid, signal.SIGKILL)  # once: the pool is given up after it
            kids[0].join(10)

    s = Service(Settings.from_env(store=store))
    try:
        s.workspace_add("kb", str(CORPUS), config)
        report = s.index("kb", progress=progress)
    finally:
        s.close()
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    ids = db.execute("SELECT id, path FROM documents ORDER BY id").fetchall()
    db.close()
    assert problems(store) == []
    report.pop("seconds")
    return dump(store, "kb"), ids, report, seen[0]


@pytest.mark.parametrize("config", [NO_MODEL, ONNX], ids=["estimate", "tokenizer"])
def test_workers_write_what_the_job_writes_alone(tmp_path, monkeypatch, config):
    alone = index(tmp_path, "alone", config, "0", monkeypatch)
    helped = index(tmp_path, "helped", config, "2", monkeypatch)
    assert alone[3] == 0 and helped[3] >= 1, (alone[3], helped[3])  # the workers did run
    assert alone[2]["added"] == 86 and alone[0]["chunks"]
    assert differences(helped[0], alone[0]) == []
    assert helped[1] == alone[1] and helped[2] == alone[2]
    if config is ONNX:  # the tokenizer's budgets really differ from the estimate's
        assert differences(alone[0], index(tmp_path, "estimate", NO_MODEL, "0", monkeypatch)[0])


def test_a_killed_worker_costs_no_file(tmp_path, monkeypatch, caplog):
    alone = index(tmp_path, "alone", NO_MODEL, "0", monkeypatch)
    killed = index(tmp_path, "killed", NO_MODEL, "2", monkeypatch, kill=True)
    assert killed[3] >= 1
    assert differences(killed[0], alone[0]) == []
    assert killed[1] == alone[1] and killed[2] == alone[2]
    assert "a parsing worker failed" in caplog.text


def test_a_worker_never_writes_to_stdout(tmp_path):
    """stdout is a stdio daemon's RPC channel and the workers inherit it. `print` as the token
    counter stands in for any stray write in a worker (it prints each text it is given; the
    chunker then fails on its None count, and the file comes back with a reason)."""
    script = (
        "import sys\n"
        "from autodoc.index.prepare import Preparer\n"
        "p = Preparer(256, False, print, 1)\n"
        "p.add(0, 'a.md', b'# A\\n\\nokapi words in a worker\\n')\n"
        "got = list(p.ready(drain=True))\n"
        "p.close()\n"
        "sys.stderr.write('RESULT ' + repr(got) + '\\n')\n"
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "RESULT [(0, " in r.stderr and "could not be parsed (TypeError" in r.stderr  # the worker ran it
    assert "okapi words in a worker" in r.stderr and r.stdout == ""
