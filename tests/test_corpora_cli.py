"""Issue 16: every corpus in ../shared/data/corpora indexed end to end by the CLI.

`autodoc workspace add NAME FOLDER --config '{"embedding": {"provider": "none"}}'`
then one `autodoc index` of all five (1,981 real files, read in place), in a
separate process on a temp store, as a user would run them: exit 0, no file
failed, every skip named with its reason, and the documents and chunks each
corpus yields (measured when this test was written; a change in parsing or
chunking shows up here first, on purpose). One run for the module (about a
minute on a busy 2-core machine).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

CORPORA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "corpora"
NO_MODEL = json.dumps({"embedding": {"provider": "none"}})

pytestmark = [pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}"),
              pytest.mark.timeout(900)]  # one index of 1,981 files: ~1-3 min on a shared 2-core machine

# workspace name → (folder, documents indexed, chunks)
EXPECTED = {
    "otel": ("opentelemetry-docs", 913, 10741),
    "swift": ("swift-evolution", 575, 12838),
    "foam": ("foam-docs", 86, 642),
    "sga": ("simpler-grants-adr", 91, 1164),
    "jekyll": ("jekyll", 306, 1914),
}
SKIPPED = {
    "jekyll": [{"path": "test/source/_encodings/Unicode16LECRLFandBOM.md",
                "reason": "UTF-16LE text (byte-order mark); only UTF-8 is read"}],
}
LINE = re.compile(r"^(\w+): (\d+) added, (\d+) modified, (\d+) renamed, (\d+) deleted, (\d+) unchanged, "
                  r"(\d+) skipped; (\d+) chunks in [\d.]+ s$")


def autodoc(store: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autodoc.cli", "--store", str(store), *args],
                          capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    store = tmp_path_factory.mktemp("corpora") / "autodoc.db"
    for name, (folder, _, _) in EXPECTED.items():
        r = autodoc(store, "workspace", "add", name, str(CORPORA / folder), "--config", NO_MODEL)
        assert r.returncode == 0, r.stderr
    r = autodoc(store, "index")
    return store, r


def test_the_cli_indexes_every_corpus(indexed):
    store, r = indexed
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    summary = {m.group(1): m for m in map(LINE.match, r.stdout.splitlines()) if m}
    assert sorted(summary) == sorted(EXPECTED), r.stdout
    for name, (_, docs, chunks) in EXPECTED.items():
        m = summary[name]
        assert (int(m.group(2)), int(m.group(7)), int(m.group(8))) == (docs, len(SKIPPED.get(name, [])), chunks), name
    # each skip is printed with its reason, and nothing else is
    printed = sorted(line.strip() for line in r.stderr.splitlines() if line.strip().startswith("skipped "))
    want = sorted(f"skipped {s['path']}: {s['reason']}" for skips in SKIPPED.values() for s in skips)
    assert printed == want


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_status_after_the_cli_index(indexed, name):
    store, _ = indexed
    r = autodoc(store, "--call", "workspace.status", json.dumps({"workspace": name}))
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    _, docs, chunks = EXPECTED[name]
    assert (st["files"]["indexed"], st["chunks"]) == (docs, chunks)
    assert st["files"]["skipped"] == SKIPPED.get(name, [])
    assert st["files"]["on_disk"] == docs + len(SKIPPED.get(name, []))
