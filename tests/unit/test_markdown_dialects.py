"""Issue 35, "Real Markdown is misread": tags only where Obsidian or zk would see one, links as
the site renders them. Each case reads a real file of ../shared/data/corpora at test time."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.ingest.inline import link_spans
from autodoc.ingest.markdown import parse_markdown
from autodoc.ingest.types import Link

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")


def real(rel: str):
    return parse_markdown((CORPORA / rel).read_bytes().decode("utf-8"))


def test_hugo_heading_ids_are_no_tags_and_leave_the_title():
    d = real("opentelemetry-docs/content/ja/docs/collector/deploy/gateway.md")  # "## 次のステップ {#next-steps}"
    assert "next-steps" not in d.tags
    assert "次のステップ" in [h.text for h in d.headings]
    assert d.tags == []


def test_in_page_anchor_links_are_no_tags():
    d = real("opentelemetry-docs/content/en/docs/contributing/pull-requests.md")  # [..](#fork-the-repo)
    assert "fork-the-repo" not in d.tags and d.tags == []


def test_every_tag_of_the_opentelemetry_docs_is_gone():
    """The 15 most frequent tags of workspace.tags there were heading ids and anchors; the docs
    have no tag at all but one heading whose id lost its braces in translation."""
    root = CORPORA / "opentelemetry-docs" / "content" / "en" / "docs"
    tags = {t for f in sorted(root.rglob("*.md")) for t in parse_markdown(f.read_text("utf-8")).tags}
    assert tags == set()


def test_a_link_label_wrapped_over_two_lines_is_one_link_and_no_tag():
    d = real("swift-evolution/proposals/0143-conditional-conformances.md")  # "[overlapping\nconformances](#..."
    assert "overlapping-conformances" not in d.tags
    text = "See [how to obtain\norganisation managers](guides/managers/#how-to-obtain-organisation-managers) now.\n"
    p = parse_markdown(text)
    assert p.tags == []
    assert p.links == [
        Link(
            "guides/managers",
            "markdown",
            1,
            "how to obtain organisation managers",
            "how-to-obtain-organisation-managers",
        )
    ]


def test_kramdown_attribute_lists_and_script_blocks_are_no_tags():
    d = real("jekyll/docs/_docs/history.md")  # "{: #v4-4-1}" under each heading
    assert not [t for t in d.tags if t.startswith(("v4-", "v3-", "bug-fixes", "minor-enhancements"))]
    b = real("opentelemetry-docs/content/en/docs/collector/benchmarks.md")  # "#d78000" in a <script>
    assert b.tags == []


def test_real_tags_stay():
    assert "recipe" in real("foam-docs/docs/user/recipes/predefined-user-snippets.md").tags
    p = parse_markdown("A #tag, [#not](x.md), <a href='#no'>x</a>, {{< ref \"#no2\" >}}, `#no3` and #two.\n")
    assert p.tags == ["tag", "two"]


def test_extensionless_and_folder_links_are_document_links():
    d = real("opentelemetry-docs/content/en/docs/concepts/signals/_index.md")  # ](traces) ](metrics)
    targets = {l.target for l in d.links}
    assert {"traces", "metrics", "logs", "baggage"} <= targets
    p = parse_markdown(
        "[a](guides/upgrade_bosh/) [b](../ADR006-rds-broker) [c](page.html#x) [img](pic.png) [ext](https://x.org)\n"
        "\n[^1]: a footnote, not a link\n"
    )
    assert [(l.target, l.anchor) for l in p.links] == [
        ("guides/upgrade_bosh", ""),
        ("../ADR006-rds-broker", ""),
        ("page.html", "x"),
    ]


def test_reference_definitions_and_their_uses():
    d = real("foam-docs/docs/user/frequently-asked-questions.md")
    defs = [(l.target, l.line) for l in d.links if l.kind == "markdown"]
    assert ("features/wikilinks.md", 37) in defs
    p = parse_markdown(
        "Use [the notes][wikilinks], [Wikilinks] and [wikilinks][] here.\n\n[wikilinks]: features/wikilinks.md 'W'\n"
    )
    assert [(l.target, l.line, l.label) for l in p.links] == [
        ("features/wikilinks.md", 1, "the notes"),
        ("features/wikilinks.md", 1, "Wikilinks"),
        ("features/wikilinks.md", 1, "wikilinks"),
        ("features/wikilinks.md", 3, "wikilinks"),
    ]


def test_the_cursor_on_a_reference_definition_or_use_is_on_a_link():
    line = "[wikilinks]: features/wikilinks.md 'Wikilinks'"
    assert [(a, b, l.target) for a, b, l in link_spans(line, 37)] == [(0, len(line), "features/wikilinks.md")]
    use = "see [Wikilinks] now"
    assert [(a, b, l.target) for a, b, l in link_spans(use, 1, {"wikilinks": "features/wikilinks.md"})] == [
        (4, 15, "features/wikilinks.md")
    ]
    assert link_spans(use, 1) == []


def test_headings_keep_their_id_as_anchor():
    d = real(
        "opentelemetry-docs/content/en/docs/contributing/pull-requests.md"
    )  # "## Working locally {#fork-the-repo}"
    locally = [h for h in d.headings if h.text == "Working locally"]
    assert [h.anchor for h in locally] == ["fork-the-repo"]
    j = real("jekyll/docs/_docs/history.md")  # "## 4.4.1 / 2025-01-29" then "{: #v4-4-1}"
    assert [(h.text, h.anchor) for h in j.headings[:1]] == [("4.4.1 / 2025-01-29", "v4-4-1")]
    p = parse_markdown("# Next steps: 2\n\n## A b\n\n## A b\n\n## Café & ü\n")
    assert [h.anchor for h in p.headings] == ["next-steps-2", "a-b", "a-b-1", "café--ü"]


def test_no_tag_is_offered_where_none_would_be_read():
    from autodoc.lsp.server import _tag_context

    assert parse_markdown("## Next steps {#next-steps\n").tags == []  # an id being written
    assert _tag_context("## Next steps {#next") is None
    assert _tag_context("see [fork](#fork-the") is None
    assert _tag_context("filed under #sto") == "sto"


@pytest.mark.parametrize("line", ["{{ x\n", "<!-- x\n", "{% x\n"])
def test_unclosed_markup_in_a_long_paragraph_stays_linear(line):
    """A template or comment left open, 60,000 times in one paragraph: the first reading of markup
    for tags ran each to the end of the block (minutes); now one pass. No timing: pytest's
    timeout is the bound."""
    d = parse_markdown(line * 60_000 + "#tag\n")
    assert d.tags == ["tag"]


def test_indented_code_blocks_hold_no_tags_or_links_but_list_items_do():
    d = real("swift-evolution/proposals/0022-objc-selectors.md")  # "    control.sendAction(#selector(…"
    assert "selector" not in d.tags
    p = parse_markdown(
        "Text:\n\n    #if DEBUG [x](code.md)\n\n    #endif\n\n"
        "1. Step one\n\n    See [the guide](guide.md) #ops\n\n\tmore #tabbed\n\nBack at the margin.\n\n    #code2\n"
    )
    assert [l.target for l in p.links] == ["guide.md"]
    assert p.tags == ["ops", "tabbed"]
