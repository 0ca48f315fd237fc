"""A workspace's integer options are ints when stored and when run (issue 36, Medium 5).
`workspace.section_size ["kb", 100.0]` or `max_file_bytes: 4096.0` used to be stored as
floats; every later index then skipped files with a long unbroken word ("TypeError: 'float'
object…") and session.append answered -32603 until the value was reset. The params edge
binds them (rpc/schemas.py); a configuration stored before that (or written by any other
path) is read back as ints too (config/workspace.py from_json), and fusion's k, which the
schema does not type, is bound where it is checked."""

from __future__ import annotations

import pytest

from autodoc.connect import invoke
from autodoc.store import workspaces as wsrows

LONG_WORD = "x" * 3000


def _stored(svc) -> dict:
    with svc.store.read() as db:
        return wsrows.get_workspace(db, "kb").config


def _long_word_file(svc, kb) -> str:
    (kb / "long.md").write_text(f"# Long\n\n{LONG_WORD}\n\n## Two\n\n{LONG_WORD} {LONG_WORD}\n")
    return "long.md"


def _check_runs(svc, kb):
    path = _long_word_file(svc, kb)
    report = invoke(svc, "workspace.index", ["kb"])
    assert path not in [s["path"] for s in report.get("skipped", [])], report
    assert invoke(svc, "document.read", ["kb", path])["text"].startswith("# Long")
    assert not invoke(svc, "document.problems", ["kb", path])["problems"]
    invoke(svc, "session.append", ["kb", "s1", [{"id": "e1", "kind": "message", "text": LONG_WORD}]])


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("workspace.section_size", ["kb", 100.0]),
        ("workspace.configure", ["kb", {"section_tokens": 100.0, "max_file_bytes": 40960.0}]),
    ],
)
def test_integer_options_given_as_floats_are_stored_as_ints(kb_service, kb_copy, method, params):
    invoke(kb_service, method, params)
    stored = _stored(kb_service)
    assert type(stored["section_tokens"]) is int
    assert type(stored.get("max_file_bytes", 1024)) is int
    _check_runs(kb_service, kb_copy)


def test_a_float_config_stored_before_is_run_as_ints(kb_service, kb_copy):
    with kb_service.store.write() as db:
        ws = wsrows.get_workspace(db, "kb")
        wsrows.set_config(
            db,
            ws,
            {
                **ws.config,
                "section_tokens": 100.0,
                "max_file_bytes": 40960.0,
                "ranker": {"provider": "none", "window": 20.0},
            },
        )
    cfg = invoke(kb_service, "workspace.list", None)["workspaces"][0]["config"]
    assert type(cfg["section_tokens"]) is int and type(cfg["max_file_bytes"]) is int
    assert type(cfg["ranker"]["window"]) is int
    _check_runs(kb_service, kb_copy)
    invoke(kb_service, "search.query", ["kb", "long", {"limit": 3}])


def test_fusion_k_given_as_a_float_is_that_integer(kb_service):
    invoke(kb_service, "workspace.configure", ["kb", {"fusion": {"method": "rrf", "k": 7.0}}])
    assert type(_stored(kb_service)["fusion"]["k"]) is int
    invoke(kb_service, "search.query", ["kb", "lease", {"limit": 3}])


def test_a_stored_option_that_is_no_integer_runs_the_default(kb_service, kb_copy):
    from autodoc.config.defaults import SECTION_TOKENS

    with kb_service.store.write() as db:
        ws = wsrows.get_workspace(db, "kb")
        wsrows.set_config(db, ws, {**ws.config, "section_tokens": 100.5, "max_file_bytes": "big"})
    cfg = invoke(kb_service, "workspace.list", None)["workspaces"][0]["config"]
    assert cfg["section_tokens"] == SECTION_TOKENS
    _check_runs(kb_service, kb_copy)
