"""The lexical leg in a helper process (search/lexical/legproc.py, issue 19): a hybrid
search whose lexical leg ran in the helper answers exactly as one that ran it
here; a helper that dies or hangs costs no answer (the leg runs here, and from
then on); a lexical-only search never uses it; closing the Service ends it.

A real helper process on a real store with the bundled model. SIGSTOP stands in
for a helper stuck mid-leg (the one fault not otherwise caused on demand)."""

from __future__ import annotations

import os
import pickle
import signal
import time

import pytest

from autodoc.config import Settings
from autodoc.search.lexical import legproc
from autodoc.service import Service

DOCS = {
    "storage.md": "# Storage choice\n\nWe chose an embedded relational store that lives in one file beside the "
    "application, because it needs no server process.\n\n## Backups\n\nCopy the file while holding "
    "the lease, then verify the copy opens.\n",
    "passwords.md": "# Account help\n\nTo reset a forgotten password, open settings and follow the emailed link.\n",
    "oncall.md": "# On-call\n\nPage the secondary when the primary does not acknowledge within ten minutes; "
    "the store's backups are the secondary's to verify.\n",
}
QUERIES = ["how do we back up the store", "password reset link", "who verifies the backups when paged"]
HYBRID = {"stages": ["lexical", "semantic"], "limit": 5}
DEADLINE_S = 60.0  # how long the helper may take to open the store on a loaded machine: a bound, not a measurement


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Indexed and embedded once for the module; each test opens its own Service (and helper) on it."""
    tmp = tmp_path_factory.mktemp("legproc")
    root = tmp / "kb"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    s = Service(Settings.from_env(store=tmp / "s.db"))
    try:
        s.workspace_add("kb", str(root))
        s.index("kb", embed=True)
    finally:
        s.close()
    return tmp / "s.db"


@pytest.fixture()
def svc(store, monkeypatch):
    monkeypatch.setenv("AUTODOC_READERS", "auto")  # conftest turns the processes off for the other tests
    monkeypatch.setattr(legproc, "MIN_CHUNKS", 0)  # a store of a few chunks uses the helper too
    s = Service(Settings.from_env(store=store))
    yield s
    s.close()


def _until_helper_answers(svc: Service) -> None:
    deadline = time.monotonic() + DEADLINE_S
    before = svc.lexical_helper.calls
    while svc.lexical_helper.calls == before:
        assert time.monotonic() < deadline, "the helper never ran a leg"
        svc.search("kb", QUERIES[0], HYBRID)
        time.sleep(0.05)


def _strip(answer: dict) -> list:
    return [(h["path"], h["line_start"], round(h["score"], 9)) for h in answer["hits"]], answer["stages"]


def test_a_leg_in_the_helper_answers_as_one_run_here(svc):
    assert svc.lexical_helper is not None
    here = {}
    for q in QUERIES:  # the helper starts on the first hybrid search; these run here meanwhile
        here[q] = svc.search("kb", q, HYBRID)
    _until_helper_answers(svc)
    for q in QUERIES:
        before = svc.lexical_helper.calls
        there = svc.search("kb", q, HYBRID)
        assert svc.lexical_helper.calls == before + 1, "the leg did not run in the helper"
        assert _strip(there) == _strip(here[q]), q
    before = svc.lexical_helper.calls
    svc.search("kb", QUERIES[0], {"stages": ["lexical"], "limit": 5})
    assert svc.lexical_helper.calls == before  # nothing to overlap with: the leg runs here


def test_a_helper_that_dies_or_hangs_costs_no_answer(svc):
    expected = _strip(svc.search("kb", QUERIES[1], HYBRID))
    _until_helper_answers(svc)
    pid = svc.lexical_helper._proc.pid
    os.kill(pid, signal.SIGKILL)
    assert _strip(svc.search("kb", QUERIES[1], HYBRID)) == expected
    assert svc.lexical_helper._gone and svc.lexical_helper._proc is None  # reaped, and not started again
    calls = svc.lexical_helper.calls
    assert _strip(svc.search("kb", QUERIES[1], HYBRID)) == expected and svc.lexical_helper.calls == calls


def test_a_stuck_helper_is_given_up_and_killed(svc, monkeypatch):
    monkeypatch.setattr(legproc, "LEG_TIMEOUT_S", 0.5)
    expected = _strip(svc.search("kb", QUERIES[2], HYBRID))
    _until_helper_answers(svc)
    proc = svc.lexical_helper._proc
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        assert _strip(svc.search("kb", QUERIES[2], HYBRID)) == expected
        assert svc.lexical_helper._gone
        assert proc.poll() is not None, "the stuck helper was left running"
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)


def test_closing_the_service_ends_the_helper(svc):
    _until_helper_answers(svc)
    proc = svc.lexical_helper._proc
    svc.close()
    assert proc.poll() is not None


def test_a_leg_that_cannot_be_sent_leaves_the_helper_free(svc):
    """submit() holds the helper from the send to the answer: a leg that cannot be pickled
    (nothing sent) must let it go, or every later search would find it busy forever."""
    expected = _strip(svc.search("kb", QUERIES[2], HYBRID))
    _until_helper_answers(svc)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        svc.lexical_helper.submit(1, [], None, want=5, top=50, weigh=lambda: None)  # a lambda does not pickle
    free = svc.lexical_helper._lock.acquire(blocking=False)
    if free:
        svc.lexical_helper._lock.release()
    else:  # (freed here so that the Service can close: its close waits for the helper)
        svc.lexical_helper._lock.release()
    assert free, "the helper is still held after a leg that was never sent"
    before = svc.lexical_helper.calls
    assert _strip(svc.search("kb", QUERIES[2], HYBRID)) == expected
    assert svc.lexical_helper.calls == before + 1, "the helper stayed busy"
