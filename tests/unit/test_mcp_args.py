"""How the MCP tools read what a model sends (pure: no server): refs, line ranges,
nested and aliased arguments, out-of-range numbers, and the merge of several
workspaces' compact answers within one budget."""

from __future__ import annotations

import pytest

from autodoc.mcp import answers
from autodoc.mcp.args import Args, Ref, parse_ref
from autodoc.mcp.backend import ToolError
from autodoc.mcp.specs import KNOWN_ARGS, TOOLS


@pytest.mark.parametrize(
    "text, ws, path, lines",
    [
        ("kb:adrs/0012-lease-recovery.md#L10-15", "kb", "adrs/0012-lease-recovery.md", (10, 15)),
        ("kb:adrs/0012-lease-recovery.md#L7", "kb", "adrs/0012-lease-recovery.md", (7, 7)),
        ("adrs/0012-lease-recovery.md#L10-L15", None, "adrs/0012-lease-recovery.md", (10, 15)),
        ("adrs/0012-lease-recovery.md:10-15", None, "adrs/0012-lease-recovery.md", (10, 15)),
        ("kb:index.md", "kb", "index.md", None),
        ("index.md", None, "index.md", None),
        ("autodoc://kb/notes/a b.md", "kb", "notes/a b.md", None),
    ],
)
def test_refs_as_search_answers_and_people_write_them(text, ws, path, lines):
    r = parse_ref(text)
    assert (r.workspace, r.path, r.lines) == (ws, path, lines)


def test_options_nested_as_in_the_rpc_and_names_of_other_tools_are_taken_as_meant():
    a = Args(
        {"q": "lease", "opts": {"limit": "7", "tags": "sqlite,storage"}, "workspce": "kb", "junk": 1},
        KNOWN_ARGS["search"],
    )
    assert a.str("query") == "lease" and a.int("limit", 5, 1, 50) == 7 and a.str("workspace") == "kb"
    assert a.strings("tags") == ["sqlite", "storage"]
    assert any("'opts'" in n for n in a.notes) and any("ignored 'junk'" in n for n in a.notes)
    assert "read 'q' as 'query'" in a.notes and "read 'workspce' as 'workspace'" in a.notes
    # the top-level name wins over the nested one
    assert Args({"limit": 3, "opts": {"limit": 9}}, KNOWN_ARGS["search"]).int("limit", 5, 1, 50) == 3
    # a path is a ref for read and a list of paths for reindex
    assert Args({"path": "x.md"}, KNOWN_ARGS["read"]).str("ref") == "x.md"
    assert Args({"path": "x.md"}, KNOWN_ARGS["reindex"]).strings("paths") == ["x.md"]


def test_numbers_out_of_range_are_clamped_with_a_note_and_nonsense_says_what_to_send():
    a = Args({"limit": 500, "budget_tokens": 10}, KNOWN_ARGS["search"])
    assert a.int("limit", 5, 1, 50) == 50 and a.int("budget_tokens", 2000, 300, 32000) == 300
    assert len(a.notes) == 2 and "limit 500 is outside 1..50: used 50" in a.notes
    with pytest.raises(ToolError, match="limit must be a whole number from 1 to 50"):
        Args({"limit": "five"}, KNOWN_ARGS["search"]).int("limit", 5, 1, 50)
    with pytest.raises(ToolError, match="query is required"):
        Args({}, KNOWN_ARGS["search"]).str("query", required=True)
    with pytest.raises(ToolError, match="send the arguments as an object"):
        Args(["lease"], KNOWN_ARGS["search"])


@pytest.mark.parametrize(
    "given, span",
    [
        ("10-25", (10, 25)),
        ("10:25", (10, 25)),
        ("L10-L25", (10, 25)),
        ("12", (12, 12)),
        (12, (12, 12)),
        ([3, 9], (3, 9)),
        ({"start": 4, "end": 6}, (4, 6)),
        ("25-10", (10, 25)),
        ("0-3", (1, 3)),
    ],
)
def test_line_ranges(given, span):
    assert Args({"lines": given}, KNOWN_ARGS["read"]).lines() == span


def test_a_line_range_that_is_not_one_says_the_form():
    with pytest.raises(ToolError, match='"10-25"'):
        Args({"lines": "the middle"}, KNOWN_ARGS["read"]).lines()


def test_workspaces_merge_by_confidence_within_the_budget():
    def hit(ws, path, c, text="x" * 400):
        return {"ref": f"{ws}:{path}#L1-2", "workspace": ws, "path": path, "confidence": c, "text": text}

    one = {"hits": [hit("a", "1.md", 0.9), hit("a", "2.md", 0.2)], "truncated": False}
    two = {"hits": [hit("b", "3.md", 0.5)], "truncated": False}
    hits, truncated, tokens = answers.merge([one, two], limit=5, budget=10_000)
    assert [h["path"] for h in hits] == ["1.md", "3.md", "2.md"] and not truncated
    assert tokens == answers.tokens(hits)
    hits, truncated, tokens = answers.merge([one, two], limit=5, budget=250)
    assert [h["path"] for h in hits] == ["1.md", "3.md"] and truncated and tokens <= 250
    hits, truncated, _ = answers.merge([one, two], limit=1, budget=10_000)
    assert [h["path"] for h in hits] == ["1.md"] and truncated


def test_numbered_lines_and_the_outline_text():
    assert answers.numbered("a\nb\n", 9) == " 9\u2502a\n10\u2502b"
    tree = [
        {
            "level": 1,
            "title": "T",
            "line_start": 1,
            "line_end": 9,
            "tokens": 50,
            "children": [{"level": 2, "title": "S", "line_start": 3, "line_end": 9, "tokens": 20, "children": []}],
        }
    ]
    assert answers.outline_text(tree) == "# T  L1-9 (50 tokens)\n  ## S  L3-9 (20 tokens)"
    assert [n["title"] for n in answers.flatten_outline(tree)] == ["T", "S"]


def test_every_tool_describes_every_param_for_a_model():
    for tool in TOOLS:
        assert len(tool["description"]) > 60
        for name, schema in tool["inputSchema"]["properties"].items():
            assert schema.get("description"), f"{tool['name']}.{name} has no description"


def test_a_session_ref_with_a_colon_in_its_id_is_a_path_not_a_line():
    assert parse_ref("kb:.session/2026-12-01T10:30") == Ref("kb", ".session/2026-12-01T10:30", None)
    assert parse_ref("kb:.session/2026-12-01T10:30#L4-9") == Ref("kb", ".session/2026-12-01T10:30", (4, 9))
    assert parse_ref("kb:notes/a.md:7") == Ref("kb", "notes/a.md", (7, 7))
