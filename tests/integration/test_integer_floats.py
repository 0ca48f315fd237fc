"""An integer-valued float (5.0) is an integer to JSON Schema, so it passes every params
schema: the edge (rpc/schemas.py bind_params, which the daemon and connect.Local share)
binds it to the int it names, at every place whose schema type is integer, nested
fields included (issue 36, Medium 4). Before, search.query's limit 5.0 reached a slice
(-32603 TypeError) and document.read's line_start 1.0 was refused as "must be an integer"."""

from __future__ import annotations

import pytest

from autodoc.connect import invoke
from autodoc.errors import AutodocError, InvalidParams


def _call(svc, method, params):
    try:
        return invoke(svc, method, params)
    except AutodocError:
        raise
    except Exception as e:  # what the daemon answers as -32603
        pytest.fail(f"{method} {params!r}: -32603 {type(e).__name__}: {e}")


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("search.query", ["kb", "lease", {"limit": 5.0}]),
        ("search.query", ["kb", "lease", {"limit": 2.0, "budget_tokens": 400.0, "answer": "compact"}]),
        ("search.query", ["kb", "lease", {"limit": 3.0, "fusion": {"k": 7.0}, "ranker": {"window": 20.0}}]),
        ("search.similar", ["kb", "adrs/0001-sqlite-storage.md", {"limit": 5.0}]),
        ("changes.since", {"workspace": "kb", "cursor": 0.0, "limit": 5.0}),
        ("session.list", {"workspace": "kb", "limit": 5.0}),
        ("workspace.tags", {"workspace": "kb", "limit": 5.0}),
    ],
)
def test_an_integer_valued_float_is_that_integer(kb_service, method, params):
    try:
        _call(kb_service, method, params)
    except AutodocError as e:  # search.similar without a model: Unsupported, an answer not a crash
        assert e.code != -32603, e
    from autodoc.rpc.schemas import bind_params

    opts = bind_params(method, params)
    limit = opts.get("opts", opts)["limit"]
    assert type(limit) is int


def test_document_read_takes_integer_valued_float_lines(kb_service):
    path = next(d["path"] for d in _call(kb_service, "search.query", ["kb", "lease", {"limit": 1}])["hits"])
    by_int = _call(kb_service, "document.read", ["kb", path, {"line_start": 1, "line_end": 2}])
    by_float = _call(kb_service, "document.read", ["kb", path, {"line_start": 1.0, "line_end": 2.0}])
    assert by_float == by_int


def test_a_fractional_float_is_still_refused_naming_the_field(kb_service):
    with pytest.raises(InvalidParams) as e:
        invoke(kb_service, "search.query", ["kb", "lease", {"limit": 5.5}])
    assert e.value.field == "opts.limit"
    assert "integer" in e.value.message


def test_bound_params_hold_ints_at_every_integer_place():
    from autodoc.rpc.schemas import bind_params

    bound = bind_params(
        "search.query",
        ["kb", "x", {"limit": 5.0, "budget_tokens": 300.0, "fusion": {"k": 1.0, "weights": {"lexical": 1.0}}}],
    )
    opts = bound["opts"]
    assert type(opts["limit"]) is int and type(opts["budget_tokens"]) is int and type(opts["fusion"]["k"]) is int
    assert type(opts["fusion"]["weights"]["lexical"]) is float  # a number stays a number
    conf = bind_params("workspace.configure", ["kb", {"section_tokens": 64.0, "ranker": {"window": 10.0}}])
    assert type(conf["options"]["section_tokens"]) is int and type(conf["options"]["ranker"]["window"]) is int
    assert type(bind_params("workspace.section_size", ["kb", 100.0])["tokens"]) is int
    cancel = bind_params("$/cancelRequest", {"id": 7.0})
    assert type(cancel["id"]) is int
