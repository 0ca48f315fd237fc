"""Issue 16, the ingest layer: hostile-but-real input never breaks parsing, chunking or scanning.

Every case in helpers/hostile.py is parsed and chunked with no exception; the
problems it must report are there with their lines; the chunks still cover
the body. Cases that would expose super-linear parsing are sized so that a
quadratic path runs past pytest's timeout (no test here is timed).
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from helpers.hostile import restore_permissions, sample, text_cases, write_tree
from helpers.ingest_walk import check_document, ingest_file, ingest_tree
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autodoc.ingest import chunk_document, parse_markdown
from autodoc.ingest.frontmatter import MAX_FRONTMATTER_NODES
from autodoc.ingest.markdown import MAX_HEADING_CHARS, MAX_HEADINGS, MAX_PROBLEMS
from autodoc.ingest.scan import BAD_NAME, DANGLING, LINKED_OUTSIDE, OUTSIDE, entry_for
from autodoc.ingest.text import prepared_text

pytestmark = pytest.mark.slow  # tens of seconds: left out of make test-fast

CASES = text_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_hostile_text_parses_and_chunks(case):
    if case.repeated:  # the whole text for parsing's linearity, a sample for chunking's
        doc = parse_markdown(case.text)
        check_document(case.text, doc, [])
        doc, chunks = ingest_file(sample(case))
        check_document(sample(case), doc, chunks)
    else:
        doc, chunks = ingest_file(case.text)
        check_document(case.text, doc, chunks)
    json.dumps(doc.frontmatter, allow_nan=False)  # what the store writes must serialise
    codes = [p.code for p in doc.problems]
    for code in case.codes:
        assert code in codes, (code, doc.problems[:5])
    if case.line is not None:
        first = next(p for p in doc.problems if p.code == case.codes[0])
        assert first.line == case.line, first
    for key, value in (case.frontmatter or {}).items():
        assert doc.frontmatter.get(key) == value, (key, doc.frontmatter.get(key))
    body = sample(case).encode("utf-8", "surrogatepass")[doc.body_byte :]
    if body.strip():
        assert chunks, "a body with text gives at least one chunk"


def test_an_impossible_date_keeps_the_file_and_the_other_fields():
    text = "---\ntitle: Decision\nstatus: Accepted\ndate: 2020-02-30\nupdated: 2021-03-04\n---\n# Decision\n"
    doc = parse_markdown(text)
    assert doc.title == "Decision" and doc.status == "accepted"
    assert doc.frontmatter["date"] == "2020-02-30"
    assert doc.frontmatter["updated"] == dt.date(2021, 3, 4).isoformat()  # a valid date still loads as a date
    (p,) = doc.problems
    assert (p.line, p.code) == (4, "frontmatter") and "2020-02-30" in p.message and "timestamp" in p.message


def test_the_alias_bomb_is_stopped_and_reported_per_field():
    from helpers.hostile import alias_bomb

    doc = parse_markdown(f"---\ntitle: Laughs\n{alias_bomb()}---\n# x\n")
    fm = doc.frontmatter
    assert fm["title"] == "Laughs" and fm["a"] == ["lol"] * 9 and len(fm["b"]) == 9
    dropped = [k for k in "abcdefghi" if fm[k] is None]
    assert dropped and dropped == list("abcdefghi"[-len(dropped) :])  # the small ones are kept
    limits = [p for p in doc.problems if p.code == "limit"]
    assert len(limits) == len(dropped) and all(str(MAX_FRONTMATTER_NODES) in p.message for p in limits)
    assert [p.line for p in limits] == [3 + "abcdefghi".index(k) for k in dropped]  # the line of each value
    assert len(json.dumps(fm)) < 20 * MAX_FRONTMATTER_NODES  # nothing near 9^9 values was built


def test_merge_keys_and_duplicates():
    doc = parse_markdown("---\nbase: &b {x: 1, y: 2}\nm:\n  <<: [*b, {x: 9, z: 3}]\n  y: 5\nm2: {a: 1, a: 2}\n---\n")
    assert doc.frontmatter["m"] == {"x": 1, "y": 5, "z": 3}  # first merge source wins, own keys override
    assert doc.frontmatter["m2"] == {"a": 2}
    assert [(p.line, "m2.a" in p.message) for p in doc.problems] == [(6, True)]


def test_control_characters_are_replaced_not_fatal():
    doc = parse_markdown("---\ntitle: a\x07b\ntags: [x]\n---\nbody\n")
    assert doc.frontmatter == {"title": "a\ufffdb", "tags": ["x"]} and doc.tags == ["x"]
    (p,) = doc.problems
    assert p.line == 2 and "U+0007" in p.message


def test_heading_limits():
    doc = parse_markdown("# h\n" * (MAX_HEADINGS + 10))
    assert len(doc.headings) == MAX_HEADINGS
    (p,) = doc.problems
    assert p.line == MAX_HEADINGS + 1 and p.code == "limit"
    doc = parse_markdown("# " + "long " * 1000 + "\n")
    assert len(doc.headings[0].text) <= MAX_HEADING_CHARS + 1 and doc.headings[0].text.endswith("long…")
    assert doc.problems[0].line == 1 and doc.problems[0].code == "limit"
    assert doc.title == doc.headings[0].text


def test_problems_are_capped():
    text = "---\n" + "".join(f"d{i}: 2020-02-{30 + i % 2}\n" for i in range(300)) + "---\n"
    doc = parse_markdown(text)
    assert len(doc.problems) == MAX_PROBLEMS + 1
    assert doc.problems[-1].message == f"{300 - MAX_PROBLEMS} more problems not listed"
    assert len(doc.frontmatter) == 300  # every value kept, as text


def test_bom_does_not_hide_the_first_heading():
    doc = parse_markdown("\ufeff# Title\n\nbody\n")
    assert doc.title == "Title" and doc.headings[0].line == 1


def test_chunking_a_mismatched_document_falls_back_to_windows():
    # chunk_document given the parse of other text: the structure is wrong, the text is still cut and reported
    text = "# a\n\n" + "word " * 2000
    doc = parse_markdown("# x\n" * 50)
    chunks = chunk_document(text, doc, section_tokens=100)
    assert len(chunks) > 5 and doc.problems[-1].code == "chunk"
    assert " ".join(c.text for c in chunks).split() == text.split()


def test_hostile_tree(tmp_path):
    max_bytes = 4 << 20
    root = tmp_path / "ws"
    cases = write_tree(root, max_bytes=max_bytes)
    try:
        got = ingest_tree(root, max_bytes=max_bytes)  # a FIFO that blocked would end this at the timeout
    finally:
        restore_permissions(root)
    expected = {c.relpath: c for c in cases}
    assert set(got) == set(expected), set(got) ^ set(expected)
    for rel, case in expected.items():
        o = got[rel]
        if case.reason is None:
            assert o.skip is None, (rel, o.skip)
            text = prepared_text(rel, (root / rel).read_bytes())[0]
            check_document(text, o.doc, o.chunks)
            assert o.chunks or not text.strip(), rel
        else:
            assert o.skip and case.reason in o.skip, (rel, o.skip, case.reason)
    assert got["bad-\\xff\\xfe.md"].skip == BAD_NAME
    assert got["self.md"].skip == got["loop-a.md"].skip == DANGLING and got["to-outside.md"].skip == OUTSIDE
    assert [p.code for p in got["alias-bomb.md"].doc.problems] == ["limit"] * 5  # e..i: 9^5 values and up
    assert got["bad-date.md"].doc.frontmatter == {"date": "2020-02-30"}
    assert got["heading-spaces.md"].doc.problems[0].code == "limit"
    assert got["utf8-bom.md"].doc.title == "BOM"
    assert got["utf16le.md"].doc.title == "T" and got["utf16le.md"].doc.problems[0].code == "encoding"
    assert got["latin1.md"].doc.title == "caf\ufffd" and got["latin1.md"].doc.problems[0].code == "encoding"
    assert [r for r in got if r.startswith("to-root/")] == ["to-root/"]  # a linked folder is never walked,
    assert got["to-root/"].skip == LINKED_OUTSIDE  # and says so


def test_entry_for_odd_files(tmp_path):
    root = tmp_path / "ws"
    write_tree(root, max_bytes=1 << 20)
    restore_permissions(root)
    assert "FIFO" in entry_for(root, "fifo.md", max_bytes=1 << 20).skip
    assert "FIFO" in entry_for(root, "to-fifo.md", max_bytes=1 << 20).skip
    assert entry_for(root, "d", max_bytes=1 << 20) is None  # a folder is no entry
    bad = entry_for(root, b"bad-\xff\xfe.md".decode("utf-8", "surrogateescape"), max_bytes=1 << 20)
    assert (bad.relpath, bad.skip) == ("bad-\\xff\\xfe.md", BAD_NAME)


def test_the_live_index_judges_each_path_as_the_full_scan_does(tmp_path):
    """index_paths (the watcher's) asks entry_for what a scan would say of a path, so an odd file is
    skipped for the reason a full index gives, a dangling or looping symlink too (it was counted a
    deletion there: one answer for both)."""
    from autodoc.config import Settings
    from autodoc.config.defaults import MAX_FILE_BYTES
    from autodoc.service import Service

    root = tmp_path / "ws"
    write_tree(root, max_bytes=MAX_FILE_BYTES)
    (root / "folder.md").mkdir()
    names = [p.name for p in root.iterdir() if p.suffix == ".md"]  # as the watcher hands them (raw names)
    answers = {}
    try:
        for run in ("full", "live"):
            svc = Service(Settings.from_env(store=tmp_path / f"{run}.db"))
            try:
                svc.workspace_add("ws", str(root), {"embedding": {"provider": "none"}})
                report = svc.index("ws") if run == "full" else svc.index_paths("ws", names)
            finally:
                svc.close()
            answers[run] = {s["path"]: s["reason"] for s in report["skipped"]}
    finally:
        restore_permissions(root)
    full, live = answers["full"], answers["live"]
    assert {p: r for p, r in full.items() if not p.endswith("/")} == live
    assert DANGLING in live.values()
    assert live["bad-\\xff\\xfe.md"] == BAD_NAME and live["to-outside.md"] == OUTSIDE


# Frontmatter built from YAML's own punctuation, control characters and scalars that
# look like dates and numbers: any str parses, problems name a real line, values serialise.
_yaml_bits = st.sampled_from(
    [
        "a",
        "b",
        ": ",
        "- ",
        "? ",
        "[",
        "]",
        "{",
        "}",
        ",",
        "&x ",
        "*x",
        "&y ",
        "*y",
        "<<: ",
        "!!int ",
        "!foo ",
        "!!set ",
        "!!binary ",
        "|\n",
        ">-\n",
        "'",
        '"',
        "#",
        "\n",
        "\n  ",
        "\n    ",
        "\t",
        "\x07",
        "\x00",
        "\ud800",
        "2020-02-30",
        "2020-01-01",
        "1" * 30,
        "0x1F",
        ".inf",
        "~",
        "null",
        "true",
        "---",
        "...",
        "%YAML 1.1\n",
        "é",
    ]
)
frontmatter_texts = st.lists(_yaml_bits, max_size=60).map(lambda xs: "---\n" + "".join(xs) + "\n---\n# T\nbody\n")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frontmatter_texts)
def test_any_frontmatter_parses(text):
    doc, chunks = ingest_file(text)
    check_document(text, doc, chunks)
    json.dumps(doc.frontmatter, allow_nan=False)
    assert all(isinstance(k, str) for k in doc.frontmatter)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("#`[]()!*_-=>|<~{}:. \t\n\r\x00\ufeff\ud800aé文")), max_size=300))
def test_any_markdown_parses(text):
    doc, chunks = ingest_file(text)
    check_document(text, doc, chunks)


def test_a_giant_integer_kept_as_text_is_a_schema_violation_not_a_crash():
    from autodoc.fmschema.values import CoerceError, coerce

    doc = parse_markdown("---\nn: " + "7" * 5000 + "\n---\n")
    with pytest.raises(CoerceError, match="expected an integer"):
        coerce("integer", doc.frontmatter["n"])
