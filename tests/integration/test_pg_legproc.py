"""The lexical helper process (search/lexical/legproc.py) on a PostgreSQL store: it opens the store from
the connection string it reads on its pipe, never from its command line (which any user of the machine
can read, and which held the string, password and all), and a hybrid search whose lexical leg ran there
answers as one run here."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from helpers.pg import missing_reason

from autodoc.config import Settings
from autodoc.search.lexical import legproc
from autodoc.service import Service

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

DOCS = {
    "storage.md": "# Storage choice\n\nWe chose a database server shared by the team, because one machine "
    "is not enough.\n\n## Backups\n\nDump the schema nightly, then verify the dump restores.\n",
    "oncall.md": "# On-call\n\nPage the secondary when the primary does not acknowledge within ten minutes; "
    "the backups are the secondary's to verify.\n",
}
HYBRID = {"stages": ["lexical", "semantic"], "limit": 5}
DEADLINE_S = 60.0  # how long the helper may take to start and connect on a loaded machine: a bound


@pytest.fixture(scope="module")
def target(pg_uri, tmp_path_factory):
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    tag = uuid.uuid4().hex[:8]
    password = f"Pw-{uuid.uuid4().hex}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE owner_{tag} LOGIN PASSWORD '{password}'")
        conn.execute(f"CREATE DATABASE legproc_{tag} OWNER owner_{tag}")
    uri = f"postgresql://owner_{tag}:{password}@/legproc_{tag}?host={conninfo_to_dict(pg_uri)['host']}"
    root = tmp_path_factory.mktemp("pglegproc") / "kb"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    s = Service(Settings.from_env(store=uri))
    try:
        s.workspace_add("kb", str(root))
        s.index("kb", embed=True)
    finally:
        s.close()
    return uri, password


def test_the_helper_gets_the_store_on_its_pipe_and_answers_as_here(target, monkeypatch):
    uri, password = target
    monkeypatch.setenv("AUTODOC_READERS", "auto")  # conftest turns the processes off for the other tests
    monkeypatch.setattr(legproc, "MIN_CHUNKS", 0)  # a store of a few chunks uses the helper too
    svc = Service(Settings.from_env(store=uri))
    try:
        assert svc.lexical_helper is not None
        query = "how do we verify the backups"
        here = svc.search("kb", query, HYBRID)
        deadline = time.monotonic() + DEADLINE_S
        while svc.lexical_helper.calls == 0:
            assert time.monotonic() < deadline, "the helper never ran a leg"
            svc.search("kb", query, HYBRID)
            time.sleep(0.05)
        cmdline = Path(f"/proc/{svc.lexical_helper._proc.pid}/cmdline").read_bytes()
        assert password.encode() not in cmdline and b"postgresql" not in cmdline
        before = svc.lexical_helper.calls
        there = svc.search("kb", query, HYBRID)
        assert svc.lexical_helper.calls == before + 1, "the leg did not run in the helper"
        strip = lambda a: [(h["path"], h["line_start"], round(h["score"], 9)) for h in a["hits"]]  # noqa: E731
        assert here["hits"] and strip(there) == strip(here)
    finally:
        svc.close()
