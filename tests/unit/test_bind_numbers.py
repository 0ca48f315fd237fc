"""bind_params refuses NaN and ±Infinity at any depth (-32602 naming the field). The daemon's
decoder answers them -32700, but the in-process path (connect.Local, `autodoc --call` with no
daemon) takes params from json.loads, which reads NaN: a NaN fusion weight passed every
`minimum`/`maximum` (NaN compares false) and came back as a NaN score no JSON can carry."""

from __future__ import annotations

import math

import pytest

from autodoc.errors import InvalidParams
from autodoc.rpc.schemas import bind_params


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize(
    ("params", "field"),
    [
        (
            lambda v: ["kb", "x", {"fusion": {"method": "rrf", "weights": {"lexical": v}}}],
            "opts.fusion.weights.lexical",
        ),
        (lambda v: ["kb", "x", {"fusion": {"method": "weighted", "threshold": v}}], "opts.fusion.threshold"),
        (lambda v: ["kb", "x", {"facets": {"adr": v}}], "opts.facets.adr"),
        (lambda v: ["kb", "x", {"limit": v}], "opts.limit"),
    ],
)
def test_non_finite_numbers_are_refused_naming_the_field(bad, params, field):
    with pytest.raises(InvalidParams) as e:
        bind_params("search.query", params(bad))
    assert e.value.field == field
    assert "finite" in e.value.message


def test_finite_numbers_pass():
    bound = bind_params("search.query", ["kb", "x", {"fusion": {"method": "rrf", "weights": {"lexical": 9.5}}}])
    assert bound["opts"]["fusion"]["weights"]["lexical"] == 9.5
