"""A frontmatter schema edit takes effect live in the real daemon: its watcher
hands `_schema/frontmatter.yaml` to the index, which re-derives every
document's facets (no file is re-chunked: no change is pushed)."""

from __future__ import annotations

import time

import pytest
from helpers.kb_schema import NO_MODEL, make_kb_schema

from autodoc.rpc import schemas
from autodoc_client import call_socket

DEADLINE = 20


def _wait(predicate, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture()
def served(short_tmp, daemon_factory):
    kb = make_kb_schema(short_tmp / "kb")
    sock = short_tmp / "run" / "autodoc.sock"
    d = daemon_factory(short_tmp, sock=sock, env={"AUTODOC_CHECK_RESULTS": "1"}, timeout=DEADLINE)
    try:

        def call(method, params=None):
            result = call_socket(sock, method, params, timeout=DEADLINE)
            assert schemas.result_errors(method, result) == [], method
            return result

        call("workspace.add", ["kb", str(kb), NO_MODEL])
        call("workspace.index", ["kb"])
        _wait(lambda: "kb" in call("server.info")["watching"], "the watcher")
        yield call, kb
    finally:
        d.stop()


def test_a_saved_schema_edit_is_applied_by_the_watcher(served):
    call, kb = served

    def browse(q):
        ans = call("search.query", ["kb", q, {"limit": 50}])
        return ans["mode_used"], [h["path"] for h in ans["hits"]]

    assert browse("effort:>2") == ("facet", ["design/storage-layout.md"])
    generation = call("workspace.status", ["kb"])["generation"]
    schema = kb / "_schema" / "frontmatter.yaml"
    schema.write_text(schema.read_text().replace("    effort: number\n", "    effort: string\n"))
    # a string field takes no ranges: ">2" is now the literal text, which nothing has
    _wait(lambda: browse("effort:>2") == ("facet", []), "the schema edit to apply")
    assert browse("effort:2.5") == ("facet", ["design/storage-layout.md"])
    status = call("workspace.status", ["kb"])
    assert status["generation"] == generation  # no document was rewritten
    schema.write_text("common:\n  owner: {type: enum, values: [nobody]}\n")
    _wait(
        lambda: any(
            p["code"] == "schema.enum" and p["path"] == "rfcs/sync-protocol.md"
            for p in call("document.problems", ["kb"])["problems"]
        ),
        "the second edit",
    )
    assert browse("effort:2.5")[0] == "lexical"  # undeclared now: words
