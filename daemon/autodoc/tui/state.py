"""The search picker's stage choice and what the hits' title says about an answer.

Input: the user's toggles, which stages the workspace can run now, an answer
(search.query's result). Output: the stages a search asks for, whether a
flip is allowed, the title and status lines. The choice (and the last
workspace) is kept in a small JSON file under the user's state folder
(`$XDG_STATE_HOME/autodoc/tui.json`), so it survives restarts; a box hidden
while its stage is unavailable keeps its value there and comes back as it
was left.

Everything here is pure apart from `load` and `save` (one small file).

Runs on: the TUI's event loop (the app's main thread).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("autodoc.tui")

ORDER = ("lexical", "semantic", "rerank")
RETRIEVAL = ("lexical", "semantic")  # one of these always stays checked


def state_path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "autodoc" / "tui.json"


@dataclass
class Choice:
    """What the user chose: the stage boxes and the last workspace."""

    stages: dict[str, bool] = field(default_factory=lambda: dict.fromkeys(ORDER, True))
    workspace: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"stages": dict(self.stages), "workspace": self.workspace}

    @classmethod
    def from_json(cls, data: Any) -> Choice:
        c = cls()
        if not isinstance(data, dict):
            return c
        stages = data.get("stages")
        if isinstance(stages, dict):
            for s in ORDER:
                if isinstance(stages.get(s), bool):
                    c.stages[s] = stages[s]
        if not any(c.stages[s] for s in RETRIEVAL):  # a file edited by hand: keep the rule
            c.stages["lexical"] = True
        ws = data.get("workspace")
        c.workspace = ws if isinstance(ws, str) and ws else None
        return c


def load(path: Path) -> Choice:
    try:
        return Choice.from_json(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return Choice()
    except (OSError, ValueError) as e:  # unreadable or not JSON: start from the defaults, say why
        log.warning("ignoring %s: %s", path, e)
        return Choice()


def save(path: Path, choice: Choice) -> None:
    """Write the choice atomically (a rename), so a crash never leaves half a file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(choice.to_json(), indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    except OSError as e:  # a read-only home must not stop the search
        log.warning("cannot keep the stage choice in %s: %s", path, e)


@dataclass(frozen=True)
class Available:
    """Which stages the workspace can run now (a box shows only while its stage can)."""

    semantic: bool = False
    rerank: bool = False
    ranker_model: str | None = None

    def shows(self, stage: str) -> bool:
        return stage == "lexical" or bool(getattr(self, stage))


def effective(choice: Choice, avail: Available) -> dict[str, bool]:
    """The boxes as shown: a hidden semantic box cannot carry the search alone,
    so lexical shows checked then (the stored choice is not changed)."""
    out = dict(choice.stages)
    if not avail.semantic and not out["lexical"]:
        out["lexical"] = True
    return out


def locked(choice: Choice, avail: Available, stage: str) -> bool:
    """True when unchecking `stage` would leave no retrieval stage."""
    if stage not in RETRIEVAL:
        return False
    shown = effective(choice, avail)
    others = [s for s in RETRIEVAL if s != stage and shown[s] and avail.shows(s)]
    return shown[stage] and not others


def flip(choice: Choice, avail: Available, stage: str, value: bool) -> str | None:
    """Set one box; None when done, else why not (the keep-one-of-two rule)."""
    if stage not in ORDER:
        return f"no stage {stage}"
    if not value and locked(choice, avail, stage):
        return "one of Lexical and Semantic stays checked"
    choice.stages[stage] = value
    return None


def requested(choice: Choice, avail: Available) -> list[str]:
    """search.query's `stages`. A checked stage whose box is hidden is still
    asked for, so the answer says why it was skipped; semantic alone is
    never asked for while it cannot run (that would be an error, not an answer)."""
    shown = effective(choice, avail)
    return [s for s in ORDER if shown[s]]


def rerank_label(avail: Available) -> str:
    return f"Rerank ({avail.ranker_model})" if avail.ranker_model else "Rerank"


@dataclass(frozen=True)
class Embedding:
    """The workspace's embedding state as last reported (workspace.status, embedding.progress)."""

    state: str | None = None
    pending: int | None = None
    reason: str | None = None


def describe(
    answer: dict[str, Any] | None,
    choice: Choice,
    avail: Available,
    emb: Embedding,
    error: str | None = None,
    query: str = "",
) -> tuple[str, str]:
    """(title, status) for the hits: the count and what the daemon did with the
    stages — re-ranked by whom or why not, semantic state with what is pending,
    every skipped stage and its reason."""
    if error:
        return "error", error
    if answer is None:
        return "", ("searching…" if query.strip() else "type to search")
    n = len(answer.get("hits") or [])
    title = f"{n} hit" + ("" if n == 1 else "s")
    if answer.get("mode_used") == "facet":
        return title, "only facets: the matching files, in path order"
    stages = answer.get("stages") or {}
    performed = stages.get("performed") or []
    skipped = dict(stages.get("skipped") or {})
    rank = answer.get("rank") or {}
    parts: list[str] = []
    if "rerank" in performed:
        parts.append(f"re-ranked by {rank.get('model') or '?'}")
    elif not choice.stages["rerank"]:
        parts.append("not re-ranked: Rerank is unchecked")
    else:
        why = skipped.get("rerank") or rank.get("error") or rank.get("state") or "not performed"
        parts.append(f"not re-ranked: {why}")
    skipped.pop("rerank", None)
    sem = answer.get("semantic")
    if "semantic" in performed:
        if sem == "ready":
            parts.append("semantic ready")
        else:
            parts.append(_semantic_detail(sem, emb))
    elif "semantic" in (stages.get("requested") or []):
        why = skipped.pop("semantic", None) or "not performed"
        parts.append(f"semantic skipped: {why}" + (f" ({sem})" if sem in ("partial", "switching") else ""))
    else:
        parts.append("semantic unchecked")
    skipped.pop("semantic", None)
    for stage, why in skipped.items():
        parts.append(f"{stage} skipped: {why}")
    if answer.get("lexical_match") == "any":
        parts.append("no chunk had every word: matched any")
    elif answer.get("lexical_match") == "mixed":
        parts.append("few chunks had every word: then some of them")
    elif answer.get("lexical_match") == "fuzzy":
        parts.append("searched " + ", ".join(f"{a} → {b}" for a, b in (answer.get("corrections") or {}).items()))
    if held := answer.get("held_back"):  # the relevance floor (PROTOCOL.md): the list stops where matches stop
        parts.append(f"{held} weak hit{'' if held == 1 else 's'} held back")
    return title, " · ".join(parts)


def never_indexed(status: dict[str, Any] | None) -> bool:
    """workspace.status of a workspace added and never indexed: no document, no session, so no
    words would find anything (the search's own answer cannot tell that from words that miss)."""
    return status is not None and not (status.get("files") or {}).get("indexed") and not status.get("chunks")


def _semantic_detail(sem: str | None, emb: Embedding) -> str:
    text = f"semantic {sem or '?'}"
    if emb.reason:
        text += f": {emb.reason}"
    elif emb.pending:
        text += f": {emb.pending} chunks wait for vectors"
    return text
