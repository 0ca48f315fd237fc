"""The CLI's people-facing search status line (cliout.py) says what the JSON's `semantic` and
`semantic_tier` say: partial, the instant tier, off and why (issue 38)."""

from __future__ import annotations

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
