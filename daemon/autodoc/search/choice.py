"""After fusion, the passage that stands for its document: of a document's passages among the
candidates, the one a reader can act on, not its table of contents (pure).

A search answers with a document's best passage first, and a one-passage-per-document answer
(MCP, `per_document`) shows only that one. The legs favour passages that *list* a document's
subjects: a "Contents" section holds every heading's words and reads, to an embedding, like the
whole document; a list of links, a page's front matter, a heading with nothing under it likewise.
None of them holds an answer. `navigational` scores a passage's text 0..1 for how much of it is
such navigation; `choose` reorders each document's passages by their fused score discounted by
it, and hands them the document's own fused scores in that order: the document keeps its place
(so which documents are found does not change), and its first passage is the one that answers.

With one passage a document (search/compact.py), the leading document shows its best passages
(search/passages.py scores all of them), and `follow` moves them up behind its first and its other
passages (a table of contents that fused second, say) behind the next document's first.

Input: the fused order (fusion.py), each candidate's document and text. Output: the same
records, each document's passages re-slotted.

Runs on: the search's thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from . import fusion as F

# A navigational passage keeps this share of its fused score when its document's passages are
# ordered: a table of contents (score 1) is shown only when no other passage of its document has
# even a tenth of its score among the candidates.
NAV_KEEP = 0.1
SEP = " › "  # the breadcrumb's separator (ingest/chunk.py)
MIN_LIST_LINES = 3  # fewer link lines than this are a paragraph's references, not a list

_CONTENTS = re.compile(
    r"^(?:table\s+of\s+contents|contents|toc|on\s+this\s+page|in\s+this\s+(?:page|article|section|document|guide)"
    r"|navigation|site\s*map|index\s+of\s+\w+)\s*:?$",
    re.IGNORECASE,
)
# Sections that list a document's subjects without explaining them: a change log names every
# feature a proposal ever had. Half navigation: they lose to a section that explains (none of the
# answer-span questions' answers is in one), and stay where nothing else of their document matched.
_ABOUT = re.compile(
    r"^(?:revision\s+history|change\s*log|changes|version\s+history|acknowledge?ments|references|footnotes"
    r"|see\s+also|further\s+reading|related(?:\s+(?:pages|links|topics|resources|documents))?"
    r"|(?:additional|more|other)\s+resources)\s*:?$",
    re.IGNORECASE,
)
ABOUT_NAV = 0.5
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_LINK = re.compile(
    r"!?\[([^\]]*)\]\([^)]*\)|\[\[[^\]]*\]\]|<https?://[^>]*>|https?://\S+|\[[^\]]*\]\[[^\]]*\]"
    r"|<a\s[^>]*>.*?</a>"  # an HTML link
)
# `[id]: target "title"`: not shown when the page renders; foam puts a block of them at the end
# of every note, so they fall into its last section, which they must not make a list of links
_REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_META = re.compile(r"^\s*(?:[-*+]\s+)?\**[A-Za-z][\w ./-]{0,30}\**\s*:\**\s+\S")  # "* Status: **Implemented**"
_WORD = re.compile(r"\w+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}")


def _link_line(line: str) -> bool:
    """A line that is links and little else: a list item or table row whose words outside its links are few."""
    if not _LINK.search(line):
        return False
    rest = _LINK.sub(" ", _ITEM.sub("", line, count=1))
    return len(_WORD.findall(rest)) <= 3


def navigational(text: str, breadcrumb: str = "") -> float:
    """How much of a passage is navigation (0..1): 1 for a table of contents by its heading (its
    own, or its breadcrumb's last: the rest of a long one), else the share of its body lines that
    are links alone or metadata (`Key: value` front matter written as a list), when they are at
    least MIN_LIST_LINES or the whole body; 1 for a heading with no body; at least ABOUT_NAV
    under a heading such as "Revision history" or "See also"."""
    last = breadcrumb.rsplit(SEP, 1)[-1].strip()
    if last and _CONTENTS.match(last):
        return 1.0
    floor = ABOUT_NAV if last and _ABOUT.match(last) else 0.0
    # one pass, each line classified once: content, a link line, or a metadata line
    content = links = meta = headings = refdefs = 0
    in_fence = False
    for raw in text.split("\n"):
        if ("```" in raw or "~~~" in raw) and _FENCE.match(raw):
            in_fence = not in_fence
            content += 1  # code is content, whatever it holds
            continue
        if in_fence:
            content += 1
            continue
        line = raw.strip()
        if not line or (line[0] in "|:-" and _TABLE_RULE.match(line)):
            continue
        if line[0] == "[" and _REFDEF.match(raw):
            refdefs += 1
            continue
        if line[0] == "#":
            m = _HEADING.match(raw)
            if m:
                title = _LINK.sub(r"\1", m.group(2)).strip()
                if _CONTENTS.match(title):
                    return 1.0
                if _ABOUT.match(title):
                    floor = max(floor, ABOUT_NAV)
                headings += 1
                continue
        if ("[" in line or "://" in line or "<a" in line) and _link_line(line):
            links += 1
        elif ":" in line and _META.match(line) and len(_WORD.findall(line)) <= 8:
            meta += 1
        else:
            content += 1
    body = content + links + meta
    if not body:
        return 1.0 if headings or refdefs else floor
    nav = links + meta
    if links < MIN_LIST_LINES and nav < body:
        return floor
    return max(floor, round(nav / body, 3))


def choose(
    fused: list[F.Fused], doc_of: Mapping[int, int], nav: Mapping[int, float], keep: float | None = None
) -> list[F.Fused]:
    """Each document's passages ordered by fused score × (1 − (1 − keep) · navigational), then
    given the document's fused scores (and relevance) best first: the order of documents and the
    scores shown stay as fusion made them; which passage holds each place may change. `nav` holds
    the navigational score of the passages to weigh (absent: 0). `fused` is in score order."""
    keep = NAV_KEEP if keep is None else keep
    by_doc: dict[int, list[int]] = {}
    for i, f in enumerate(fused):
        by_doc.setdefault(doc_of[f.chunk_id], []).append(i)
    out = list(fused)
    for places in by_doc.values():
        if len(places) < 2 or not any(nav.get(fused[i].chunk_id, 0.0) for i in places):
            continue
        preferred = sorted(
            places, key=lambda i: -fused[i].score * (1.0 - (1.0 - keep) * nav.get(fused[i].chunk_id, 0.0))
        )  # stable: equal preferences keep the fused (content) order
        for slot, i in zip(places, preferred):
            out[slot] = replace(fused[i], score=fused[slot].score, relevance=fused[slot].relevance)
    return out


LEAD_NAV = 0.5  # a passage this navigational is not shown behind its document's first (search/passages.py)


def follow(fused: list[F.Fused], ids: list[int], doc_of: Mapping[int, int]) -> list[F.Fused]:
    """`ids` (passages of the first one's document) moved up behind the first, in their order, and
    the document's other passages behind the next document's first: the leading run of the order
    (what one passage a document keeps of it: search/compact.py) is the first passage and `ids`."""
    if not fused:
        return fused
    lead = doc_of[fused[0].chunk_id]
    wanted = set(ids)
    moved = [f for f in fused[1:] if f.chunk_id in wanted]
    rest = [f for f in fused[1:] if f.chunk_id not in wanted]
    nxt = next((i for i, f in enumerate(rest) if doc_of[f.chunk_id] != lead), 0)
    return [fused[0], *moved, *rest[nxt : nxt + 1], *rest[:nxt], *rest[nxt + 1 :]]
