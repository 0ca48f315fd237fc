"""How answers read to a model: the compact answers of several workspaces merged
within one token budget, refs, numbered lines, a document's heading outline.

Runs on: the event loop (pure).
"""

from __future__ import annotations

from typing import Any

from ..budget import answer_tokens, cut


def ref(workspace: str, path: str, a: int | None = None, b: int | None = None) -> str:
    base = f"{workspace}:{path}"
    if a is None:
        return base
    return f"{base}#L{a}" if b in (None, a) else f"{base}#L{a}-{b}"


def merge(answers: list[dict[str, Any]], limit: int, budget: int) -> tuple[list[dict[str, Any]], bool, int]:
    """Compact answers of several workspaces as one: the most confident `limit` hits whose
    JSON fits in `budget` tokens, counted as search.query counts them (UTF-8 bytes of the
    compact JSON / 4), the last one cut to fit: (hits, truncated, tokens)."""
    hits = sorted((h for a in answers for h in a["hits"]), key=lambda h: -(h.get("confidence") or 0.0))
    truncated = len(hits) > limit or any(a.get("truncated") for a in answers)
    out: list[dict[str, Any]] = []
    for h in hits[:limit]:
        if tokens(out + [h]) > budget:
            # the passage cut to what is left, as a workspace's own answer cuts its last one
            part = cut(h, budget - tokens(out) - 1)
            if part is not None and tokens(out + [part]) <= budget:
                out.append(part)
            truncated = True
            break
        out.append(h)
    return out, truncated, tokens(out)


def tokens(obj: Any) -> int:
    """Counted as search.query counts its own answers (characters / 4), so budgets agree."""
    return answer_tokens(obj)


def numbered(text: str, first: int) -> str:
    """Lines prefixed with their 1-based numbers, right-aligned."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    width = len(str(first + len(lines) - 1))
    return "\n".join(f"{first + i:>{width}}\u2502{line}" for i, line in enumerate(lines))


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
        rows.append(
            f"{'  ' * depth}{'#' * node['level']} {node['title']}  "
            f"L{node['line_start']}-{node['line_end']} ({node['tokens']} tokens)"
        )
        if node.get("children"):
            rows.append(outline_text(node["children"], depth + 1))
    return "\n".join(rows)
