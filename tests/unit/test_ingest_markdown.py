"""parse_markdown on the kb corpus and on tricky strings."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

from autodoc.ingest.markdown import parse_markdown
from autodoc.ingest.types import Link

CORPORA = Path(__file__).parents[1] / "corpora"
KB = runpy.run_path(str(CORPORA / "make_special.py"))["ensure_special_files"]()


def doc(rel: str):
    raw = (KB / rel).read_bytes()
    return raw, parse_markdown(raw.decode("utf-8"))


# --- corpus ---------------------------------------------------------------


def test_adr_frontmatter_fields_and_chain_links():
    raw, d = doc("adrs/0007-sqlite-wal-lease.md")
    assert d.title == "ADR 0007: SQLite WAL mode and the writer lease"
    assert d.tags == ["storage", "sqlite", "concurrency"]  # comma string + inline #concurrency
    assert d.aliases == ["ADR 0007", "writer lease"]
    assert d.status == "superseded"
    assert d.supersedes == ["0001-sqlite-storage"]
    assert d.superseded_by == ["0012-lease-recovery"]
    assert d.frontmatter["date"] == "2023-06-02"
    assert d.frontmatter["adr"] == 7
    json.dumps(d.frontmatter, allow_nan=False)
    fm_links = [l for l in d.links if l.kind in ("supersedes", "superseded_by")]
    assert fm_links == [
        Link("0001-sqlite-storage", "supersedes", 10),
        Link("0012-lease-recovery", "superseded_by", 11),
    ]
    assert d.abstract.startswith("Switch the index to SQLite WAL mode")
    assert "\n" not in d.abstract  # folded scalar
    bs, be, ls, le = d.abstract_span
    field = raw[bs:be].decode()
    assert field.startswith("abstract: >-") and field.endswith("beside the database.")
    assert (ls, le) == (12, 14)
    assert d.body_line == 16 and raw[: d.body_byte].endswith(b"---\n")


def test_chain_end_and_status_case():
    _, d1 = doc("adrs/0001-sqlite-storage.md")
    assert d1.status == "superseded"  # written "Superseded"
    assert d1.superseded_by == ["0007-sqlite-wal-lease"] and d1.supersedes == []
    _, d12 = doc("adrs/0012-lease-recovery.md")
    assert d12.supersedes == ["0007-sqlite-wal-lease"] and d12.status == "accepted"
    assert "\n" in d12.abstract and "reclaimBatch" in d12.abstract  # literal scalar keeps lines


def test_links_in_lease_recovery_adr():
    _, d = doc("adrs/0012-lease-recovery.md")
    body = [l for l in d.links if l.kind in ("wiki", "markdown")]
    assert body == [
        Link("writer lease", "wiki", 27, label="the lease from ADR 0007"),
        Link("../runbooks/lease-recovery.md", "markdown", 32, "lease recovery runbook", "stale-lease"),
        Link("Lease recovery runbook", "wiki", 157, anchor="Stale lease"),
        Link("../runbooks/embedding-queue-stuck.md", "markdown", 158, "the queue runbook"),
    ]


def test_tagging_conventions_edge_cases():
    _, d = doc("notes/tagging-conventions.md")
    assert d.tags == ["meta", "conventions", "howto", "sqlite/wal", "on-call_2024", "fff"]
    targets = [(l.target, l.kind, l.label, l.anchor) for l in d.links]
    assert targets == [
        ("../runbooks/lease-recovery.md", "markdown", "the stale lease section", "stale-lease"),
        ("Hybrid search pipeline", "wiki", "", ""),
        ("search design", "wiki", "", ""),
        ("ADR 0015", "wiki", "the queue decision", ""),
        ("Embedding queue stuck", "wiki", "", "Provider down"),
    ]


def test_code_fences_hide_headings_and_tags():
    _, d = doc("runbooks/lease-recovery.md")
    assert [(h.level, h.text, h.line) for h in d.headings] == [
        (1, "Lease recovery runbook", 9),
        (2, "Stale lease", 14),
        (2, "WAL file keeps growing", 30),
        (2, "NFS home directories", 41),
    ]
    assert "not-a-tag" not in d.tags
    _, q = doc("runbooks/embedding-queue-stuck.md")
    assert [h.text for h in q.headings] == ["Embedding queue stuck", "Check the queue", "Provider down", "Model switch"]


def test_setext_headings_and_tilde_fence():
    raw, d = doc("design/search-pipeline.md")
    assert [(h.level, h.text, h.line) for h in d.headings][:2] == [
        (1, "Hybrid search pipeline", 11),
        (2, "Query parsing", 17),
    ]
    assert d.title == "Hybrid search pipeline"
    assert all(h.text != "popcount of XOR; lower is closer" for h in d.headings)
    for h in d.headings:
        line = raw.split(b"\n")[h.line - 1]
        assert raw[h.byte_start :].startswith(line)


def test_no_frontmatter_no_h1():
    _, d = doc("notes/standup-2024-03-14.md")
    assert d.title == "" and d.frontmatter == {} and d.body_line == 1 and d.body_byte == 0
    assert [h.text for h in d.headings] == ["Action items"]
    assert d.tags == ["standup"]


def test_invalid_yaml_is_a_problem_and_body_still_parsed():
    raw, d = doc("notes/broken-frontmatter.md")
    assert d.frontmatter == {}
    assert len(d.problems) == 1 and d.problems[0].line == 4 and d.problems[0].code == "frontmatter"
    assert "invalid YAML" in d.problems[0].message
    assert d.title == "Notes on chunk sizes" and d.tags == ["chunking"]
    assert d.body_line == 6 and raw[d.body_byte :].startswith(b"\n# Notes on chunk sizes")


def test_cjk_offsets_and_tags():
    raw, d = doc("notes/cjk-notes.md")
    assert d.title == "多言語メモ"
    assert d.tags == ["i18n", "数据库", "迁移", "検索", "search"]
    assert [h.text for h in d.headings] == ["数据库迁移指南", "常见问题", "検索エンジンの設定", "絵文字とタグ"]
    h = d.headings[2]
    assert raw[h.byte_start :].startswith("# 検索エンジンの設定".encode())


# --- tricky strings -------------------------------------------------------


@pytest.mark.parametrize(
    "text, fm, body_line, problems",
    [
        ("---\ntitle: A\n---\nbody\n", {"title": "A"}, 4, 0),
        ("---\ntitle: A\n...\nbody\n", {"title": "A"}, 4, 0),
        ("---\n---\n# T\n", {}, 3, 0),
        ("\n---\ntitle: A\n---\n", {}, 1, 0),  # not at the very start
        ("---\ntitle: A\nno end\n", {}, 1, 1),  # unclosed: body, with a problem
        ("---\n- a\n- b\n---\nx\n", {}, 5, 1),  # a list, not a mapping
        ("---\ntitle: [x\n---\n# H\n", {}, 4, 1),
    ],
)
def test_frontmatter_shapes(text, fm, body_line, problems):
    d = parse_markdown(text)
    assert d.frontmatter == fm and d.body_line == body_line and len(d.problems) == problems


def test_yaml_error_line_points_into_the_file():
    d = parse_markdown("---\ntitle: ok\nowner: a\ntags: [x\nstatus: y\n---\n")
    assert d.problems[0].line in (4, 5)  # YAML reports where it noticed, after the opening [


def test_json_safe_values():
    d = parse_markdown("---\nd: 2024-01-02\nt: 2024-01-02 03:04:05\nn: .nan\nm: {1: [a, 2021-05-06]}\n---\n")
    assert d.frontmatter == {"d": "2024-01-02", "t": "2024-01-02T03:04:05", "n": "nan", "m": {"1": ["a", "2021-05-06"]}}
    json.dumps(d.frontmatter, allow_nan=False)


def test_bom_and_crlf():
    text = "\ufeff---\r\ntitle: T\r\n---\r\n# Head ##\r\nText #crlf\r\n"
    d = parse_markdown(text)
    assert d.title == "T" and d.body_line == 4
    assert d.body_byte == len("\ufeff---\r\ntitle: T\r\n---\r\n".encode())
    assert [(h.text, h.line) for h in d.headings] == [("Head", 4)] and d.tags == ["crlf"]


def test_frontmatter_tag_and_name_shapes():
    d = parse_markdown("---\ntags: 'A b,#C'\naliases: One\nsupersedes: '[[ADR 0007]]'\nstatus: Accepted\n---\n#a #D\n")
    assert d.tags == ["a", "b", "c", "d"]
    assert d.aliases == ["One"] and d.supersedes == ["ADR 0007"] and d.status == "accepted"
    assert d.links == [Link("ADR 0007", "supersedes", 4)]


@pytest.mark.parametrize(
    "line, level, text",
    [
        ("# Title", 1, "Title"),
        ("###### Six ######", 6, "Six"),
        ("## Foo#", 2, "Foo#"),
        ("   ## Indented", 2, "Indented"),
        ("## **Bold** `code` [link](x.md) [[Wiki|Label]] <b>h</b> \\*", 2, "Bold code link Label h *"),
        ("## snake_case and _emph_", 2, "snake_case and emph"),
        ("#", 1, ""),
    ],
)
def test_atx_headings(line, level, text):
    d = parse_markdown(line + "\n")
    assert [(h.level, h.text) for h in d.headings] == [(level, text)]


@pytest.mark.parametrize("line", ["#NoSpace", "####### seven", "    # indented code", "\\# escaped"])
def test_not_headings(line):
    assert parse_markdown(line + "\n").headings == []


def test_setext_rules():
    d = parse_markdown("Para one\ncontinues\n---\n\n---\n\n- item\n---\n\nX\n===\n")
    assert [(h.level, h.text, h.line) for h in d.headings] == [(2, "Para one continues", 1), (1, "X", 10)]


def test_fences():
    text = "````\n```\n# inside\n```\n#in\n````\n# out\n~~~\n```\n#no\n~~~~\n## after\n```\n# unclosed\n#no2\n"
    d = parse_markdown(text)
    assert [h.text for h in d.headings] == ["out", "after"]
    assert d.tags == []


def test_inline_code_and_urls_are_not_tags():
    d = parse_markdown(
        "`#a` `` x #b ` `` ``#c`` [x](#d) see https://h.example/p#e and <https://x.org/#f> a#g &#h; #ok\n"
        "https://x.org/p?q=#i https://x.org/a-#j www.x.org/(#k) [[Note|#l]] [[#m]] [#n](y.md)\n"
    )
    assert d.tags == ["ok"]  # nothing inside a link is a tag, its label included (issue 35)


def test_markdown_link_filters():
    text = (
        "![img](pic.md) [web](https://x.org/a.md) [m](mailto:a@b.md) [pic](../p.png) [self](#sec)\n"
        '[a](b.md "T") [sp](<my note.md#Sec 2>) [enc](my%20file.markdown?x=1#a%20b) [[#Local]] ![[i.png]]\n'
        "![[Embedded note]] [[a\\|b]] [ref]: ../r.md\n"
    )
    got = [(l.target, l.kind, l.label, l.anchor, l.line) for l in parse_markdown(text).links]
    assert got == [
        ("b.md", "markdown", "a", "", 2),
        ("my note.md", "markdown", "sp", "Sec 2", 2),
        ("my file.markdown", "markdown", "enc", "a b", 2),
        ("Embedded note", "wiki", "", "", 3),
        ("a", "wiki", "b", "", 3),
    ]


def test_reference_definition_is_a_link():
    d = parse_markdown("See [the runbook][rb].\n\n[rb]: ../runbooks/x.md#top\n")
    assert d.links == [  # the use, then the definition (a line that names the document too)
        Link("../runbooks/x.md", "markdown", 1, "the runbook", "top"),
        Link("../runbooks/x.md", "markdown", 3, "rb", "top"),
    ]


def test_title_falls_back_to_first_h1_then_empty():
    assert parse_markdown("## Two\n# One\n# Other\n").title == "One"
    assert parse_markdown("## Only two\n").title == ""
    assert parse_markdown("---\ntitle: 2024\n---\n# H\n").title == "2024"


def test_empty_and_blank_documents():
    for text in ("", "\n\n", "---\n---\n"):
        d = parse_markdown(text)
        assert d.headings == [] and d.links == [] and d.tags == [] and d.title == ""
    assert parse_markdown("").body_byte == 0
