"""Issue 16: document.read of the generation a hit points into, once a newer one exists.

The index keeps one generation of each document (its row is rewritten in place),
so a read that names an older generation than the document's answers a clear
error naming both generations instead of serving the newer text under the old
hit's spans; the current generation is served as before. Real store, real index.
"""

from __future__ import annotations

import pytest

from autodoc.connect import invoke
from autodoc.errors import AutodocError, InvalidParams
from autodoc.rpc import schemas

NO_MODEL = {"embedding": {"provider": "none"}}


@pytest.fixture()
def svc(service_factory, tmp_path):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "a.md").write_text("# A\n\nThe quasar lease renews itself.\n")
    return service_factory(kb, NO_MODEL, store=tmp_path / "s" / "autodoc.db"), kb


def test_the_hits_generation_is_served_then_refused_once_it_is_gone(svc):
    s, kb = svc
    hit = invoke(s, "search.query", ["kb", "quasar"])["hits"][0]
    opts = {"generation": hit["generation"], "line_start": hit["line_start"], "line_end": hit["line_end"]}
    got = invoke(s, "document.read", ["kb", hit["path"], opts])
    assert schemas.result_errors("document.read", got) == []
    assert got["generation"] == hit["generation"] and "quasar" in got["text"]

    (kb / "a.md").write_text("# A\n\nRewritten: nothing about that any more.\n\nMore lines.\n")
    s.index("kb")
    with pytest.raises(AutodocError) as e:
        invoke(s, "document.read", ["kb", hit["path"], opts])
    err = e.value
    assert (err.code, err.name) == (-32006, "document.generation_gone")
    current = invoke(s, "document.read", ["kb", "a.md"])["generation"]
    assert err.data == {"path": "a.md", "generation": hit["generation"], "current": current}
    assert f"generation {hit['generation']}" in err.message and f"now at generation {current}" in err.message
    # without a generation, or with the current one, the newer text is served
    assert "Rewritten" in invoke(s, "document.read", ["kb", "a.md", {"generation": current}])["text"]


def test_a_bad_generation_is_a_params_error(svc):
    s, _ = svc
    with pytest.raises(InvalidParams) as e:
        invoke(s, "document.read", ["kb", "a.md", {"generation": -1}])
    assert e.value.field == "opts.generation"
