"""The CLI's people-facing search status line (cliout.py) says what the JSON's `semantic` and
`semantic_tier` say: partial, the instant tier, off and why (issue 38)."""

from __future__ import annotations

from autodoc import cliout
from autodoc.cliout import print_hits, semantic_state, status_line


def answer(semantic, tier=None, why=None):
    skipped = {"semantic": why} if why else {}
    return {
        "workspace": "kb",
        "mode_used": "hybrid" if semantic != "off" else "lexical",
        "semantic": semantic,
        "semantic_tier": tier,
        "stages": {"performed": ["lexical", "semantic"], "skipped": skipped},
        "answerable": True,
        "hits": [],
    }


def test_each_semantic_state_in_words():
    assert semantic_state(answer("ready", "full")) == "semantic ready"
    assert "partial" in semantic_state(answer("partial", "full")) and "may improve" in semantic_state(
        answer("partial", "full")
    )
    assert "instant tier" in semantic_state(answer("partial", "instant"))
    assert "instant tier" in semantic_state(answer("ready", "instant"))
    assert semantic_state(answer("off", why="no embedding model")) == "semantic off: no embedding model"
    assert semantic_state(answer("failed", why="model did not load")) == "semantic failed: model did not load"


def test_the_status_line_comes_first_on_stdout(capsys):
    a = answer("partial", "instant")
    print_hits([a], [])
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == status_line(a, 0) and out.splitlines()[0].startswith("kb: 0 hits; mode hybrid")
    assert "instant tier" in out.splitlines()[0] and err == ""


def test_status_and_index_say_what_the_markdown_option_left_out_and_how_to_take_it_in():
    left = {
        "files": 2,
        "by_extension": {".md.erb": 2},
        "hidden_files": 1,
        "hidden_folders": 1,
        "examples": [".github/", "notes/.draft.md", "source/a.html.md.erb", "source/b.html.md.erb"],
        "setting": "markdown",
    }
    lines = cliout.left_out_lines("kb", left, [".md", ".markdown"])
    assert lines[0] == (
        "  left out: 2 files that look like Markdown (2 .md.erb); 1 hidden file (notes/.draft.md); "
        "1 hidden folder (.github/)"
    )
    # the whole list to give: the entries in effect, then the new ones (a list replaces the one in effect)
    assert lines[1] == (
        "    to index them too: autodoc workspace configure kb "
        """'{"markdown": [".md", ".markdown", "*.md.erb", ".*.md", ".github/**/*.md"]}'"""
    )
    none = {**left, "files": 0, "by_extension": {}, "hidden_files": 0, "hidden_folders": 0}
    assert cliout.left_out_lines("kb", none, [".md"]) == []
