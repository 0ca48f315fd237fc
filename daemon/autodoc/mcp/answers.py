"""How answers read to a model: compact hits within a token budget, hits of
several workspaces merged, numbered lines, a document's heading outline.

Two stopgaps live here until the daemon answers them itself: `compact_from_full`
(until search.query's `answer: "compact"`, branch compact) and `outline_from_text`
(until document.outline, branch agentrpc). tools.py uses the daemon's answer
whenever the daemon has it.

Runs on: the event loop (pure).
"""

from __future__ import annotations

import re
from typing import Any

from ..ingest.tokens import estimate_tokens

ANSWERABLE_MIN = 0.8  # stopgap: the measure (answers 0.89–1.0, non-answers 0.56–0.77)
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


def ref(workspace: str, path: str, a: int | None = None, b: int | None = None) -> str:
    base = f"{workspace}:{path}"
    if a is None:
        return base
    return f"{base}#L{a}" if b in (None, a) else f"{base}#L{a}-{b}"


def compact_from_full(answer: dict[str, Any], passages: dict[int, str], per_document: int) -> list[dict[str, Any]]:
    """Stopgap (until search.query answers compact): a full answer's hits as compact ones,
    at most `per_document` per document; `passages` maps a hit's index to its whole text."""
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, h in enumerate(answer["hits"]):
        if seen.get(h["path"], 0) >= per_document:
            continue
        seen[h["path"]] = seen.get(h["path"], 0) + 1
        out.append({
            "ref": ref(h["workspace"], h["path"], h["line_start"], h["line_end"]),
            "workspace": h["workspace"], "path": h["path"], "title": h["title"], "section": h["breadcrumb"],
            "line_start": h["line_start"], "line_end": h["line_end"],
            "text": passages.get(i, h.get("snippet", "")),
            "confidence": None if h.get("relevance") is None else round(h["relevance"], 3),
            "superseded_by": h.get("superseded_by"), "changed": None,
            "origin": {"kind": "file", "path": h["path"]},
        })
    return out


def hit_indexes(answer: dict[str, Any], per_document: int) -> list[int]:
    """Which hits of a full answer compact_from_full keeps (their passages are read)."""
    seen: dict[str, int] = {}
    keep = []
    for i, h in enumerate(answer["hits"]):
        if seen.get(h["path"], 0) < per_document:
            seen[h["path"]] = seen.get(h["path"], 0) + 1
            keep.append(i)
    return keep


def within_budget(hits: list[dict[str, Any]], limit: int, budget: int) -> tuple[list[dict[str, Any]], bool, int]:
    """The best `limit` hits whose texts fit in `budget` tokens (the last one cut to fit):
    (hits, truncated, tokens)."""
    ordered = sorted(hits, key=lambda h: -(h.get("confidence") or 0.0))
    out, used, truncated = [], 0, len(ordered) > limit
    for h in ordered[:limit]:
        cost = estimate_tokens(h.get("text") or "")
        if used + cost > budget:
            room = budget - used
            if room < 40 and out:
                truncated = True
                break
            h = {**h, "text": _cut(h.get("text") or "", max(room, 40)), "text_truncated": True}
            cost = estimate_tokens(h["text"])
            truncated = True
            out.append(h)
            used += cost
            break
        out.append(h)
        used += cost
    return out, truncated, used


def _cut(text: str, tokens: int) -> str:
    """The start of `text` that fits in about `tokens`, ended at a line or word boundary."""
    lo, hi = 0, len(text)
    while lo < hi:  # the longest prefix within the estimate
        mid = (lo + hi + 1) // 2
        if estimate_tokens(text[:mid]) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    piece = text[:lo]
    cut = max(piece.rfind("\n"), piece.rfind(" "))
    return (piece[:cut] if cut > len(piece) // 2 else piece).rstrip() + " …"


def numbered(text: str, first: int) -> str:
    """Lines prefixed with their 1-based numbers, right-aligned."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    width = len(str(first + len(lines) - 1))
    return "\n".join(f"{first + i:>{width}}\u2502{line}" for i, line in enumerate(lines))


def outline_from_text(text: str) -> list[dict[str, Any]]:
    """Stopgap (until document.outline): ATX headings outside frontmatter and code fences
    as a tree of {level, title, line_start, line_end, tokens, children}."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    flat: list[dict[str, Any]] = []
    fence: str | None = None
    start = 0
    if lines and lines[0].strip() == "---":  # frontmatter: up to the closing ---
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                start = i + 1
                break
    for i in range(start, len(lines)):
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)[0] * 3
            fence = None if fence and mark == fence else (fence or mark)
            continue
        if fence is None and (h := _HEADING.match(line)):
            flat.append({"level": len(h.group(1)), "title": h.group(2), "line_start": i + 1})
    for j, node in enumerate(flat):
        end = len(lines)
        for later in flat[j + 1:]:
            if later["level"] <= node["level"]:
                end = later["line_start"] - 1
                break
        node["line_end"] = max(node["line_start"], end)
        node["tokens"] = estimate_tokens("\n".join(lines[node["line_start"] - 1:node["line_end"]]))
        node["children"] = []
    roots: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    for node in flat:
        while stack and stack[-1]["level"] >= node["level"]:
            stack.pop()
        (stack[-1]["children"] if stack else roots).append(node)
        stack.append(node)
    return roots


def flatten_outline(tree: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for node in tree:
        out.append(node)
        out.extend(flatten_outline(node.get("children") or []))
    return out


def outline_text(tree: list[dict[str, Any]], depth: int = 0) -> str:
    """The tree as indented lines a model reads at a glance: `## Title  L10-25 (120 tokens)`."""
    rows = []
    for node in tree:
        rows.append(f"{'  ' * depth}{'#' * node['level']} {node['title']}  "
                    f"L{node['line_start']}-{node['line_end']} ({node['tokens']} tokens)")
        if node.get("children"):
            rows.append(outline_text(node["children"], depth + 1))
    return "\n".join(rows)
