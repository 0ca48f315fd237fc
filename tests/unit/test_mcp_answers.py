"""Issue 35: the search tool's answer is mostly passage text, within its budget, never empty
when something was found, and `truncated` only when something was cut (mcp/answers.py, budget.py)."""

from __future__ import annotations

import pytest

from autodoc.budget import ELLIPSIS, MIN_PASSAGE_TOKENS, answer_tokens, cut, fit_budget, line_weights, query_words
from autodoc.mcp import answers


def _hit(i: int, lines: int = 40, path: str | None = None) -> dict:
    """A compact hit as search.query gives it (search/compact.py compact_hit)."""
    path = path or f"docs/section-{i}.md"
    text = "\n".join(f"Line {n} of passage {i} says something worth reading about leases." for n in range(lines))
    return {
        "ref": f"kb:{path}#L10-{9 + lines}",
        "workspace": "kb",
        "path": path,
        "title": f"Document {i}",
        "section": "Decision › Details",
        "line_start": 10,
        "line_end": 9 + lines,
        "text": text,
        "confidence": round(0.9 - i / 10, 2),
        "superseded_by": None,
        "changed": False,
        "origin": {"kind": "file", "path": path, "title": f"Document {i}"},
    }


def _envelope() -> dict:
    return {
        "query": "lease",
        "workspaces": ["kb"],
        "answerable": True,
        "truncated": False,
        "tokens": 0,
        "hits": [],
        "stages": {"kb": {"performed": ["lexical", "semantic"], "skipped": {"rerank": answers.NO_RANKER}}},
    }


def test_each_path_once_and_no_field_the_ref_already_says():
    h = answers.passage(_hit(1))
    assert set(h) == {"ref", "title", "section", "text", "confidence"}
    session = {**_hit(2), "origin": {"kind": "session", "session_id": "s1", "event_id": 4}, "changed": True}
    assert answers.passage(session)["origin"]["session_id"] == "s1" and answers.passage(session)["changed"] is True


def test_the_answer_is_within_the_budget_and_mostly_passages():
    for budget in (300, 800, 2000):
        out = answers.fit(_envelope(), [_hit(i) for i in range(5)], budget)
        text = answers.search_text(out)
        assert out["tokens"] == answers.text_tokens(text) <= budget
        assert budget - out["tokens"] <= answers.FIT_SLACK + 4  # the budget used, not left over
        assert out["truncated"] is True and out["hits"]
        share = sum(len(h["text"]) for h in out["hits"]) / len(text)
        assert share >= (0.8 if budget >= 800 else 0.6), (budget, share)
        assert text.count("kb:docs/section-1.md") == 1  # each path said once
        assert "no ranker" not in text  # the usual case is said in `stages`, not read by the model each time


def test_the_smallest_budget_still_answers_with_the_top_passage_cut_at_a_line_end():
    """At 300 the answer was `hits: []`, answerable, "nothing relevant found"."""
    out = answers.fit(_envelope(), [_hit(i) for i in range(5)], 300)
    top = out["hits"][0]
    assert top["ref"].startswith("kb:docs/section-0.md#L10-") and top["text"].startswith("Line 0 of passage 0")
    assert top["text"].endswith("leases.")  # whole lines
    last = int(top["ref"].rsplit("-", 1)[1])
    assert last == 10 + top["text"].count("\n")  # the ref follows the cut


def test_truncated_only_when_something_was_cut():
    whole = answers.fit(_envelope(), [_hit(i, lines=3) for i in range(3)], 2000)
    assert whole["truncated"] is False and len(whole["hits"]) == 3
    assert [h["text"] for h in whole["hits"]] == [_hit(i, lines=3)["text"] for i in range(3)]


def test_fit_budget_keeps_the_first_passage_however_small_the_budget():
    entry = answers.passage(_hit(0))
    answer = {
        "answer": "compact",
        "stages": {"requested": ["lexical"] * 30},
        "truncated": False,
        "tokens": 0,
        "hits": [],
    }
    room = answer_tokens({**answer, "tokens": 9999}) + answer_tokens({**entry, "text": ""}) + MIN_PASSAGE_TOKENS // 2
    got = fit_budget(answer, [entry, answers.passage(_hit(1))], room)
    assert len(got["hits"]) == 1 and got["truncated"] is True and got["tokens"] <= room
    assert got["hits"][0]["text"].startswith("Line 0")


def test_the_usual_no_ranker_reason_is_the_one_search_gives():
    from autodoc.search.rerank import NO_RANKER_REASON

    assert answers.NO_RANKER == NO_RANKER_REASON


def test_a_cut_passage_keeps_the_lines_that_hold_the_query():
    """A passage whose answer is in its last lines lost it to a cut that kept the first ones
    (an ADR's Security Implications, the replication role's SELECT grant at its end)."""
    lines = ["## Security Implications", ""] + [
        f"Filler line {n} about networks and peering in general." for n in range(30)
    ]
    lines += ["The replication role needs only SELECT on the source Oracle tables."]
    h = {**_hit(0), "text": "\n".join(lines), "ref": f"kb:adr.md#L10-{9 + len(lines)}"}
    out = answers.fit(_envelope(), [h], 300, query="Which Oracle permissions does the replication role need?")
    kept = out["hits"][0]
    assert kept["text"].endswith("SELECT on the source Oracle tables.") and out["truncated"] is True
    first, last = (int(x) for x in kept["ref"].rsplit("#L", 1)[1].split("-"))
    assert last == 9 + len(lines) and last - first == kept["text"].count("\n")  # the ref says the lines kept
    # a query the first lines answer as well keeps them, heading included
    head = answers.fit(_envelope(), [h], 300, query="security implications of peering")
    assert head["hits"][0]["text"].startswith("## Security Implications")
    # without a query: the first lines, as before
    assert answers.fit(_envelope(), [h], 300)["hits"][0]["text"].startswith("## Security Implications")


def test_query_words_and_line_weights():
    words = query_words("What permissions does the replication service need on the Oracle DB?")
    assert words == {"permi", "repli", "servi", "oracl"}
    [weights] = line_weights(["Grant SELECT permission\nto the Oracle replication role"], words)
    assert 0 < weights[0] < weights[1]  # one word of the query, then two as rare


def test_a_cut_keeps_the_line_with_the_rare_word_over_lines_of_the_topics_words():
    """A question's topic words on every line of a passage (the collector, its configuration)
    outweighed, counted alike, the one line holding the word it turns on: otel-10 ("a literal
    dollar sign in the collector's config") was cut to the passage's opening lines at 300 tokens."""
    lines = ["## Environment variables", ""] + [
        f"Write the collector configuration with environment variable number {n} set." for n in range(24)
    ]
    lines += ["Use `$$` to indicate a literal `$`."]
    lines += [f"Then restart, step {n}." for n in range(3)]
    h = {**_hit(0), "text": "\n".join(lines), "ref": f"kb:config.md#L1-{len(lines)}"}
    out = answers.fit(_envelope(), [h], 300, query="How do I write a literal dollar sign in the collector config?")
    kept = out["hits"][0]["text"]
    assert "a literal `$`" in kept and out["truncated"] is True
    assert "number 0 " not in kept  # not the opening lines: the run around the rare word


@pytest.mark.timeout(10)
def test_a_first_passage_cut_to_a_few_characters_ends():
    """The cut shrank its limit by 9/10 until the text fit: at 9 characters or fewer 9/10 rounds back
    to as many, and a first passage left one or two tokens of room (its fields' JSON a multiple of 4
    characters long) looped for good, a reader thread at full CPU (a reviewer's fuzz of cut())."""
    text = 'Grant "SELECT" on the schema\nto the replication role\nand restart'
    for title in ("A", "AA", "AAA", "AAAA"):
        e = {**_hit(0), "title": title, "text": text, "ref": "kb:a.md#L1-3"}
        room = answer_tokens({**e, "text": ""}) + 1  # the fields, and one token of text
        part = cut(e, room, 1)
        assert part is None or (answer_tokens(part) <= room and part["text"].rstrip(ELLIPSIS) in text)
