"""schemas/ and protocol/PROTOCOL.md: the contract is complete, valid and in step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from autodoc import api
from autodoc.errors import ALL_ERRORS, AutodocError, InvalidParams, from_rpc
from autodoc.rpc import schemas
from autodoc.rpc.dispatch import Dispatcher
from autodoc.rpc.methods import Methods
from autodoc.rpc.route import Router

ROOT = Path(__file__).resolve().parents[2]
PROTOCOL = ROOT / "protocol" / "PROTOCOL.md"
NOTIFICATIONS = api.NOTIFICATIONS


class _App:
    service = socket_path = None

    def request_shutdown(self, reason): ...

    def workspaces_changed(self): ...

    def run_in_loop(self, fn, *args): ...


_ROUTE = Router(None, readers=None, writer=None)  # type: ignore[arg-type]
METHODS = sorted(Methods(_App(), _ROUTE).handlers())


def test_schemas_are_package_data_and_the_top_level_folder_links_to_them():
    folder = Path(str(schemas.schema_dir()))
    assert folder == ROOT / "daemon" / "autodoc" / "schemas"
    assert (ROOT / "schemas").is_symlink() and (ROOT / "schemas").resolve() == folder
    # what puts them into a wheel
    assert '"schemas/*.json"' in (ROOT / "pyproject.toml").read_text()


@pytest.mark.parametrize("name", schemas.schema_names())
def test_every_schema_is_valid_draft_2020_12(name):
    doc = json.loads((ROOT / "schemas" / name).read_text())
    Draft202012Validator.check_schema(doc)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert doc["$id"].endswith("/" + name)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_has_params_and_result_schemas(method):
    params = schemas.load_schema(method, "params")
    schemas.load_schema(method, "result")
    assert params["type"] == "object" and params["additionalProperties"] is False
    assert set(params.get("required", [])) <= set(params["properties"])


def test_nothing_else_has_a_schema():
    assert set(schemas.methods_with_schemas()) == set(METHODS) | NOTIFICATIONS


def test_positional_params_follow_the_schema_order():
    assert schemas.param_names("search.query") == ["workspace", "query", "opts"]
    assert schemas.param_names("workspace.configure") == ["workspace", "options", "root", "force"]
    assert schemas.param_names("workspace.section_size") == ["workspace", "tokens"]
    assert schemas.param_names("document.read") == ["workspace", "path", "opts"]
    assert schemas.param_names("changes.since") == ["workspace", "cursor", "limit"]
    # The spec's own examples (004 §1, §6).
    assert schemas.bind_params("workspace.section_size", ["kb", 400]) == {"workspace": "kb", "tokens": 400}
    spec = [
        "kb",
        "lease recovery lock -status:superseded",
        {
            "limit": 5,
            "paths": ["adrs", "synthesis"],
            "tags": ["sqlite"],
            "facets": {"type": ["adr", "synthesis"]},
            "retrieval": {"abstract_chunk": True, "demote_superseded": True},
        },
    ]
    assert schemas.bind_params("search.query", spec)["opts"]["limit"] == 5
    assert schemas.bind_params("search.query", ["kb", "q", {"stages": ["lexical", "semantic"], "limit": 5}])
    assert schemas.bind_params(
        "workspace.configure", ["kb", {"section_tokens": 400, "abstract_chunk": True, "demote_superseded": True}]
    )


def test_the_first_bad_field_is_named_the_same_way_every_time():
    with pytest.raises(InvalidParams) as info:
        schemas.bind_params("search.query", {"opts": {"limit": 999, "paths": [1]}})
    assert info.value.field == "workspace"
    with pytest.raises(InvalidParams) as info:
        schemas.bind_params("search.query", ["kb", "q", {"paths": ["a", 2], "limit": 999}])
    assert info.value.field == "opts.limit"


def test_results_are_strict_where_the_contract_is_exact():
    hit_errors = schemas.result_errors(
        "search.query",
        {
            "workspace": "kb",
            "query": "q",
            "hits": [{"path": "a.md"}],
            "mode_used": "lexical",
            "lexical_match": "all",
            "semantic": "off",
            "rank": {"state": "off", "model": None, "error": ""},
            "stages": {"requested": ["lexical"], "performed": ["lexical"], "skipped": {}},
        },
    )
    assert any(e.startswith("hits[0].breadcrumb: is required") for e in hit_errors)
    assert schemas.result_errors("changes.since", {"changes": [], "next_cursor": "7", "has_more": False}) == [
        "next_cursor: must be an integer"
    ]


def test_protocol_md_documents_every_method_notification_and_error_code():
    text = PROTOCOL.read_text()
    for method in METHODS + sorted(NOTIFICATIONS):
        assert re.search(rf"^###? `{re.escape(method)}`", text, re.M), method
    for cls in ALL_ERRORS:
        assert f"`{cls.code}`" in text and f"`{cls.name}`" in text, cls.__name__


def test_errors_come_back_as_their_own_class():
    for cls in ALL_ERRORS:
        wire = {"code": cls.code, "message": "why", "data": {"name": cls.name}}
        e = from_rpc(wire)
        assert type(e) is cls and e.code == cls.code and e.message == "why"
    e = from_rpc({"code": -32099, "message": "a code this side does not know"})
    assert type(e) is AutodocError and e.code == -32099
    # what a daemon really sends for bad params comes back with its field
    e = from_rpc(InvalidParams("opts.limit", "must be an integer").to_rpc())
    assert isinstance(e, InvalidParams) and e.field == "opts.limit" and e.name == "rpc.invalid_params"


def test_protocol_md_examples_are_valid_json_and_match_the_schemas():
    text = PROTOCOL.read_text()
    checked = 0
    for method, kind, body in re.findall(r"<!-- (\S+) (params|result) -->\n```json\n(.*?)```", text, re.S):
        value = json.loads(body)
        if kind == "params":
            schemas.bind_params(method, value)
        else:
            assert schemas.result_errors(method, value) == [], method
        checked += 1
    assert checked >= len(METHODS)


def test_dispatcher_serves_exactly_the_methods():
    assert set(Dispatcher(Methods(_App(), _ROUTE).handlers()).handlers) == set(METHODS)


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        ({"paths": ["a"] * 1001}, "opts.paths: must have at most 1000 items"),  # said "a string or an array of strings"
        ({"paths": ["y" * 5000]}, "opts.paths[0]: must be at most 4096 characters"),
        ({"paths": 3}, "opts.paths: must be a string or an array of strings"),
        ({"paths": ["a", 3]}, "opts.paths: must be a string or an array of strings"),
    ],
)
def test_a_value_of_the_right_kind_is_told_the_bound_it_broke(opts, message):
    with pytest.raises(InvalidParams) as e:
        schemas.bind_params("search.query", {"workspace": "kb", "query": "x", "opts": opts})
    assert e.value.to_rpc()["message"] == message
