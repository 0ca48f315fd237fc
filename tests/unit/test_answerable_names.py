"""Which words of a query answerable.py reads as names (the answerable names rule, issue 35)."""

from __future__ import annotations

import pytest

from autodoc.search.answerable import name_words


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("How do I rotate the MongoDB Atlas API keys?", ["MongoDB", "Atlas"]),  # API: a short acronym
        ("Can Foam import my Evernote export file?", ["Foam", "Evernote"]),
        ("Which proposal lets Swift call COBOL code directly?", ["Swift", "COBOL"]),
        ("How do I add OAuth login with GitHub accounts?", ["OAuth", "GitHub"]),
        # a sentence's first word is capitalised anyway; the next sentence's too
        ("Kubernetes operator. Which pod gets it?", []),
        ("Our app is written in Delphi. Is there an SDK?", ["Delphi"]),
        # Title Case says nothing; a capital inside a word still does
        ("Jetpack Compose Android UI Swift", []),
        ("Visual Basic ClamAV Scanner", ["ClamAV"]),
        # gene symbols and short acronyms are not names (SciFact's claims spell them as their abstracts do not)
        ("Ethanol stress increases the expression of PSP in bacteria.", []),
        ("HOXB4 facilitates HSC expansion when co-cultured with HSCs.", ["HSCs"]),
        ("lease recovery after a crash", []),
        ("status:accepted Redis cache", []),  # a facet is not a word of the question
        ("withCheckedThrowingContinuation", ["withCheckedThrowingContinuation"]),
        ("Is it in Java's standard library?", ["Java"]),
    ],
)
def test_name_words(query, names):
    assert name_words(query) == names


def test_mcp_states_the_servers_floor():
    """MCP has no floor of its own (issue 35): its min_confidence default is the server's."""
    from autodoc.mcp.specs import TOOLS
    from autodoc.search.answerable import FLOOR

    search = next(t for t in TOOLS if t["name"] == "search")
    assert search["inputSchema"]["properties"]["min_confidence"]["default"] == FLOOR
