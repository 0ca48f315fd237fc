"""An answer's token budget (pure): what an answer costs its reader, the
citable ref of a passage, and how passages are cut to fit a budget.

Apart from search/ so that an adapter that shapes answers of its own (the MCP
server) reads the same rules without loading the store (search/compact.py
uses them for search.query's compact answers).

Runs on: the caller's thread; no I/O.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections import Counter
from typing import Any

from . import refs

ELLIPSIS = "…"  # where a passage begins or ends inside a line
MIN_PASSAGE_TOKENS = 40  # what a cut passage keeps at least: its heading and first lines, enough to judge it
# A passage less confident than this share of the first is fitted after the others when not all fit
# whole (fit_budget). bench/answers.py --split tune: 0.2 kept answer-in-passage at 800 (0.90) and
# gave back at 300 what the first passage's opening lines lost; 0.35 and up lost answers at 800
WEAK_SHARE = 0.2


def answer_tokens(obj: Any) -> int:
    """The tokens an answer costs its reader (an LLM), not an embedding model's (ingest/tokens.py
    wordpiece_tokens) nor an embedding server's (embed/http.py remote_model_tokens).
    Characters / 4 of the JSON as the server writes it: close to what an LLM tokenizer counts
    for English prose and code, and the same for every client, whatever model reads it."""
    return math.ceil(len(json.dumps(obj, ensure_ascii=False, separators=(",", ":"))) / 4)


def cut(
    entry: dict[str, Any], room: int, least: int = MIN_PASSAGE_TOKENS, weights: list[float] | None = None
) -> dict[str, Any] | None:
    """The entry with its passage cut to fit `room` tokens: at a line end when one keeps at
    least half of what fits, else inside the line at a word, and then it ends with ELLIPSIS
    (its last line is partial). The ref (and line_end, when the entry has it) follow the cut.
    None when not even `least` tokens of text would fit. `weights` (one a line of the text: how
    much of the query it holds) moves the cut to the run of whole lines that holds most of it,
    when the first lines hold less (the answer at a passage's end was cut away)."""
    first_lines = _cut_head(entry, room, least)
    if first_lines is None or not weights or ELLIPSIS in (entry["text"][:1], entry["text"][-1:]):
        return first_lines
    return _cut_window(entry, room, weights, first_lines) or first_lines


def _cut_window(entry: dict[str, Any], room: int, weights: list[float], head: dict[str, Any]) -> dict[str, Any] | None:
    """The run of whole lines, no longer than the first-lines cut, that holds the most weight,
    when it holds more than those first lines do (the earliest such run); None otherwise."""
    lines = entry["text"].split("\n")
    if len(weights) != len(lines):
        return None
    size = len(head["text"].removesuffix(ELLIPSIS))
    kept = head["text"].count("\n") + 1
    best, best_at, a, width, got = sum(weights[:kept]), None, 0, 0, 0.0
    for b, line in enumerate(lines):  # two pointers over the lines, a window of at most `size` characters
        width += len(line) + (1 if b > a else 0)
        got += weights[b]
        while width > size and a < b:
            width -= len(lines[a]) + 1
            got -= weights[a]
            a += 1
        if width <= size and got > best + 1e-9:  # the sums drift: an equal run is not more
            best, best_at = got, (a, b)
    if best_at is None:
        return None
    a, b = best_at
    while b > a and not lines[b].strip():
        b -= 1
    base, first = cited_lines(entry["ref"])
    out = {**entry, "text": "\n".join(lines[a : b + 1]), "ref": _span(base, first + a, first + b)}
    if "line_start" in entry:
        out["line_start"], out["line_end"] = first + a, first + b
    return out if answer_tokens(out) <= room else None


def _cut_head(entry: dict[str, Any], room: int, least: int) -> dict[str, Any] | None:
    """cut() to the passage's first lines."""
    chars = (room - answer_tokens({**entry, "text": ""})) * 4
    if chars < max(1, least) * 4:
        return None
    text, limit = entry["text"].removesuffix(ELLIPSIS), chars
    while True:  # JSON escapes (quotes, newlines, backslashes) can make the text longer than its characters
        part = text[:limit]
        if len(part) >= len(text):
            part = entry["text"]  # with the ellipsis it had, if it had one
        else:
            end = part.rfind("\n")
            if end >= len(part) // 2:
                part = part[:end]
            else:
                sp = part.rfind(" ")
                part = (part[:sp] if sp > len(part) // 2 else part).rstrip() + ELLIPSIS
        part = part.rstrip()
        if not part or answer_tokens({**entry, "text": part}) <= room:
            break
        limit = min(limit - 1, len(part) * 9 // 10)  # strictly shorter: 9/10 of a few characters is as many
    if not part or part == ELLIPSIS:
        return None
    base, first = cited_lines(entry["ref"])
    line_end = first + part.count("\n")
    out = {**entry, "text": part, "ref": _span(base, first, line_end)}
    if "line_end" in entry:
        out["line_end"] = line_end
    return out


def _span(base: str, line_start: int, line_end: int) -> str:
    """`workspace:path` and lines as the one ref format (refs.py: `#L5` for one line)."""
    workspace, _, path = base.partition(":")
    return refs.ref(workspace, path, line_start, line_end)


def cited_lines(cited: str) -> tuple[str, int]:
    """A ref's `workspace:path` and first line: `kb:a.md#L10-25` → ("kb:a.md", 10)."""
    base, _, lines = cited.rpartition("#L")
    return base, int(lines.split("-")[0])


def _least(entry: dict[str, Any]) -> int:
    """The tokens an entry takes at least, its cited first lines (or all of it when shorter)."""
    return min(answer_tokens({**entry, "text": ""}) + MIN_PASSAGE_TOKENS, answer_tokens(entry)) + 1


def fit_budget(answer: dict[str, Any], entries: list[dict[str, Any]], budget: int, query: str = "") -> dict[str, Any]:
    """Passages in order within `budget` tokens. Every document listed keeps at least a cited
    first part: as many entries are kept as fit at that minimum (the rest dropped), and a passage
    that would eat into what the later ones need is cut at a line end. The first passage is kept
    whatever the budget, cut to what is left of it (its heading line at least). When not all fit
    whole and the answer is `answerable`, the passages less than WEAK_SHARE as confident as the
    first (the end of the list: confidence never rises down it) are fitted after the others, in
    what is left. A cut passage keeps its run of lines that holds the most of the `query`'s words
    (line_weights, read only when something is cut). `truncated` says that something was cut or
    dropped, and only then."""
    words, texts = frozenset(query_words(query)), tuple(e["text"] for e in entries)

    def weights(i: int) -> list[float] | None:  # only when a passage is cut
        return _weighed(texts, words)[i] if words else None

    answer["tokens"] = 9999  # the field's own digits count
    used = answer_tokens(answer)
    weak: list[dict[str, Any]] = []
    if answer.get("answerable") and entries and used + sum(answer_tokens(e) + 1 for e in entries) > budget:
        # a passage a tenth as confident as the first took a minimum of the budget while the first
        # was cut to its opening lines, the answer under its heading cut away. Not when nothing
        # answers: among weak passages alike, each keeps its first lines (and a lower floor,
        # min_confidence, never shows fewer)
        top = entries[0].get("confidence")
        k = len(entries)
        if top:
            k = next((i for i, e in enumerate(entries) if i and (e.get("confidence") or 0.0) < WEAK_SHARE * top), k)
        entries, weak = entries[:k], entries[k:]
    mins = [_least(e) for e in entries]
    keep = 0
    while keep < len(entries) and used + sum(mins[: keep + 1]) <= budget:
        keep += 1
    keep = max(keep, min(1, len(entries)))  # the top passage, however small the budget
    answer["truncated"] = keep < len(entries) or bool(weak)
    for i, e in enumerate(entries[:keep]):
        room = budget - used - sum(mins[i + 1 : keep]) - 1  # what the later entries need stays free
        if answer_tokens(e) > room:
            # the first passage is cut to whatever is left rather than dropped: an answer with no
            # passage said "nothing relevant found" of a question whose answer ranked first
            part = cut(e, room, MIN_PASSAGE_TOKENS if i else 1, weights(i))
            answer["truncated"] = True
            if part is None:
                continue
            e = part
        answer["hits"].append(e)
        used += answer_tokens(e) + 1
    if keep == len(entries):  # the weak ones in what is left, each cut to fit or, not even its first lines, dropped
        for i, e in enumerate(weak, len(entries)):
            room = budget - used - 1
            if answer_tokens(e) > room:
                part = cut(e, room, MIN_PASSAGE_TOKENS, weights(i))
                if part is None:
                    break
                e = part
            answer["hits"].append(e)
            used += answer_tokens(e) + 1
    for _ in range(3):  # the count counts its own digits: settle it
        answer["tokens"] = answer_tokens(answer)
    return answer


# Words too common to tell one line of a passage from another (the search itself weighs words by
# how rare they are; this only picks which lines of a passage to keep)
COMMON = frozenset(
    "about after also does from have into just need should that their them then there these they this "
    "what when where which while will with would your".split()
)
_WORDS = re.compile(r"\w+")
STEM = 5  # letters a word is compared by: "permissions" and "permission", "configure" and "configuring"


@functools.lru_cache(maxsize=8)
def _weighed(texts: tuple[str, ...], words: frozenset[str]) -> list[list[float]]:
    """line_weights, kept for the rounds of one answer's fitting (mcp/answers.py fit)."""
    return line_weights(list(texts), set(words))


def query_words(query: str) -> set[str]:
    """The query's words that can tell lines apart: four letters or more, not COMMON, by their first STEM."""
    return {w[:STEM] for w in _WORDS.findall(query.lower()) if len(w) >= 4 and w not in COMMON}


def line_weights(texts: list[str], words: set[str]) -> list[list[float]]:
    """For each line of each passage, the query's words it holds, each weighed by how few of the
    answer's lines hold it (log(1 + lines / lines holding it)): a word on every line of the
    passages found (the product's name, a word of the question's topic) weighs log 2, little
    against the rare one the question turns on ("literal" in "a literal dollar sign in the
    collector's config"); the 1 keeps every word of the query worth something."""
    lines = [[words & {w[:STEM] for w in _WORDS.findall(line.lower())} for line in t.split("\n")] for t in texts]
    held = Counter(w for passage in lines for line in passage for w in line)
    total = sum(len(passage) for passage in lines)
    weight = {w: math.log(1 + total / n) for w, n in held.items()}
    return [[sum(weight[w] for w in line) for line in passage] for passage in lines]
