"""Link resolution on the real corpora (issue 35): every link written, by what it points at,
and how many of the document links the product resolves, leaves unresolved, and reports broken.

    python -m bench.quality links                       # every corpus, writes docs/benchmarks/links.md
    python -m bench.quality links --corpora foam-docs --out -   # one corpus, printed only

Each corpus of ``../shared/data/corpora`` is indexed on its own (no embedding model) into a
store in a temporary folder; the counts come from that store's links table and from
``workspace.status``. The links written are counted from the files by this module's own
reading (fenced code and code spans left out), the same for every revision of the product, so
a run with ``PYTHONPATH=<an older checkout>/daemon`` gives the "before" column.

Runs on: the benchmark's main thread (the product's own threads inside Service)."""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .common import DEFAULT_DATA, RESULTS, command_line, git_commit, log, replace_section

CORPORA = ("foam-docs", "opentelemetry-docs", "jekyll", "simpler-grants-adr", "swift-evolution")
_INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^\s()<>]*)>?(?:\s+[^)]*)?\)")
_WIKI = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_SCHEME = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|//)")
_FENCE = re.compile(r"^\s*(```+|~~~+)")


def written(root: Path) -> Counter:
    """The inline links and wikilinks written in a corpus's Markdown, by kind of destination."""
    out: Counter = Counter()
    for f in sorted(root.rglob("*")):
        if f.suffix.lower() not in (".md", ".markdown") or not f.is_file():
            continue
        text = f.read_bytes().decode("utf-8", "replace")
        fence = None
        body: list[str] = []
        for line in text.splitlines():
            m = _FENCE.match(line)
            if m and (fence is None or (m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence))):
                fence = None if fence else m.group(1)
                continue
            if fence is None:
                body.append(re.sub(r"(`+)[^`]*?\1", " ", line))
        prose = "\n".join(body)
        for m in _INLINE.finditer(prose):
            dest = m.group(1)
            kind = (
                "image"
                if m.group(0).startswith("!")
                else "external"
                if _SCHEME.match(dest)
                else "in-page"
                if dest.startswith("#") or not dest
                else "template"
                if dest.startswith(("{{", "{%"))
                else "site-absolute"
                if dest.startswith("/")
                else "relative"
            )
            out[kind] += 1
        out["wiki"] += len(_WIKI.findall(prose))
    return out


def measure(corpus: Path) -> dict[str, Any]:
    from autodoc.config import Settings
    from autodoc.service import Service

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "autodoc.db"
        s = Service(Settings.from_env(store=store))
        try:
            s.workspace_add("c", str(corpus), {"embedding": {"provider": "none"}})
            t0 = time.perf_counter()
            s.index("c")
            took = time.perf_counter() - t0
            status = s.workspace_status("c")
            tags = s.workspace_tags("c")["tags"]
        finally:
            s.close()
        db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        by_kind = {
            k: {"stored": n, "resolved": r}
            for k, n, r in db.execute(
                "SELECT kind, count(*), sum(target_path IS NOT NULL) FROM links GROUP BY kind ORDER BY kind"
            )
        }
        unresolved = Counter(
            t for (t,) in db.execute("SELECT target FROM links WHERE target_path IS NULL AND kind != 'supersedes'")
        )
        docs = db.execute("SELECT count(*) FROM documents").fetchone()[0]
        db.close()
    stored = sum(v["stored"] for v in by_kind.values())
    resolved = sum(v["resolved"] for v in by_kind.values())
    return {
        "documents": docs,
        "index_s": round(took, 1),
        "stored": stored,
        "resolved": resolved,
        "unresolved": stored - resolved,
        "status_broken": len(status["broken_links"]),
        "by_kind": by_kind,
        "top_unresolved": unresolved.most_common(8),
        "tags": len(tags),
        "top_tags": [(t["tag"], t["documents"]) for t in tags[:5]],
    }


def table(rows: dict[str, dict[str, Any]]) -> str:
    head = (
        "| corpus | links written: relative / site-absolute / wiki / in-page / external / image / template "
        "| document links stored | resolved | unresolved | `status` broken | tags (most used) |\n"
        "|---|---|---:|---:|---:|---:|---|\n"
    )
    body = []
    for name, r in rows.items():
        w = r["written"]
        body.append(
            f"| {name} | {w['relative']} / {w['site-absolute']} / {w['wiki']} / {w['in-page']} / {w['external']}"
            f" / {w['image']} / {w['template']} | {r['stored']} | {r['resolved']} | {r['unresolved']} | {r['status_broken']}"
            f" | {r['tags']} ({', '.join(f'`{t}` {n}' for t, n in r['top_tags'][:3])}) |"
        )
    return head + "\n".join(body) + "\n"


def main_links(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.quality links", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA / "corpora", help="the corpora (default %(default)s)")
    ap.add_argument("--corpora", default=",".join(CORPORA), help="comma-separated corpus folders")
    ap.add_argument(
        "--out", default=str(RESULTS / "links.md"), help="the report's section 'after' is replaced; - prints only"
    )
    ap.add_argument("--section", default="after", help="which section of the report to write (before/after)")
    a = ap.parse_args(argv)
    rows: dict[str, dict[str, Any]] = {}
    for name in a.corpora.split(","):
        log(f"links: {name}")
        rows[name] = {**measure(a.data / name), "written": written(a.data / name)}
    text = (
        f"Commit `{git_commit()}`, `{command_line()}`.\n\n"
        + table(rows)
        + "\nThe most frequent unresolved targets per corpus:\n\n"
        + "\n".join(f"- {n}: " + ", ".join(f"`{t}` ×{c}" for t, c in r["top_unresolved"]) for n, r in rows.items())
        + "\n\n<details><summary>raw</summary>\n\n```json\n"
        + json.dumps(rows, indent=1, default=list)
        + "\n```\n</details>\n"
    )
    if a.out == "-":
        print(text)
    else:
        replace_section(Path(a.out), a.section, text)
    return 0
