"""The compiled params check (fastjsonschema) and the interpreted one
(jsonschema, which words the errors) give the same verdict: over every
method's params as the fuzzer draws them (valid, hostile, and anything at
all), and over the documented examples. A disagreement would let the fast
path accept params the contract refuses."""

from __future__ import annotations

import sys
from pathlib import Path

import fastjsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autodoc.errors import InvalidParams
from autodoc.rpc import schemas
from bench.reliability import fuzzed_methods, params_for

METHODS = fuzzed_methods()


def named(method: str, params):
    """The params as bind_params hands them to the validators, or None when
    they fail before the schema (wrong container, too many positions, NUL)."""
    names = schemas.param_names(method)
    if isinstance(params, list):
        if len(params) > len(names):
            return None
        params = dict(zip(names, params))
    if not isinstance(params, dict):
        return None
    try:
        schemas.check_strings_and_depth(params)
    except InvalidParams:
        return None
    return params


def verdicts(method: str, params) -> tuple[bool, bool]:
    fast = schemas.fast_validator(method, "params")
    assert fast is not None, f"{method}: its params schema did not compile"
    try:
        fast(params)
        fast_ok = True
    except fastjsonschema.JsonSchemaException:
        fast_ok = False
    return fast_ok, schemas.validator(method, "params").is_valid(params)


def test_every_params_schema_compiles():
    assert METHODS
    for method in METHODS:
        assert schemas.fast_validator(method, "params") is not None, method


@settings(
    max_examples=400,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_fast_and_interpreted_checks_agree_on_fuzzed_params(data):
    method = data.draw(st.sampled_from(METHODS))
    params = named(method, data.draw(params_for(method)))
    if params is None:
        return
    fast_ok, slow_ok = verdicts(method, params)
    assert fast_ok == slow_ok, f"{method} {params!r}: compiled says {fast_ok}, jsonschema says {slow_ok}"


@pytest.mark.parametrize(
    "method,params,field",
    [
        ("search.query", ["kb", "q", {"limit": 201}], "opts.limit"),
        ("search.query", ["kb", "q", {"stages": ["graph"]}], "opts.stages"),
        ("search.query", ["kb", "q", {"stages": ["lexical", "lexical"]}], "opts.stages"),
        ("search.query", ["kb", "q", {"retrieval": {"abstract_chunk": True, "x": 1}}], "opts.retrieval.x"),
        ("search.query", ["kb", 5], "query"),
        ("document.read", ["kb", "a.md", {"line_start": 0}], "opts.line_start"),
        ("workspace.add", {"name": "", "root": "/tmp"}, "name"),
    ],
)
def test_bad_params_still_name_their_field(method, params, field):
    with pytest.raises(InvalidParams) as info:
        schemas.bind_params(method, params)
    assert info.value.field == field


def test_valid_params_pass_both_and_are_not_filled_with_defaults():
    params = ["kb", "lease recovery", {"paths": ["adrs"], "stages": ["lexical", "semantic"]}]
    bound = schemas.bind_params("search.query", params)
    assert bound == {
        "workspace": "kb",
        "query": "lease recovery",
        "opts": {"paths": ["adrs"], "stages": ["lexical", "semantic"]},
    }
    assert verdicts("search.query", bound) == (True, True)
