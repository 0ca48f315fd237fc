"""What a new user met trying the installed `autodoc` (trial 5): each finding as the CLI process
shows it, on an isolated home (XDG dirs and the store under a short temp folder)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

AUTODOC = str(Path(sys.executable).with_name("autodoc"))
KB = Path(__file__).parents[1] / "corpora" / "kb"
WORDS_ONLY = '{"embedding": {"provider": "none"}}'
HIT = re.compile(r"^\s*\d+\. (\S+)  (\d\.\d\d)  \[")  # ` 1. kb:path#L1-3  0.93  [lexical]`


def ok(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([AUTODOC, *args], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


@pytest.fixture(scope="module")
def two_env():
    """kb (tests/corpora/kb) and `small`, two notes on leases, indexed by words, no daemon."""
    home = Path(__import__("tempfile").mkdtemp(prefix="ad5-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if k not in ("AUTODOC_STORE", "AUTODOC_SOCKET")}
    env.update(XDG_DATA_HOME=str(home / "data"), XDG_RUNTIME_DIR=str(home / "run"))
    (home / "run").mkdir(mode=0o700)
    env["AUTODOC_STORE"] = str(home / "store" / "a.db")
    shutil.copytree(KB, home / "kb", symlinks=True)
    small = home / "small"
    small.mkdir()
    (small / "lease-notes.md").write_text("# Lease notes\n\nA lease is renewed every ten seconds.\n")
    (small / "other.md").write_text("# Other\n\nNothing about the subject here.\n")
    for name in ("kb", "small"):
        ok(env, "workspace", "add", name, str(home / name), "--config", WORDS_ONLY)
        ok(env, "index", name)
    yield env
    shutil.rmtree(home, ignore_errors=True)


@pytest.mark.parametrize(
    "pick, query",
    [
        (["-w", "kb"], "lease recovery"),
        ([], "lease"),  # every workspace, merged by confidence
        (["-w", "kb"], "how do I rotate the mongodb atlas api keys"),  # answerable: false
    ],
)
def test_the_score_printed_is_the_confidence_the_hits_are_ordered_by(two_env, pick, query):
    """The number beside each hit was its `relevance` (each search's own scale, 1.00 at the top
    of an answer that says "nothing relevant was found", and out of order in a merged list of
    several workspaces, which is ordered by confidence): it is the calibrated confidence, as
    --compact and MCP print it."""
    answer = json.loads(ok(two_env, "search", *pick, "--json", query).stdout)
    human = ok(two_env, "search", *pick, query).stdout
    printed = [(m.group(1), float(m.group(2))) for line in human.splitlines() if (m := HIT.match(line))]
    assert len(printed) == len(answer["hits"]) > 0, human
    for (loc, shown), h in zip(printed, answer["hits"], strict=True):
        assert h["path"] in loc and shown == pytest.approx(h["confidence"], abs=0.006), (loc, shown, h)
    scores = [s for _, s in printed]
    assert scores == sorted(scores, reverse=True), human
