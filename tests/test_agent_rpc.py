"""The daemon-side pieces agents need (issue 15): document.outline, search.similar,
did_you_mean on not-found errors, honest start-up status. Real store, real
service (the in-process binding runs the same table and schemas as the
daemon); every answer is checked against schemas/. The bridge mode of
`autodoc serve` is in test_serve_bridge.py (it needs real processes)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from autodoc.config import Settings
from autodoc.connect import invoke
from autodoc.errors import DocumentNotFound
from autodoc.rpc import schemas
from autodoc.service import Service

CORPORA = Path(__file__).parent / "corpora"
NO_MODEL = {"embedding": {"provider": "none"}}

ODD = """---
title: Odd shapes
---
Lead paragraph before any heading.

# Top

text

### Deep, skipping a level

```
# not a heading (in a fence)
```

## Second

#### Under second

Setext two
----------

body

# Another top
last line
"""


def checked(method: str, result: Any) -> Any:
    assert schemas.result_errors(method, result) == [], method
    return result


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    base = tmp_path_factory.mktemp("agentrpc")
    root = base / "kb"
    shutil.copytree(CORPORA / "kb", root, symlinks=True)
    (root / "notes" / "odd.md").write_text(ODD)
    service = Service(Settings.from_env(store=str(base / "store.db")))
    invoke(service, "workspace.add", ["kb", str(root), NO_MODEL])
    invoke(service, "workspace.index", ["kb"])
    try:
        yield service
    finally:
        service.close()


def call(service: Service, method: str, params: Any) -> Any:
    return checked(method, invoke(service, method, params))


# -- document.outline ---------------------------------------------------------------------------


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n["children"])


def test_outline_nests_headings_and_spans_reproduce_each_section(kb):
    out = call(kb, "document.outline", ["kb", "notes/odd.md"])
    tree = [(n["level"], n["title"], [(c["level"], c["title"], [g["title"] for g in c["children"]])
                                      for c in n["children"]]) for n in out["headings"]]
    assert tree == [(1, "Top", [(3, "Deep, skipping a level", []), (2, "Second", ["Under second"]),
                                (2, "Setext two", [])]),
                    (1, "Another top", [])]
    data = ODD.encode()
    assert out["total_lines"] == ODD.count("\n") and out["total_bytes"] == len(data)
    for n in _walk(out["headings"]):
        read = call(kb, "document.read", ["kb", "notes/odd.md",
                                          {"line_start": n["line_start"], "line_end": n["line_end"]}])
        assert read["text"].encode() == data[n["byte_start"]:n["byte_end"]], n["title"]
        assert n["tokens"] > 0
    top, another = out["headings"]
    assert top["line_start"] == ODD.splitlines().index("# Top") + 1
    assert top["line_end"] == another["line_start"] - 1 and another["line_end"] == out["total_lines"]
    # a parent's section holds its children's, and its tokens are at least theirs
    assert top["tokens"] >= sum(c["tokens"] for c in top["children"])
    assert all(top["byte_start"] <= c["byte_start"] < c["byte_end"] <= top["byte_end"] for c in top["children"])


def test_outline_of_a_real_adr_covers_the_file_to_its_last_line(kb):
    out = call(kb, "document.outline", ["kb", "adrs/0012-lease-recovery.md"])
    assert out["title"].startswith("ADR 0012")
    (h1,) = out["headings"]
    assert h1["line_end"] == out["total_lines"] and h1["byte_end"] == out["total_bytes"]
    titles = [c["title"] for c in h1["children"]]
    assert "Decision" in titles and "Consequences" in titles
    assert out["tokens"] >= h1["tokens"] > sum(c["tokens"] for c in h1["children"]) * 0.9


def test_outline_of_a_missing_document_is_not_found(kb):
    with pytest.raises(DocumentNotFound):
        invoke(kb, "document.outline", ["kb", "adrs/nope.md"])
