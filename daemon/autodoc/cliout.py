"""What `autodoc search` and `autodoc workspace status` print for people (the JSON is --json's).

Input: search.query's and workspace.status's answers (or several workspaces' search answers).
Output: lines on stdout; nothing is read or written elsewhere.

Runs on: the main thread of the CLI.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from .refs import ref, shown

SHOWN_SKIPS = 20  # a workspace's status lists this many skipped files and problems, then counts the rest


def semantic_state(answer: dict[str, Any]) -> str:
    """search.query's `semantic` and `semantic_tier` in words: what the hits by meaning are worth now."""
    state, tier = answer.get("semantic"), answer.get("semantic_tier")
    why = ((answer.get("stages") or {}).get("skipped") or {}).get("semantic")
    instant = " on the instant tier (the model's own vectors are still being made)" if tier == "instant" else ""
    if "semantic" not in ((answer.get("stages") or {}).get("requested") or ["semantic"]):
        return "semantic not asked for (--stages)"  # "semantic off" read as a stage that could not run
    if state == "ready":
        return f"semantic ready{instant}"
    if state == "partial":
        return f"semantic partial{instant}: some chunks still wait for vectors, so hits may improve"
    if state == "switching":
        return f"semantic switching models{instant}: hits may change shortly"
    return f"semantic {state or 'off'}" + (f": {why}" if why else "")


def status_line(answer: dict[str, Any], hits: int, never_indexed: bool = False) -> str:
    """One line a person reads before the hits: the workspace, the mode, and semantic's state;
    `never_indexed`: the workspace holds nothing yet, so no words would find anything."""
    stages = answer.get("stages") or {}
    ran = ", ".join(stages.get("performed", [])) or "nothing"
    line = (
        f"{answer.get('workspace')}: {hits} hit{'' if hits == 1 else 's'}; mode {answer.get('mode_used')} (ran {ran}); "
    )
    line += semantic_state(answer)
    if answer.get("lexical_match") == "any":
        line += "; no chunk had every word: matched any of them"
    elif answer.get("lexical_match") == "mixed":
        line += "; too few chunks had every word: those lead, then chunks with some of them"
    elif answer.get("lexical_match") == "fuzzy":
        fixed = ", ".join(f"{a} → {b}" for a, b in (answer.get("corrections") or {}).items())
        line += f"; searched {fixed} (no chunk holds the word typed)"
    if hits and answer.get("answerable") is False:
        line += "; nothing relevant was found: these are only the closest"
    if answer.get("held_back"):
        n = answer["held_back"]
        line += f"; {n} weak hit{'' if n == 1 else 's'} held back (--min-confidence 0 shows them)"
    if answer.get("truncated"):
        line += "; the token budget cut the last passages"
    if never_indexed:
        line += f"; the workspace holds no documents yet: autodoc index {shlex.quote(answer.get('workspace') or '')}"
    return line


def print_hits(
    answers: list[dict[str, Any]], hits: list[dict[str, Any]], never_indexed: frozenset[str] = frozenset()
) -> None:
    """Each workspace's status line (and why a stage other than semantic did not run), then the hits;
    `never_indexed`: the workspaces that hold nothing yet."""
    for answer in answers:
        mine = sum(1 for h in hits if h.get("workspace", answer.get("workspace")) == answer.get("workspace"))
        print(status_line(answer, mine, answer.get("workspace") in never_indexed))
        for stage, why in ((answer.get("stages") or {}).get("skipped") or {}).items():
            if stage != "semantic":
                print(f"  {stage} skipped: {why}")
    if not hits:
        print("no hits")
    compact = any(a.get("answer") == "compact" for a in answers)
    for i, h in enumerate(hits, 1):
        if compact:  # citable passages, whole
            conf = "" if h["confidence"] is None else f"  {h['confidence']:.2f}"
            print(
                f"{i:>2}. {shown(h['ref'])}{conf}" + ("  (changed on disk since indexed)" if h.get("changed") else "")
            )
            print("    " + h["text"].replace("\n", "\n    "))
            continue
        loc = shown(ref(h.get("workspace") or answers[0]["workspace"], h["path"], h["line_start"], h["line_end"]))
        # the calibrated confidence, as --compact and MCP print it: `relevance` is each search's own
        # scale (1.00 atop an answer of nothing relevant; out of order in a merged list)
        conf = "" if h.get("confidence") is None else f"  {h['confidence']:.2f}"
        print(f"{i:>2}. {loc}{conf}  [{','.join(h.get('via', []))}]")
        print(f"    {h['breadcrumb']}")
        if h.get("superseded_by"):
            print(f"    (superseded by {h['superseded_by']})")
        snippet = h.get("snippet", "")
        if sys.stdout.isatty():
            snippet = snippet.replace("«", "\x1b[1;33m").replace("»", "\x1b[0m")
        print(f"    {snippet}")


def _some(items: list[Any], show: Any) -> list[str]:
    out = [show(x) for x in items[:SHOWN_SKIPS]]
    if len(items) > SHOWN_SKIPS:
        out.append(f"    … and {len(items) - SHOWN_SKIPS} more (--json lists them all)")
    return out


def left_out_lines(name: str, left: dict[str, Any] | None, entries: list[str]) -> list[str]:
    """What the `markdown` option left out (files.left_out), and the command that takes it in: the
    option's `entries` in effect and the new ones, since a list given replaces the one in effect (a
    hint naming only the new ones led a user to drop every .md file of the workspace)."""
    if not left or not (left["files"] or left.get("hidden_files") or left["hidden_folders"]):
        return []
    parts, more = [], [f"*{ext}" for ext in left["by_extension"]]
    if n := left["files"]:
        what = ", ".join(f"{k} {ext}" for ext, k in left["by_extension"].items())
        parts.append(f"{n} file{'s' if n > 1 else ''} that look{'' if n > 1 else 's'} like Markdown ({what})")
    shown = [e for e in left["examples"] if not e.endswith("/") and e.rsplit("/", 1)[-1].startswith(".")]
    if n := left.get("hidden_files", 0):
        parts.append(f"{n} hidden file{'s' if n > 1 else ''} ({', '.join(shown[:3])}{', …' if n > 3 else ''})")
        names = [e.rsplit("/", 1)[-1].lstrip(".") for e in shown]
        more += sorted({".*." + x.split(".", 1)[1] for x in names if "." in x})
    folders = [e for e in left["examples"] if e.endswith("/")]
    if n := left["hidden_folders"]:
        parts.append(f"{n} hidden folder{'s' if n > 1 else ''} ({', '.join(folders[:3])}{', …' if n > 3 else ''})")
        more += [f"{h}**/*.md" for h in folders[:3]]
    option = json.dumps({left["setting"]: list(dict.fromkeys([*entries, *more]))})
    return [
        f"  left out: {'; '.join(parts)}",
        f"    to index them too: autodoc workspace configure {shlex.quote(name)} {shlex.quote(option)}",
    ]


def print_status(st: dict[str, Any], markdown: list[str], *, shared: bool = False) -> None:
    """workspace.status for a person: what is indexed, what was left out and why, what meaning covers.
    `markdown`: the workspace's option in effect. `shared`: a PostgreSQL store, whose roots are
    folders on the indexer's machine: one missing here is no fault, and this machine's disk counts
    nothing."""
    files, emb, rank = st["files"], st.get("embedding") or {}, st.get("ranker") or {}
    here = st.get("root_exists", True)
    missing = " (the indexer's folder: not on this machine)" if shared else " (missing!)"
    print(f"{st['name']}: {st['root']}{'' if here else missing}")
    on_disk = f" of {files['on_disk']} on disk" if here or not shared else ""
    print(
        f"  files: {files['indexed']} indexed{on_disk}, {len(files['skipped'])} skipped; "
        f"{st['chunks']} chunks; generation {st['generation']}"
    )
    if here and files["on_disk"] and not files["indexed"]:
        print(f"  not indexed yet: autodoc index {shlex.quote(st['name'])}")
    ses = st.get("sessions") or {}
    if ses.get("sessions"):
        print(f"  sessions: {ses['sessions']} ({ses['events']} events, {ses['chunks']} chunks)")
    state = emb.get("state", "off")
    line = f"  search by meaning: {state}"
    if emb.get("available"):
        line += f" ({emb.get('model')}): {emb.get('embedded', 0)}/{emb.get('total', 0)} chunks embedded"
        if emb.get("pending"):
            eta = emb.get("eta_seconds")
            line += f", {emb['pending']} pending" + (f", about {eta:.0f} s left" if eta else "")
        inst = emb.get("instant")
        if isinstance(inst, dict):
            line += f"; instant tier {inst.get('state')} ({inst.get('embedded', 0)} vectors)"
    if emb.get("reason"):
        line += f": {emb['reason']}"
    print(line)
    print(f"  ranker: {rank.get('state', 'off')}" + (f" ({rank['model']})" if rank.get("model") else ""))
    if st.get("schema"):
        print(f"  frontmatter schema: {st['schema'].get('path')}")
    for s in _some(files["skipped"], lambda s: f"    skipped {s['path']}: {s['reason']}"):
        print(s)
    for line in left_out_lines(st["name"], files.get("left_out"), markdown):
        print(line)
    if st["problems"]:
        print(f"  problems: {len(st['problems'])}")
        for s in _some(st["problems"], lambda p: f"    {p['path']}:{p['line']}: {p['message']}"):
            print(s)
    if st["broken_links"]:
        print(f"  broken links: {len(st['broken_links'])}")
        for s in _some(st["broken_links"], lambda b: f"    {b['path']}:{b['line']}: {b['target']}"):
            print(s)


def overlaps(listed: list[dict[str, Any]], name: str, root: str) -> list[str]:
    """Notes on the other workspaces (workspace.list's) whose folder is this one, holds it or lies in
    it: a search of every workspace then shows those files twice (a second name for one folder was
    taken silently)."""
    out, mine = [], Path(root)
    for w in listed:
        theirs = Path(w["root"])
        if w["name"] == name or not (mine == theirs or mine in theirs.parents or theirs in mine.parents):
            continue
        how = (
            "indexes this folder too"
            if mine == theirs
            else "holds this folder"
            if theirs in mine.parents
            else "lies in this folder"
        )
        out.append(
            f"autodoc: note: workspace {w['name']} ({theirs}) {how}: a search of every workspace shows those files "
            f"twice (autodoc workspace remove {shlex.quote(name)} undoes this one)"
        )
    return out
