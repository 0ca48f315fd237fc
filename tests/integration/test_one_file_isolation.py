"""Issue 36 High 1: one document's frontmatter value cannot fail the workspace.

A value that passes a cheap test and then fails a conversion (`adr: "²"` is
str.isdigit() but not int(); a 5,000-digit number is past Python's 4,300-digit
int/str limit) used to raise inside the batch's write and fail every file in
it, in the full index and in the live index alike. Each is now that document's
own problem: the others are written and searchable.
"""

from __future__ import annotations

import pytest

from autodoc.config import Settings
from autodoc.service import Service

HOSTILE = {
    "superscript.md": '---\nadr: "²"\n---\n# x\n\nsuperscript\n',
    "arabic.md": '---\nadr: "٣"\n---\n# x\n\narabic\n',
    "digits.md": "---\nadr: " + "7" * 5000 + "\n---\n# x\n\ndigits\n",
    "quoted.md": '---\nadr: "' + "7" * 5000 + '"\n---\n# x\n\nquoted\n',
    "big.md": "---\nadr: " + "9" * 400 + "\nrank: " + "9" * 400 + "\n---\n# x\n\nbig\n",
}


@pytest.fixture
def svc(short_tmp):
    s = Service(Settings.from_env(store=short_tmp / "store.db"))
    yield s
    s.close()


def _kb(root, names):
    root.mkdir()
    (root / "b.md").write_text("# ok\n\nok\n")
    for name in names:
        (root / name).write_text(HOSTILE[name])
    return root


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_full_index_writes_the_other_files(svc, short_tmp, name):
    kb = _kb(short_tmp / "kb", [name])
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    report = svc.index("kb")
    written = report["added"] + report["modified"]
    skipped = {s["path"] for s in report["skipped"]}
    assert "b.md" not in skipped and written >= 1, report
    assert written + len(skipped) == 2, report
    doc = svc.document_read("kb", "b.md")
    assert "ok" in doc["text"]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_live_index_writes_the_other_files(svc, short_tmp, name):
    kb = short_tmp / "kb"
    kb.mkdir()
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    svc.index("kb")
    # the same files, written after the first index: one live batch
    (kb / "b.md").write_text("# ok\n\nok\n")
    (kb / name).write_text(HOSTILE[name])
    report = svc.index_paths("kb", ["b.md", name])
    skipped = {s["path"] for s in report["skipped"]}
    assert "b.md" not in skipped and report["added"] >= 1, report
    assert report["added"] + len(skipped) == 2, report
    assert "ok" in svc.document_read("kb", "b.md")["text"]


def test_a_number_past_a_floats_range_is_a_schema_problem_of_its_document(svc, short_tmp):
    kb = _kb(short_tmp / "kb", ["big.md", "digits.md"])
    (kb / "_schema").mkdir()
    (kb / "_schema" / "frontmatter.yaml").write_text(
        "version: 1\ncommon:\n  adr: {type: integer, link: true}\n  rank: integer\n"
    )
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    report = svc.index("kb")
    assert report["skipped"] == [] and report["added"] == 3, report
    problems = svc.document_problems("kb", "big.md")["problems"]
    assert any(p["code"] == "schema.type" and p["message"].startswith("rank:") for p in problems), problems


def test_any_exception_while_writing_one_document_skips_that_document_only(svc, short_tmp, monkeypatch):
    """Whatever the next such value is: one document whose write raises anywhere (here its link
    names) is skipped with a reason; the batch's other documents are written, live and full."""
    from autodoc.store import links

    real = links._adr_number

    def flaky(v):
        if v == "boom":
            raise RuntimeError("a value nobody foresaw")
        return real(v)

    monkeypatch.setattr(links, "_adr_number", flaky)
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "b.md").write_text("# ok\n\nok\n")
    (kb / "c.md").write_text("---\nadr: boom\n---\n# c\n")
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    report = svc.index("kb")
    assert report["added"] == 1 and [s["path"] for s in report["skipped"]] == ["c.md"], report
    assert "RuntimeError" in report["skipped"][0]["reason"]
    (kb / "d.md").write_text("---\nadr: boom\n---\n# d\n")
    (kb / "e.md").write_text("# e\n\nsee [[b]]\n")
    report = svc.index_paths("kb", ["d.md", "e.md"])
    assert report["added"] == 1 and [s["path"] for s in report["skipped"]] == ["d.md"], report
    assert "e" in svc.document_read("kb", "e.md")["text"]


def test_a_lone_surrogate_escaped_in_yaml_is_replaced_not_a_skip(svc, short_tmp):
    """YAML's "\\ud800" escape makes a lone surrogate, which SQLite cannot store as text: the
    document was skipped at its write ("UnicodeEncodeError"); it is indexed with a problem."""
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "b.md").write_text("# ok\n\nok\n")
    (kb / "s.md").write_text(
        '---\ntitle: "x\\ud800y"\ntags: ["\\udc00"]\n"k\\ud801": v\nsuperseded_by: "\\ud800"\n---\n# s\n\nbody\n'
    )
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    report = svc.index("kb")
    assert report["added"] == 2 and report["skipped"] == [], report
    doc = svc.document_problems("kb", "s.md")
    assert any("surrogate" in p["message"] for p in doc["problems"]), doc
    assert [h["path"] for h in svc.search("kb", "x\ufffdy")["hits"]] == ["s.md"]


@pytest.mark.parametrize(
    "schema",
    [
        "version: " + "9" * 5000 + "\ncommon:\n  adr: integer\n",
        "version: 1\ncommon:\n  adr: {type: integer, minimum: " + "9" * 5000 + "}\n",
        "version: 1\ncommon:\n  adr: " + "7" * 5000 + "\n",
        "version: 1\ntype_field: " + "7" * 5000 + "\nstrict: " + "7" * 5000 + "\n",
    ],
    ids=["version", "spec-value", "spec", "type-field-and-strict"],
)
def test_a_schema_value_yaml_cannot_construct_is_a_schema_problem(svc, short_tmp, schema):
    """Found by the generative files test (tests/integration/test_files_property.py): a
    _schema/frontmatter.yaml whose value is past int()'s 4,300 digits raised ValueError out of
    the schema loader and failed the whole index run (workspace.index answered -32603, nothing
    indexed). The schema is the schema's problem, reported; the notes are indexed."""
    kb = _kb(short_tmp / "kb", [])
    (kb / "_schema").mkdir()
    (kb / "_schema" / "frontmatter.yaml").write_text(schema)
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    report = svc.index("kb")
    assert report["added"] == 1, report
    problems = svc.document_problems("kb")["problems"]
    assert any(p["path"] == "_schema/frontmatter.yaml" for p in problems), problems


def test_any_exception_while_loading_the_schema_is_the_schemas_problem(svc, short_tmp, monkeypatch):
    """Whatever the next such schema is: the loader raising anything is reported on the schema file."""
    from autodoc.store import facets

    def boom(text):
        raise RuntimeError("a schema nobody foresaw")

    monkeypatch.setattr(facets, "load_schema", boom)
    kb = _kb(short_tmp / "kb", [])
    (kb / "_schema").mkdir()
    (kb / "_schema" / "frontmatter.yaml").write_text("version: 1\n")
    svc.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    assert svc.index("kb")["added"] == 1
    problems = svc.document_problems("kb")["problems"]
    assert any("RuntimeError" in p["message"] for p in problems), problems
