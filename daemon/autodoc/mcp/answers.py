"""How answers read to a model: a search's passages as a model reads them (each path said once,
in its ref) within one token budget, the compact answers of several workspaces merged, refs,
numbered lines, a document's heading outline.

Runs on: the event loop (pure).
"""

from __future__ import annotations

import math
from typing import Any

from ..budget import answer_tokens, cut, fit_budget
from ..refs import ref as ref  # the one ref format; mcp/ calls it as answers.ref


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


def passage(h: dict[str, Any]) -> dict[str, Any]:
    """A compact hit (search.query `answer: compact`) as the search tool shows it: its `ref` says the
    workspace, path and lines once; the title, the section under it, the text and the confidence;
    `superseded_by`, `changed` and a session's `origin` only where they say something."""
    out = {
        "ref": h["ref"],
        "title": h["title"],
        "section": h["section"],
        "text": h["text"],
        "confidence": h["confidence"],
    }
    if h.get("superseded_by"):
        out["superseded_by"] = h["superseded_by"]
    if h.get("changed"):
        out["changed"] = True
    origin = h.get("origin") or {}
    if origin.get("kind") not in (None, "file"):
        out["origin"] = origin
    return out


def fit(answer: dict[str, Any], hits: list[dict[str, Any]], budget: int, query: str = "") -> dict[str, Any]:
    """The search tool's answer: `answer` (its fields but the hits, notes included, in the order
    shown) given the passages in order, cut as search.query cuts its own (budget.py fit_budget: the
    first passage always, cut to fit; later ones cut at a line end, dropped only when not even their
    first lines fit) so that what the model reads (search_text) takes at most `budget` tokens.
    `tokens` counts that text; `truncated` says that something was cut or dropped. A passage cut
    keeps the run of its lines that holds most of the query's words (line_weights), its first
    lines when they hold as much."""
    entries = [passage(h) for h in hits]
    # fit_budget counts the JSON, which costs more than the text (keys, escaped newlines): the
    # JSON allowance grows until the text fills the budget (a few rounds; each is pure and quick)
    allowance, best = budget, None
    for _ in range(FIT_ROUNDS):
        got = fit_budget({**answer, "hits": []}, entries, allowance, query)
        used = text_tokens(search_text(got))
        if used <= budget:
            best = got
            if not got["truncated"] or budget - used <= FIT_SLACK:
                break
            allowance += budget - used
        else:
            allowance -= used - budget + FIT_SLACK
    if best is None:  # never seen: the text is shorter than its JSON
        best = fit_budget({**answer, "hits": []}, entries, budget, query)
    best["tokens"] = text_tokens(search_text(best))
    return best


NO_RANKER = "no ranker is configured for this workspace"  # search/rerank.py NO_RANKER_REASON
FIT_ROUNDS = 6
FIT_SLACK = 12  # tokens of the budget a fitted answer may leave unused


def text_tokens(text: str) -> int:
    """What a text costs its reader, counted as answers are (characters / 4)."""
    return math.ceil(len(text) / 4)


def search_text(answer: dict[str, Any]) -> str:
    """The search answer as the model reads it: one line of what the answer is, then each passage
    under a line with its ref, where it sits and its confidence, the text as it is in the file (not
    a JSON string: no escaped newlines and quotes), so that most of what it reads is passages. Each
    path is said once: a later passage of a document already shown names its lines and the passage
    that gave its path (the structured hits keep each full ref); a change every passage's file
    shares is said once, in the first line."""
    hits = answer["hits"]
    all_changed = len(hits) > 1 and all(h.get("changed") for h in hits)
    head = [
        f"answerable: {'yes' if answer['answerable'] else 'no'} · {len(hits)} passage{'' if len(hits) == 1 else 's'}"
        + (" · truncated: passages cut to fit budget_tokens" if answer["truncated"] else "")
        + (f" · {ALL_CHANGED}" if all_changed else "")
    ]
    for ws, st in answer["stages"].items():
        # a ranker that is not configured is the usual case, not news: said in `stages`, not here
        skipped = {k: v for k, v in (st.get("skipped") or {}).items() if not (k == "rerank" and v == NO_RANKER)}
        if skipped or not st["performed"]:
            why = "".join(f"; {k} skipped: {v}" for k, v in skipped.items())
            head.append(f"{ws}: {'+'.join(st['performed']) or 'no stage ran'}{why}")
    head += [f"note: {n}" for n in answer.get("notes", [])]
    blocks = ["\n".join(head)]
    said: dict[str, int] = {}  # each document's `workspace:path`: the passage that said it
    for i, h in enumerate(hits, 1):
        base, mark, lines = h["ref"].rpartition("#L")
        cite = h["ref"]
        if mark and base in said:
            cite = f"same document as [{said[base]}], #L{lines}"
        elif mark:
            said[base] = i
        where = h["section"] or h["title"]  # the ref's path names the document; the title is in `hits`
        extra = "".join(f" · {k} {h[k]}" for k in ("superseded_by",) if h.get(k)) + (
            " · changed on disk since indexed" if h.get("changed") and not all_changed else ""
        )
        conf = "" if h["confidence"] is None else f" · confidence {h['confidence']:.2f}"
        origin = h.get("origin")
        if origin:
            extra += f" · session {origin.get('session_id')} event {origin.get('event_id')}"
        blocks.append(f"[{i}] {cite} · {where}{conf}{extra}\n{h['text']}")
    return "\n\n".join(blocks)


ALL_CHANGED = "every passage's file changed on disk since indexed"


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
