"""`python -m bench.compare search` runs (so it does not rot): on a small store, against the
committed code exported as a baseline package, every answer compared. Figures are
not asserted. The real run is in docs/benchmarks/keyword_path.md."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CORPORA

from autodoc.config import Settings
from autodoc.service import Service

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench import compare  # noqa: E402
from bench.common import DEFAULT_DATA  # noqa: E402

in_git = (
    shutil.which("git") is not None
    and subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode == 0
)


@pytest.mark.skipif(
    not (DEFAULT_DATA / "scifact" / "queries.jsonl").exists() or not in_git,
    reason="needs SciFact's queries and a git checkout",
)
def test_profile_search_compares_against_a_baseline(tmp_path, capsys):
    store = tmp_path / "store"
    svc = Service(Settings.from_env(store=store / "autodoc.db"))
    svc.workspace_add("kb", str(CORPORA / "kb"), {"embedding": {"provider": "none"}})
    svc.index("kb")
    svc.close()
    rc = compare.main(
        [
            "search",
            "--store",
            str(store),
            "--workspace",
            "kb",
            "-n",
            "5",
            "--modes",
            "lexical",
            "--base",
            "HEAD",
            "--profile",
            "5",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0, out
    assert '"different_answers"' in out and "cpu p50" in out and "cumulative seconds over 5 searches" in out
